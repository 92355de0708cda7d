"""A VGF file as a condensed, JSON-serialisable summary, from ``vgf_dump``.

``summarize_vgf(path)`` runs the ``vgf_dump`` binary shipped in
ai-ml-sdk-vgf-library and condenses its JSON: the model sequence's segments,
their modules and bindings (resource category, Vulkan format, shape), and the
constants, with hashes of each module's SPIR-V code and each constant's bytes.
No file paths. The ``vgf`` section of a golden keeps part of it
(:func:`vgf_conformance.goldens.sections.golden_vgf`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

from vgf_conformance import process


def find_vgf_dump() -> str:
    """Prefer the native binary inside vgf_lib (the venv's bin/vgf_dump is a
    Python console-script shim that just re-execs it, ~+0.1 s)."""
    try:
        spec = importlib.util.find_spec("vgf_lib")
        if spec and spec.submodule_search_locations:
            cand = os.path.join(list(spec.submodule_search_locations)[0], "binaries", "bin", "vgf_dump")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    except Exception:
        pass
    cand = os.path.join(os.path.dirname(sys.executable), "vgf_dump")
    if os.path.isfile(cand):
        return cand
    w = shutil.which("vgf_dump")
    if w:
        return w
    raise FileNotFoundError("vgf_dump not found (pip install ai-ml-sdk-vgf-library)")


def vgf_dump_json(path: str, timeout: float = 60) -> dict:
    """``vgf_dump``'s JSON description of a VGF file."""
    exe = find_vgf_dump()
    return json.loads(process.run_tool([exe, "--input", path, "--output", "-"], what="vgf_dump",
                                       timeout=timeout).stdout)


