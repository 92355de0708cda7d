"""What a golden keeps of each artifact of an export.

The edge graph (one line per node), the serialized program (tensors, IO,
instruction chain), the IO quantization parameters, and each delegate's
file: its TOSA operators, its VGF segments, its grid-sampler payload. Each
keeps what makes a readable diff and leaves out what is machine- or
version-specific (paths, tensor names, tool versions). The section registry
(:mod:`vgf_conformance.goldens.sections`) builds the golden's sections from these.

The export stack is imported lazily: pytest loads this package (for the
syrupy extension) in processes that never export anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from vgf_conformance.text import dtype_name
from vgf_export.names import DelegateFile

_DIM_ORDER_NAMES = {(0, 1, 2, 3): "NCHW", (0, 2, 3, 1): "NHWC"}
#: ExecuTorch ScalarType codes in a serialized program (``ScalarType`` of
#: ``executorch.exir.scalar_type``) as dtype names.
_PTE_SCALAR_TYPES = {1: "int8", 2: "int16", 3: "int32", 6: "float32", 0: "uint8", 4: "int64"}


def recorded(build: Callable[..., Any], *args) -> Any:
    """``build(*args)``, or ``{"error": "<type>: <first line>"}`` when it fails.

    A part of a golden that cannot be built (a tool's output format changed,
    a file is unreadable) is recorded as such: the golden then differs and
    says why, and the other parts still compare."""
    try:
        return build(*args)
    except Exception as error:  # noqa: BLE001 - any failure is the finding
        message = str(error)
        return {"error": f"{type(error).__name__}: {message.splitlines()[0] if message else ''}"}


# ---------------------------------------------------------------------------
# The edge graph, the program, its IO
# ---------------------------------------------------------------------------
def _layout(order: tuple) -> str:
    """NCHW, NHWC, ``dim_order=0312``; empty for a tensor that is not 4-D."""
    if len(order) != 4:
        return ""
    return _DIM_ORDER_NAMES.get(order, "dim_order=" + "".join(map(str, order)))


def _tensor_text(val) -> str:
    shape = "x".join(str(int(s)) for s in val.shape)
    layout = _layout(tuple(val.dim_order()))
    return f"{dtype_name(val.dtype)}[{shape}]" + (f" {layout}" if layout else "")


def graph_section(edge_program) -> list[str]:
    """One line per node of the top-level graph: what it is, its tensor, and
    which earlier lines feed it."""
    from vgf_export.artifacts import op_name

    graph = edge_program.exported_program().graph_module.graph
    index: dict[Any, int] = {}
    lines: list[str] = []
    delegate_count = 0
    for node in graph.nodes:
        if node.op == "get_attr":
            continue
        args = [index[a] for a in node.all_input_nodes if a in index]
        feeds = f" <- {args}" if args else ""
        val = node.meta.get("val")
        tensor = f" {_tensor_text(val)}" if hasattr(val, "dim_order") else ""
        if node.op == "placeholder":
            text = f"input {node.name}{tensor}"
        elif node.op == "output":
            text = "output"
        elif op_name(node) == "executorch_call_delegate":
            text = f"delegate {delegate_count}"
            delegate_count += 1
        else:
            text = f"{op_name(node)}{tensor}"
        index[node] = len(lines)
        lines.append(f"[{len(lines)}] {text}{feeds}")
    return lines


def pte_section(program_bytes: bytes, edge_program) -> dict:
    """The serialized program's tensors (sizes, dtype, dim order) and IO, its
    instruction chain, and where its output layouts disagree with the edge
    graph's (the layout the delegates write)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(program_bytes)
    plan = getattr(program, "program", program).execution_plan[0]

    def text(index: int) -> str:
        tensor = plan.values[index].val
        sizes = "x".join(str(s) for s in tensor.sizes)
        layout = _layout(tuple(tensor.dim_order))
        dtype = _PTE_SCALAR_TYPES.get(int(tensor.scalar_type), str(tensor.scalar_type))
        return f"{dtype}[{sizes}]" + (f" {layout}" if layout else "")

    def instruction(instr) -> str:
        args = instr.instr_args
        kind = type(args).__name__
        if kind == "KernelCall":
            op = plan.operators[args.op_index]
            return f"{kind} {op.name}.{op.overload} {list(args.args)}"
        if kind == "DelegateCall":
            return f"{kind} {plan.delegates[args.delegate_index].id} {list(args.args)}"
        return kind

    tensors = [i for i, v in enumerate(plan.values) if hasattr(v.val, "sizes")]
    graph = edge_program.exported_program().graph_module.graph
    mismatches = []
    for position, (index, node) in enumerate(zip(plan.outputs, graph.output_node().args[0])):
        val = node.meta.get("val")
        if hasattr(val, "dim_order") and tuple(val.dim_order()) != tuple(plan.values[index].val.dim_order):
            mismatches.append(
                f"output {position}: the program says {text(index)}, "
                f"the delegate writes {_tensor_text(val)}"
            )
    return {
        "values": [f"[{i}] {text(i)}" for i in tensors],
        "inputs": list(plan.inputs),
        "outputs": list(plan.outputs),
        "output_layout_mismatches": mismatches,
        # The execution plan: what a runtime will execute, in order.
        "instructions": [instruction(i) for chain in plan.chains for i in chain.instructions],
    }


