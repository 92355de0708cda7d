"""Stable, JSON-serialisable summaries of TOSA 1.0 flatbuffers and VGF files.

These feed the ``tosa`` and ``vgf`` sections of the goldens (through
:func:`golden_tosa` and :func:`golden_vgf`, which keep what matters for a
readable diff) and map reference-model errors back to operators.

* ``summarize_tosa(fb_bytes)`` parses a TOSA flatbuffer with the generated
  FlatBuffers Python bindings that tosa-tools ships as the top-level package
  ``tosa`` (``tosa.TosaGraph``, ``tosa.TosaOperator`` ...; schema file
  ``site-packages/bin/tosa.fbs``). No torch, no executorch, no C++ extension.
* ``summarize_vgf(path)`` runs the ``vgf_dump`` binary shipped in
  ai-ml-sdk-vgf-library and condenses its JSON.

Stability rules
---------------
* Tensor names are NOT part of the default output. Operands are referenced
  structurally: ``"graph_input[i]"``, ``"op[k].out[j]"`` (k = index among the
  non-constant operators), or inlined as a constant.
* CONST / CONST_SHAPE operators are folded into their consumers. In TOSA 1.0
  most "attributes" (RESIZE scale/offset/border, RESCALE multiplier/shift,
  zero points, PAD padding, SLICE start/size, ...) are such constant operands;
  they are resolved into plain int lists under ``"operands"``.
* Large constants (weights) are summarised as shape/dtype/count/min/max and,
  by default, a truncated sha256 of the raw bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from typing import Any

import numpy as np

# Generated FlatBuffers bindings shipped with tosa-tools (package "tosa").
import tosa.Attribute as _fb_attr_mod
import tosa.BlockSize as _fb_blocksize
import tosa.DType as _fb_dtype
import tosa.NanPropagationMode as _fb_nan
import tosa.Op as _fb_op
import tosa.ResizeMode as _fb_resize_mode
import tosa.RoundingMode as _fb_rounding
import tosa.TosaGraph as _fb_graph
import importlib


def _enum_names(cls) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


OP_NAMES = _enum_names(_fb_op.Op)
DTYPE_NAMES = _enum_names(_fb_dtype.DType)
ATTR_NAMES = _enum_names(_fb_attr_mod.Attribute)
ENUM_FIELDS = {
    "AccType": DTYPE_NAMES,
    "Mode": _enum_names(_fb_resize_mode.ResizeMode),
    "RoundingMode": _enum_names(_fb_rounding.RoundingMode),
    "NanMode": _enum_names(_fb_nan.NanPropagationMode),
    "BlockSize": _enum_names(_fb_blocksize.BlockSize),
}

CONST_OPS = {"CONST", "CONST_SHAPE"}

# TOSA 1.0 operand order (spec "Arguments" tables) for ops whose extra operands
# are usually compile-time constants.
OPERAND_NAMES = {
    "RESCALE": ["input", "multiplier", "shift", "input_zp", "output_zp"],
    "RESIZE": ["input", "scale", "offset", "border"],
    "CONV2D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "CONV3D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "DEPTHWISE_CONV2D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "TRANSPOSE_CONV2D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "AVG_POOL2D": ["input", "input_zp", "output_zp"],
    "MAX_POOL2D": ["input"],
    "PAD": ["input", "padding", "pad_const"],
    "SLICE": ["input", "start", "size"],
    "TILE": ["input", "multiples"],
    "RESHAPE": ["input", "shape"],
    "TRANSPOSE": ["input"],
    "MATMUL": ["a", "b", "a_zp", "b_zp"],
    "MUL": ["input1", "input2", "shift"],
    "NEGATE": ["input", "input_zp", "output_zp"],
    "TABLE": ["input", "table"],
    "GATHER": ["values", "indices"],
    "SCATTER": ["values_in", "indices", "input"],
    "SELECT": ["cond", "on_true", "on_false"],
    "CLAMP": ["input"],
}

# dtype -> (numpy dtype, bytes per element) for raw constant data
_NP_DTYPES = {
    "BOOL": (np.uint8, 1),
    "INT8": (np.dtype("<i1"), 1),
    "INT16": (np.dtype("<i2"), 2),
    "INT32": (np.dtype("<i4"), 4),
    "INT64": (np.dtype("<i8"), 8),
    "SHAPE": (np.dtype("<i8"), 8),
    "FP32": (np.dtype("<f4"), 4),
    "FP16": (np.dtype("<f2"), 2),
}


# --------------------------------------------------------------------------
# raw value decoding
# --------------------------------------------------------------------------

def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _vec(obj, name) -> list:
    """Read a flatbuffer vector field. (XAsNumpy() returns int 0 when absent!)"""
    if getattr(obj, name + "Length")() == 0:
        return []
    return getattr(obj, name + "AsNumpy")().tolist()


def _raw_bytes(obj, name="Data") -> bytes:
    if obj is None or getattr(obj, name + "Length")() == 0:
        return b""
    return getattr(obj, name + "AsNumpy")().tobytes()


def decode_data(raw: bytes, dtype: str, count: int | None) -> list | None:
    """Decode raw little-endian constant bytes into a python list (or None)."""
    if dtype in _NP_DTYPES:
        npd, size = _NP_DTYPES[dtype]
        n = len(raw) // size if count is None else min(count, len(raw) // size)
        arr = np.frombuffer(raw[: n * size], dtype=npd)
        if dtype == "BOOL":
            return [bool(v) for v in arr]
        return arr.tolist()
    if dtype == "INT4":  # two signed nibbles per byte, low nibble first
        vals = []
        for b in raw:
            for nib in (b & 0xF, b >> 4):
                vals.append(nib - 16 if nib >= 8 else nib)
        return vals[:count] if count is not None else vals
    if dtype == "INT48":
        n = len(raw) // 6 if count is None else min(count, len(raw) // 6)
        return [int.from_bytes(raw[6 * i: 6 * i + 6], "little", signed=True) for i in range(n)]
    if dtype in ("BF16", "FP8E4M3", "FP8E5M2"):
        try:
            import ml_dtypes
            npd = {"BF16": ml_dtypes.bfloat16, "FP8E4M3": ml_dtypes.float8_e4m3fn,
                   "FP8E5M2": ml_dtypes.float8_e5m2}[dtype]
            isz = np.dtype(npd).itemsize
            n = len(raw) // isz if count is None else min(count, len(raw) // isz)
            return np.frombuffer(raw[: n * isz], dtype=npd).astype(np.float32).tolist()
        except Exception:  # pragma: no cover
            return None
    return None


def _clean_float(v: float):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def _short_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


# --------------------------------------------------------------------------
# attribute reflection
# --------------------------------------------------------------------------

_SKIP_METHODS = {"Init"}


def _camel_to_snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def _attribute_dict(op) -> tuple[str, dict]:
    """Return (attribute type name, {field: value}) for a TosaOperator."""
    atype = op.AttributeType()
    aname = ATTR_NAMES.get(atype, f"UNKNOWN_{atype}")
    table = op.Attribute()
    if atype == 0 or table is None:
        return aname, {}
    mod = importlib.import_module(f"tosa.{aname}")
    cls = getattr(mod, aname)
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    fields = {}
    for meth in dir(cls):
        if meth.startswith("_") or meth in _SKIP_METHODS or meth.startswith("GetRootAs"):
            continue
        if meth.endswith(("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")):
            continue
        key = _camel_to_snake(meth)
        if hasattr(cls, meth + "Length"):  # vector field
            if meth in ("MinVal", "MaxVal", "ImplementationAttrs"):
                fields[key] = _raw_bytes(obj, meth)  # decoded by caller
            else:
                fields[key] = _vec(obj, meth)
            continue
        val = getattr(obj, meth)()
        if isinstance(val, bytes):
            val = val.decode("utf-8", "replace")
        elif meth in ENUM_FIELDS:
            val = ENUM_FIELDS[meth].get(val, val)
        elif isinstance(val, (np.bool_, bool)):
            val = bool(val)
        elif isinstance(val, (np.integer,)):
            val = int(val)
        fields[key] = val
    return aname, fields


def _summarize_json_payload(obj, max_str=96):
    """Replace long strings (e.g. base64 SPIR-V) by length + hash."""
    if isinstance(obj, dict):
        return {k: _summarize_json_payload(v, max_str) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [_summarize_json_payload(v, max_str) for v in obj]
    if isinstance(obj, str) and len(obj) > max_str:
        return {"len": len(obj), "sha256_16": _short_hash(obj.encode())}
    return obj


def _decode_custom_attrs(raw: bytes):
    if not raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes": len(raw), "sha256_16": _short_hash(raw)}
    try:
        return {"json": _summarize_json_payload(json.loads(text))}
    except ValueError:
        if len(text) <= 96:
            return {"text": text}
        return {"bytes": len(raw), "sha256_16": _short_hash(raw)}


# --------------------------------------------------------------------------
# spec checks that the reference model enforces (ERROR_IF)
# --------------------------------------------------------------------------

def resize_spec_errors(in_shape, out_shape, scale, offset, border) -> list[str]:
    """Static re-statement of the TOSA 1.0 RESIZE ERROR_IF rules (reference
    model src/ops/image.cpp). Empty list == valid."""
    errs = []
    if len(scale) != 4 or len(offset) != 2 or len(border) != 2:
        return ["scale/offset/border not constant or wrong length"]
    yn, yd, xn, xd = scale
    oy, ox = offset
    by, bx = border
    ih, iw = in_shape[1], in_shape[2]
    oh, ow = out_shape[1], out_shape[2]
    if max(ih, iw, oh, ow) >= 16384:
        errs.append("max(IH,IW,OH,OW) >= 16384")
    if min(yn, yd, xn, xd) <= 0:
        errs.append("scale values must be > 0")
    else:
        if yn > 2048 or xn > 2048:
            errs.append("scale_n > 2048")
        if yd >= 16 * yn or xd >= 16 * xn:
            errs.append(f"scale_d >= 16*scale_n (downscale <= 1/16): y={yn}/{yd} x={xn}/{xd}")
        if oy < -yn or oy >= 16 * yn or ox < -xn or ox >= 16 * xn:
            errs.append("offset out of [-scale_n, 16*scale_n)")
        if by < -16 * yn or by >= yn or bx < -16 * xn or bx >= xn:
            errs.append("border out of [-16*scale_n, scale_n)")
        for dim, i, o, n, d, off, b in (("H", ih, oh, yn, yd, oy, by), ("W", iw, ow, xn, xd, ox, bx)):
            num = (i - 1) * n - off + b
            if num % d != 0:
                errs.append(f"O{dim}: ((I{dim}-1)*n - offset + border) not divisible by scale_d")
            elif o != num // d + 1:
                errs.append(f"O{dim}={o} != expected {num // d + 1}")
    return errs


# --------------------------------------------------------------------------
# TOSA summary
# --------------------------------------------------------------------------

class _Block:
    def __init__(self, blk):
        self.blk = blk
        self.tensors = {}
        for i in range(blk.TensorsLength()):
            t = blk.Tensors(i)
            shape = _vec(t, "Shape")
            dtype = DTYPE_NAMES.get(t.Type(), str(t.Type()))
            self.tensors[t.Name().decode()] = {
                "shape": [int(s) for s in shape], "dtype": dtype,
                "raw": _raw_bytes(t), "variable": bool(t.Variable()),
                "unranked": bool(t.IsUnranked()),
            }
        # TOSA 1.0: CONST_SHAPE results live in the block's `shapes` table
        # (rank == number of elements, data == int64 little endian).
        self.shapes = {}
        for i in range(blk.ShapesLength()):
            s = blk.Shapes(i)
            raw = _raw_bytes(s)
            self.shapes[s.Name().decode()] = {"shape": [int(s.Rank())], "dtype": "SHAPE", "raw": raw}
        self.inputs = [blk.Inputs(i).decode() for i in range(blk.InputsLength())]
        self.outputs = [blk.Outputs(i).decode() for i in range(blk.OutputsLength())]
        self.ops = [blk.Operators(i) for i in range(blk.OperatorsLength())]

    def info(self, name):
        return self.tensors.get(name) or self.shapes.get(name) or {"shape": None, "dtype": "UNKNOWN", "raw": b""}


def _const_value(info, max_inline):
    dtype = info["dtype"]
    shape = info["shape"] or []
    count = _prod(shape) if shape is not None else None
    raw = info["raw"]
    vals = decode_data(raw, dtype, count)
    out = {"shape": shape, "dtype": dtype}
    if vals is not None and len(vals) <= max_inline:
        out["value"] = [_clean_float(v) for v in vals]
    else:
        out["count"] = count
        if vals:
            finite = [v for v in vals if not (isinstance(v, float) and not math.isfinite(v))]
            if finite:
                out["min"] = _clean_float(min(finite))
                out["max"] = _clean_float(max(finite))
    if vals is not None and count is not None and len(vals) < count:
        out["short_data"] = True
    return out


def _scalar_or_list(v):
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def summarize_tosa(
    fb: bytes,
    *,
    include_names: bool = False,
    include_fb_index: bool = False,
    hash_constants: bool = True,
    max_inline: int = 16,
) -> dict[str, Any]:
    """Parse a TOSA flatbuffer into a stable, JSON-serialisable description.

    include_names: add tensor names (unstable across exporter versions).
    include_fb_index: add each op's index in the flatbuffer operator list
        (== the reference model's "Node ... ID: n"); depends on CONST placement.
    hash_constants: add sha256[:16] of large constant data (weights).
    max_inline: constants with <= this many elements are inlined as values.
    """
    buf = bytearray(fb) if not isinstance(fb, bytearray) else fb
    if not _fb_graph.TosaGraph.TosaGraphBufferHasIdentifier(buf, 0):
        raise ValueError("not a TOSA flatbuffer (file identifier 'TOSA' missing)")
    g = _fb_graph.TosaGraph.GetRootAs(buf, 0)
    v = g.Version()
    result: dict[str, Any] = {
        "format": "tosa-flatbuffer",
        "tosa_version": f"{v._Major()}.{v._Minor()}.{v._Patch()}" + ("d" if v._Draft() else ""),
    }
    blocks = []
    for r in range(g.RegionsLength()):
        reg = g.Regions(r)
        for b in range(reg.BlocksLength()):
            blocks.append((reg.Name().decode(), reg.Blocks(b)))
    if not blocks:
        raise ValueError("TOSA graph has no basic blocks")
    summaries = [
        _summarize_block(_Block(blk), include_names, include_fb_index, hash_constants, max_inline)
        for _, blk in blocks
    ]
    main = summaries[0]
    result.update(main)
    if len(summaries) > 1:  # control flow (COND_IF / WHILE_LOOP) sub-blocks
        result["other_blocks"] = [
            dict(s, region=rname) for (rname, _), s in zip(blocks[1:], summaries[1:])
        ]
    return result


def _summarize_block(B: _Block, include_names, include_fb_index, hash_constants, max_inline):
    producer: dict[str, str] = {}
    for i, name in enumerate(B.inputs):
        producer[name] = f"graph_input[{i}]"
    const_ops = 0
    const_bytes = 0
    ops_out = []
    k = 0
    for fb_idx, op in enumerate(B.ops):
        opname = OP_NAMES.get(op.Op(), f"UNKNOWN_{op.Op()}")
        in_names = [op.Inputs(i).decode() for i in range(op.InputsLength())]
        out_names = [op.Outputs(i).decode() for i in range(op.OutputsLength())]
        if opname in CONST_OPS:
            const_ops += 1
            for n in out_names:
                producer[n] = "const"
                const_bytes += len(B.info(n)["raw"])
            continue
        aname, attrs = _attribute_dict(op)
        entry: dict[str, Any] = {"index": k, "op": opname}
        if include_fb_index:
            entry["fb_index"] = fb_idx
        roles = OPERAND_NAMES.get(opname, [])
        operands = []
        for pos, n in enumerate(in_names):
            info = B.info(n)
            role = roles[pos] if pos < len(roles) else f"input{pos}"
            src = producer.get(n)
            if src is None and info["raw"]:
                src = "const"  # tensor with data but no CONST op
            d: dict[str, Any] = {"role": role}
            if src == "const":
                c = _const_value(info, max_inline)
                if hash_constants and "value" not in c:
                    c["sha256_16"] = _short_hash(info["raw"])
                d["const"] = c
            else:
                d["from"] = src if src is not None else "UNRESOLVED"
                d["shape"] = info["shape"]
                d["dtype"] = info["dtype"]
            if include_names:
                d["name"] = n
            operands.append(d)
        outs = []
        for j, n in enumerate(out_names):
            info = B.info(n)
            o = {"shape": info["shape"], "dtype": info["dtype"]}
            if include_names:
                o["name"] = n
            outs.append(o)
            producer[n] = f"op[{k}].out[{j}]"
        entry["inputs"] = [d for d in operands if "const" not in d]
        big = {d["role"]: d["const"] for d in operands if "const" in d and "value" not in d["const"]}
        if big:
            entry["const_operands"] = big
        entry["outputs"] = outs
        entry["attrs"] = _op_attrs(opname, attrs, operands, outs, B, in_names)
        entry["brief"] = _brief(entry)
        ops_out.append(entry)
        k += 1

    def io(names, is_input):
        lst = []
        for i, n in enumerate(names):
            info = B.info(n)
            d = {"index": i, "shape": info["shape"], "dtype": info["dtype"]}
            if not is_input:
                d["from"] = producer.get(n, "UNRESOLVED")
            if include_names:
                d["name"] = n
            lst.append(d)
        return lst

    counts: dict[str, int] = {}
    for e in ops_out:
        counts[e["op"]] = counts.get(e["op"], 0) + 1
    return {
        "inputs": io(B.inputs, True),
        "outputs": io(B.outputs, False),
        "op_sequence": [e["op"] for e in ops_out],
        "op_counts": dict(sorted(counts.items())),
        "constants": {"const_ops": const_ops, "data_bytes": const_bytes},
        "brief": [e["brief"] for e in ops_out],
        "operators": ops_out,
    }


def _fmt_t(d):
    shape = d.get("shape")
    dims = "x".join(str(x) for x in shape) if shape is not None else "?"
    return f"{d.get('dtype')}[{dims}]"


def _round_floats(v):
    if isinstance(v, float):
        return float(f"{v:.6g}")
    if isinstance(v, list):
        return [_round_floats(x) for x in v]
    return v


def _brief(entry) -> str:
    """One-line human readable description of an operator (for diffs)."""
    a = entry["attrs"]
    keys = {
        "RESIZE": ["mode", "scale", "offset", "border"],
        "RESCALE": ["multiplier", "shift", "input_zp", "output_zp", "rounding_mode", "per_channel", "scale32",
                    "input_unsigned", "output_unsigned"],
        "CONV2D": ["pad", "stride", "dilation", "input_zp", "weight_zp", "acc_type", "bias"],
        "DEPTHWISE_CONV2D": ["pad", "stride", "dilation", "input_zp", "weight_zp", "acc_type", "bias"],
        "AVG_POOL2D": ["kernel", "stride", "pad", "input_zp", "output_zp", "acc_type"],
        "MAX_POOL2D": ["kernel", "stride", "pad"],
        "PAD": ["padding", "pad_const"],
        "SLICE": ["start", "size"],
        "TRANSPOSE": ["perms"],
        "RESHAPE": ["shape"],
        "CLAMP": ["min_val", "max_val"],
        "CUSTOM": ["domain_name", "operator_name"],
    }.get(entry["op"], sorted(k for k in a if not isinstance(a[k], (dict, list)) or len(a[k]) <= 8))
    parts = []
    for k in keys:
        if k in a:
            v = _round_floats(a[k])
            if isinstance(v, list) and len(v) > 4 and len(set(map(str, v))) == 1:
                v = f"{v[0]}x{len(v)}"
            parts.append(f"{k}={v}".replace(" ", ""))
    ins = ",".join(_fmt_t(d) for d in entry["inputs"])
    if entry.get("const_operands"):
        ins += "".join(f",{r}:{_fmt_t(c)}" for r, c in entry["const_operands"].items())
    outs = ",".join(_fmt_t(d) for d in entry["outputs"])
    return f"{entry['op']}({' '.join(parts)}) {ins} -> {outs}"


def _cval(operands, role):
    for o in operands:
        if o["role"] == role and "const" in o:
            return o["const"].get("value")
    return None


def _op_attrs(opname, attrs, operands, outs, B, in_names) -> dict:
    """Readable attributes: flatbuffer attribute fields + resolved constant operands."""
    a = {}
    for k2, v in attrs.items():
        if isinstance(v, bytes):
            continue
        a[k2] = v
    # resolve constant operands into named values
    for o in operands:
        if "const" in o and "value" in o["const"] and o["role"] not in ("input", "weight", "table"):
            a[o["role"]] = _scalar_or_list(o["const"]["value"]) if o["role"].endswith("zp") else o["const"]["value"]
    if opname == "RESCALE":
        mult = _cval(operands, "multiplier")
        shift = _cval(operands, "shift")
        if mult is not None and shift is not None:
            a["effective_scale"] = [m / float(2 ** s) for m, s in zip(mult, shift)] if len(shift) == len(mult) else None
    elif opname == "RESIZE":
        scale, offset, border = (_cval(operands, r) for r in ("scale", "offset", "border"))
        in_shape = B.info(in_names[0])["shape"]
        if scale and len(scale) == 4:
            a["ratio_hw"] = [scale[0] / scale[1], scale[2] / scale[3]]
        a["spec_errors"] = resize_spec_errors(in_shape, outs[0]["shape"], scale or [], offset or [], border or [])
    elif opname == "CLAMP":
        in_dtype = B.info(in_names[0])["dtype"]
        for key in ("min_val", "max_val"):
            raw = attrs.get(key, b"")
            vals = decode_data(raw, in_dtype, 1) if raw else None
            a[key] = vals[0] if vals else None
    elif opname == "CUSTOM":
        a["implementation_attrs"] = _decode_custom_attrs(attrs.get("implementation_attrs", b""))
    elif opname == "PAD":
        p = a.get("padding")
        if isinstance(p, list) and len(p) % 2 == 0:
            a["padding_pairs"] = [p[i:i + 2] for i in range(0, len(p), 2)]
    elif opname in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "CONV3D"):
        w = next((o for o in operands if o["role"] == "weight"), None)
        if w is not None:
            a["weight_shape"] = w.get("const", w).get("shape")
    return a


def summarize_tosa_file(path: str, **kw) -> dict:
    with open(path, "rb") as f:
        return summarize_tosa(f.read(), **kw)


# --------------------------------------------------------------------------
# VGF summary via vgf_dump
# --------------------------------------------------------------------------

def find_vgf_dump() -> str:
    """Prefer the native binary inside vgf_lib (the venv's bin/vgf_dump is a
    Python console-script shim that just re-execs it, ~+0.1 s)."""
    try:
        import importlib.util
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
    exe = find_vgf_dump()
    p = subprocess.run([exe, "--input", path, "--output", "-"], capture_output=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"vgf_dump failed rc={p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
    return json.loads(p.stdout)


def _descriptor_set(index: int, info, binding) -> dict:
    # vgf_dump 0.11 writes {"set_index", "bindings"}; 0.9 a bare list of bindings.
    if isinstance(info, list):
        return {"set": index, "bindings": [binding(b) for b in info]}
    return {"set": info.get("set_index"), "bindings": [binding(b) for b in info.get("bindings", [])]}


def summarize_vgf(path: str, *, raw: dict | None = None) -> dict:
    """Condensed VGF description: module/segment sequence, bindings with
    resource category/format/shape, constants. No file paths."""
    d = raw if raw is not None else vgf_dump_json(path)
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
            },
            "inputs": [binding(b) for b in s.get("inputs", [])],
            "outputs": [binding(b) for b in s.get("outputs", [])],
            "descriptor_sets": [_descriptor_set(i, ds, binding)
                                for i, ds in enumerate(s.get("descriptor_set_infos", []))],
            "constants": [
                {"shape": res(consts.get(ci, {}).get("mrt_index")).get("shape"),
                 "vk_format": res(consts.get(ci, {}).get("mrt_index")).get("vk_format"),
                 "sparsity_dimension": consts.get(ci, {}).get("sparsity_dimension")}
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


# --------------------------------------------------------------------------
# Golden sections
# --------------------------------------------------------------------------
def _tensor_text(d: dict) -> str:
    return _fmt_t(d)


def golden_tosa(summary: dict) -> dict:
    """What a golden keeps of a TOSA summary: graph IO and one line per
    operator (op, the attributes that matter, where its inputs come from,
    what it produces), plus any RESIZE that breaks the spec's ERROR_IF rules,
    and the TOSA version it declares. No tensor names, no tool versions."""
    lines = []
    for op in summary["operators"]:
        sources = ",".join(d["from"] for d in op["inputs"])
        consts = "".join(
            f" {role}#{c['sha256_16'][:8]}"
            for role, c in sorted(op.get("const_operands", {}).items())
            if "sha256_16" in c
        )
        lines.append(f"op[{op['index']}] {op['brief']} <- {sources}{consts}")
    invalid = [
        f"op[{op['index']}] {err}"
        for op in summary["operators"]
        for err in op["attrs"].get("spec_errors", [])
    ]
    return {
        "inputs": [_tensor_text(d) for d in summary["inputs"]],
        "outputs": [f"{_tensor_text(d)} <- {d['from']}" for d in summary["outputs"]],
        "ops": lines,
        "spec_errors": invalid,
        # The TOSA specification version the flatbuffer declares (a property of
        # what ExecuTorch emits, not of a tool installed here).
        "tosa_version": summary["tosa_version"],
    }


def golden_vgf(summary: dict) -> dict:
    """What a golden keeps of a VGF summary: the segment sequence and each
    segment's bindings (category, format, shape) and constant count."""

    def binding(b: dict) -> str:
        shape = "x".join(str(x) for x in b.get("shape") or [])
        return f"{b.get('category')} {b.get('vk_format')}[{shape}]"

    return {
        "sequence": summary["segment_sequence"],
        "inputs": [binding(b) for b in summary["inputs"]],
        "outputs": [binding(b) for b in summary["outputs"]],
        "segments": [
            {
                "type": seg["type"],
                "module": seg["module"]["type"],
                "inputs": [binding(b) for b in seg["inputs"]],
                "outputs": [binding(b) for b in seg["outputs"]],
                "constants": len(seg["constants"]),
            }
            for seg in summary["segments"]
        ],
    }