def _dumped(path: str, flag: str, index: int, timeout: float = 60) -> bytes:
    """What ``vgf_dump --dump-spirv|--dump-constant INDEX`` writes: a module's
    SPIR-V code or a constant's raw bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dump.bin"
        process.run_tool([find_vgf_dump(), "--input", path, "--output", str(out), flag, str(index)],
                         what=f"vgf_dump {flag} {index}", timeout=timeout)
        if not out.exists():
            raise RuntimeError(f"vgf_dump {flag} {index} wrote nothing")
        return out.read_bytes()


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


#: SPIR-V: the header's length in words, and the opcodes read here.
_SPIRV_HEADER_WORDS = 5
_OP_EXT_INST_IMPORT, _OP_EXT_INST, _OP_CONSTANT, _OP_CONSTANT_COMPOSITE = 11, 12, 43, 44
#: The extended instruction set of a VGF graph module's TOSA operators.
TOSA_INSTRUCTION_SET = "TOSA."
#: TOSA.001000.1's operators by instruction number: the TOSA 1.0
#: specification's operator order (checked against the converter's modules:
#: tests/test_vgf_mask.py).
TOSA_INSTRUCTIONS = {name: number for number, name in enumerate((
    "ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "FFT2D", "MATMUL", "MAX_POOL2D", "RFFT2D",
    "TRANSPOSE_CONV2D", "CLAMP", "ERF", "SIGMOID", "TANH", "ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND",
    "BITWISE_OR", "BITWISE_XOR", "INTDIV", "LOGICAL_AND", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR",
    "LOGICAL_XOR", "MAXIMUM", "MINIMUM", "MUL", "POW", "SUB", "TABLE", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS",
    "EXP", "FLOOR", "LOG", "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN", "SELECT", "EQUAL", "GREATER",
    "GREATER_EQUAL", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM",
    "CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE", "GATHER", "SCATTER", "RESIZE", "CAST",
    "RESCALE"))}


@dataclasses.dataclass(frozen=True)
class CalibratedOperand:
    """A TOSA operator's operand computed from calibrated scales, where a
    graph module's SPIR-V holds it: the operator's kind, its place among the
    graph's operators of that kind (``ordinal`` of ``count``), the operand's
    place counted from the last of the operator's ``OpExtInst`` operands
    (``from_end``: a TOSA ``OpExtInst`` lists the attributes, then the tensor
    operands in the specification's order), and the values the TOSA
    flatbuffer gives it."""

    kind: str
    ordinal: int
    count: int
    from_end: int
    values: tuple[int, ...]


def _words(code: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(code) // 4}I", code[: len(code) // 4 * 4]))


def _instructions(words: list[int]):
    """``(opcode, first operand's word index, operand count)`` of each
    instruction, in order; stops at a word that is not an instruction."""
    i = _SPIRV_HEADER_WORDS
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            return  # not SPIR-V as expected: the caller hashes what is there
        yield opcode, i + 1, count - 1
        i += count


def _literal_string(words: list[int]) -> str:
    return struct.pack(f"<{len(words)}I", *words).split(b"\0")[0].decode("utf-8", "replace")


def mask_operands(code: bytes, operands: list[CalibratedOperand]) -> bytes:
    """SPIR-V ``code`` with the literals of the calibrated ``operands`` set to
    zero, each only where the code holds it where the TOSA flatbuffer does.

    The k-th operator of a kind in the flatbuffer is the k-th TOSA
    ``OpExtInst`` of that kind's number in the code, when the code has as
    many of them (the converter folds some operators away; if it folded one
    of these, nothing of that kind is masked). An operand is masked only when
    the constants at its place in its own operator's instruction hold exactly
    the flatbuffer's values: a multiplier that the converter moved to another
    operator, or swapped with another's, stays in the code and changes
    ``code_hash_masked``."""
    words = _words(code)
    sets, ext, constants, composites = set(), {}, {}, {}
    for opcode, at, n in _instructions(words):
        if opcode == _OP_EXT_INST_IMPORT and _literal_string(words[at + 1: at + n]).startswith(TOSA_INSTRUCTION_SET):
            sets.add(words[at])
        elif opcode == _OP_EXT_INST and n >= 4 and words[at + 2] in sets:
            ext.setdefault(words[at + 3], []).append(words[at + 4: at + n])
        elif opcode == _OP_CONSTANT and n == 3:
            constants[words[at + 1]] = at + 2
        elif opcode == _OP_CONSTANT_COMPOSITE:
            composites[words[at + 1]] = words[at + 2: at + n]

    def literals(ident: int) -> list[int] | None:
        """The word indices of the scalar constants a constant is made of."""
        if ident in constants:
            return [constants[ident]]
        if ident not in composites:  # a graph constant, a null constant: not a literal of the code
            return None
        parts = [literals(part) for part in composites[ident]]
        return None if None in parts else [at for part in parts for at in part]

    masked = list(words)
    for operand in operands:
        of_kind = ext.get(TOSA_INSTRUCTIONS.get(operand.kind, -1), [])
        if len(of_kind) != operand.count or operand.from_end > len(of_kind[operand.ordinal]):
            continue
        at = literals(of_kind[operand.ordinal][-operand.from_end])
        if at is not None and [words[i] for i in at] == [v & 0xFFFFFFFF for v in operand.values]:
            for i in at:
                masked[i] = 0
    return struct.pack(f"<{len(masked)}I", *masked)


def _descriptor_set(index: int, info, binding) -> dict:
    # vgf_dump 0.11 writes {"set_index", "bindings"}; 0.9 a bare list of bindings.
    if isinstance(info, list):
        return {"set": index, "bindings": [binding(b) for b in info]}
    return {"set": info.get("set_index"), "bindings": [binding(b) for b in info.get("bindings", [])]}


def _code_hashes(path: str, module: dict, calibrated: list[CalibratedOperand]) -> dict:
    if not (module.get("shader_code_available") and module.get("shader_type") == "SPIR-V"):
        return {"code_hash": None}
    code = _dumped(path, "--dump-spirv", module["index"])
    hashes = {"code_hash": _hash(code)}
    without = mask_operands(code, calibrated) if calibrated else code
    if without != code:
        hashes["code_hash_masked"] = _hash(without)
    return hashes


def summarize_vgf(path: str, calibrated: list[CalibratedOperand] = ()) -> dict:
    """Condensed VGF description: module/segment sequence, bindings with
    resource category/format/shape, constants. No file paths. Where a
    module's SPIR-V code holds the ``calibrated`` operands of the TOSA graph
    it was converted from (:func:`mask_operands`), ``code_hash_masked``
    hashes it without them."""
    d = vgf_dump_json(path)
    resources = {r["index"]: r for r in d.get("resources", [])}
    modules = {m["index"]: m for m in d.get("modules", [])}
    consts = {c["index"]: c for c in d.get("constants", [])}

    def res(mrt_index):
        r = resources.get(mrt_index, {})
        out = {"category": r.get("category"), "vk_format": r.get("vk_format"),
               "shape": r.get("shape"), "descriptor_type": r.get("vk_descriptor_type")}
        if r.get("stride"):
            out["stride"] = r["stride"]
        return out

    def binding(b):
        x = {"binding": b.get("binding")}
        x.update(res(b.get("mrt_index")))
        return x

    ms = d.get("model_sequence", {})
    segs = []
    for s in ms.get("segments", []):
        m = modules.get(s.get("module_index"), {})
        seg = {
            "index": s.get("index"),
            "type": s.get("type"),
            "name": s.get("name"),
            "module": {
                "type": m.get("type"), "name": m.get("name"), "entry_point": m.get("entry_point"),
                "shader_type": m.get("shader_type"), "has_code": m.get("shader_code_available"),
                # The module's code (SPIR-V: the graph or the compute shader) by hash.
                **_code_hashes(path, m, calibrated),
            },
            "inputs": [binding(b) for b in s.get("inputs", [])],
            "outputs": [binding(b) for b in s.get("outputs", [])],
            "descriptor_sets": [_descriptor_set(i, ds, binding)
                                for i, ds in enumerate(s.get("descriptor_set_infos", []))],
            "constants": [
                {"shape": res(consts.get(ci, {}).get("mrt_index")).get("shape"),
                 "vk_format": res(consts.get(ci, {}).get("mrt_index")).get("vk_format"),
                 "sparsity_dimension": consts.get(ci, {}).get("sparsity_dimension"),
                 "hash": _hash(_dumped(path, "--dump-constant", ci))}
                for ci in s.get("constants", [])
            ],
            "dispatch_shape": s.get("dispatch_shape"),
            "push_constant_ranges": len(s.get("push_constant_ranges", [])),
        }
        segs.append(seg)
    cats: dict[str, int] = {}
    for r in resources.values():
        cats[r.get("category")] = cats.get(r.get("category"), 0) + 1
    h = d.get("header", {})
    return {
        "format": "vgf",
        "vgf_version": f"{h.get('major')}.{h.get('minor')}.{h.get('patch')}",
        "segment_sequence": [f"{s['type']}:{s['module']['entry_point']}" for s in segs],
        "inputs": [dict(name=b.get("name"), **binding(b)) for b in ms.get("inputs", [])],
        "outputs": [dict(name=b.get("name"), **binding(b)) for b in ms.get("outputs", [])],
        "segments": segs,
        "resource_counts": dict(sorted(cats.items())),
        "constants_count": len(consts),
        "modules_count": len(modules),
    }