def _quant_entry(params: dict | None) -> dict | None:
    if params is None:
        return None
    entry = dict(params)
    if entry.get("dtype") is not None:
        entry["dtype"] = dtype_name(entry["dtype"])
    return entry


def io_section(io_quant_params: dict, edge_program) -> dict:
    """IO quant params by position (None: float). Inputs carry their names;
    outputs do not, since ExecuTorch names them after internal nodes whose
    numbering changes from run to run (getitem vs getitem_1)."""
    program = edge_program.exported_program()
    graph = program.graph_module.graph
    user_inputs = set(program.graph_signature.user_inputs)
    inputs = [n.name for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    outputs = [n.name for n in graph.output_node().args[0]]
    return {
        "inputs": [
            {"name": name, "quant": _quant_entry(io_quant_params.get("inputs", {}).get(name))}
            for name in inputs
        ],
        "outputs": [
            _quant_entry(io_quant_params.get("outputs", {}).get(name)) for name in outputs
        ],
    }


# ---------------------------------------------------------------------------
# The delegates' files
# ---------------------------------------------------------------------------
def delegate_entries(result, backend: str, kind: str, keep: Callable[[Path], dict]) -> list[dict]:
    """``{"delegate": NN, **keep(file)}`` for each of ``backend``'s ``kind``
    files, in call order; a file ``keep`` cannot read is recorded as an error."""
    files: list[DelegateFile] = result.artifacts.delegate_files(kind)
    return [{"delegate": f.index, **recorded(keep, f.path)} for f in files if f.backend == backend]


def golden_tosa(summary: dict) -> dict:
    """What a golden keeps of a TOSA summary: graph IO and one line per
    operator (op, the attributes that matter, where its inputs come from,
    what it produces), plus any RESIZE that breaks the spec's ERROR_IF rules,
    and the TOSA version it declares. No tensor names, no tool versions."""
    from vgf_conformance.tosa.reader import tensor_text

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
        "inputs": [tensor_text(d) for d in summary["inputs"]],
        "outputs": [f"{tensor_text(d)} <- {d['from']}" for d in summary["outputs"]],
        "ops": lines,
        "spec_errors": invalid,
        # The TOSA specification version the flatbuffer declares (a property of
        # what ExecuTorch emits, not of a tool installed here).
        "tosa_version": summary["tosa_version"],
    }


def golden_vgf(summary: dict, tolerant_constants: dict[str, str] | None = None) -> dict:
    """What a golden keeps of a VGF summary: the segment sequence and each
    segment's bindings (category, format, shape), the hash of its module's
    SPIR-V code and of each of its constants (a converter that emits other
    code or other weights for the same graph shows here).

    Calibrated values move slightly between machines
    (:mod:`vgf_conformance.goldens.compliance`), so where the code holds the TOSA
    graph's RESCALE multipliers it is also hashed without them
    (``code_hash_masked``), and a constant whose bytes are a TOSA operand
    compared within a band (``tolerant_constants``: hash -> ``op[k].role``)
    is recorded as that operand (``tosa:op[8].multiplier``)."""
    tolerant_constants = tolerant_constants or {}

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
                "code_hash": seg["module"].get("code_hash"),
                **({"code_hash_masked": seg["module"]["code_hash_masked"]}
                   if "code_hash_masked" in seg["module"] else {}),
                "constant_hashes": [f"tosa:{tolerant_constants[c['hash']]}"
                                    if c.get("hash") in tolerant_constants else c.get("hash")
                                    for c in seg["constants"]],
            }
            for seg in summary["segments"]
        ],
    }


def tosa_file(path: Path) -> dict:
    """The golden's view of one ``NN_vgf.tosa``."""
    from vgf_conformance.tosa.reader import summarize_tosa

    return golden_tosa(summarize_tosa(path.read_bytes()))


def vgf_file(path: Path) -> dict:
    """The golden's view of one ``NN_vgf.vgf``, with the calibrated values of
    the TOSA flatbuffer it was converted from (``NN_vgf.tosa`` beside it)."""
    from vgf_conformance.tosa.reader import summarize_tosa
    from vgf_conformance.goldens.vgf_reader import summarize_vgf

    tosa = path.with_suffix(".tosa")
    operators = summarize_tosa(tosa.read_bytes())["operators"] if tosa.exists() else []
    tolerant = {digest: f"op[{op['index']}].{role}" for op in operators
                for role, digest in op.get("tolerant_hashes", {}).items()}
    return golden_vgf(summarize_vgf(str(path), calibrated_operands(operators)), tolerant)


def calibrated_operands(operators: list[dict]) -> list:
    """Where a TOSA graph's calibrated operands sit, with their values as
    32-bit words: each RESCALE's multiplier and shift and each convolution's
    integer bias (``TOLERANT_OPERANDS``), and every float constant operand
    (a float graph's quantize and dequantize scales, as MUL operands: its
    last bit moves with oneDNN's ISA). What masks them in the graph's SPIR-V
    (:func:`vgf_conformance.goldens.vgf_reader.mask_operands`; a bias held as
    a graph constant is recorded by ``golden_vgf`` instead)."""
    import struct
    from collections import Counter

    from vgf_conformance.goldens.vgf_reader import CalibratedOperand
    from vgf_conformance.tosa.reader import TOLERANT_OPERANDS

    counts = Counter(op["op"] for op in operators)
    seen: Counter = Counter()
    operands = []
    for op in operators:
        kind, roles = op["op"], op.get("operand_roles", [])
        for place, role in enumerate(roles):
            values = op["attrs"].get(role)
            if not isinstance(values, list) or not values:
                continue
            if role in TOLERANT_OPERANDS.get(kind, ()) and all(isinstance(v, int) for v in values):
                words = tuple(values)
            elif all(isinstance(v, float) for v in values):
                words = tuple(struct.unpack("<I", struct.pack("<f", v))[0] for v in values)
            else:
                continue
            operands.append(CalibratedOperand(kind, seen[kind], counts[kind], len(roles) - place, words))
        seen[kind] += 1
    return operands


def grid_sampler_file(path: Path) -> dict:
    """The golden's view of one ``NN_grid_sampler.json``: its whole payload."""
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    return GridSamplerPayload.from_bytes(path.read_bytes()).to_dict()
