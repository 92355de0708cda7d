"""Goldens: one readable JSON file per case, kept by syrupy.

A golden holds, in sections (each a top-level key):

``case``          the case's declarative parameters (what was exported)
``graph``         the top-level edge graph, one line per node
``delegates``     each delegate's backend and ops, in order
``cpu_ops``       ops left on the CPU
``io_quant_params`` the stripped IO quantization parameters
``tosa``          each VGF delegate's TOSA operators and the attributes that matter
``vgf``           each VGF delegate's segment sequence (from vgf_dump)
``grid_sampler``  each grid-sampler delegate's payload
``pte``           the serialized program's tensors and IO, its instruction chain
                  (kernel calls with their operators, delegate calls), and where
                  its output layouts disagree with what the delegates write
``numerics``      rounded error statistics (when the numerics tier ran)

Keys are sorted, floats rounded, and nothing machine- or version-specific
(paths, timestamps, tool versions) goes in, so a diff reads like a changelog
of ExecuTorch's behaviour. Files live in ``golden/<test module>/<case id>.json``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from syrupy.data import Snapshot, SnapshotCollection
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

# The builders below import the export stack lazily: pytest loads this module
# (for the syrupy extension) in processes that never export anything.

#: Where goldens live; VGF_GOLDEN_DIR overrides it (the suite's own tests use that).
GOLDEN_ROOT = Path(
    os.environ.get("VGF_GOLDEN_DIR", Path(__file__).resolve().parents[2] / "golden")
)
#: The test function whose snapshots are goldens (syrupy names snapshots by test).
GOLDEN_TEST = "test_golden"
SECTIONS = (
    "case", "graph", "delegates", "cpu_ops", "io_quant_params",
    "tosa", "vgf", "grid_sampler", "pte", "numerics",
)
SIGNIFICANT_DIGITS = 6


def round_floats(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """Round every float to ``digits`` significant digits, recursively."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {str(k): round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    return value


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------
_DIM_ORDER_NAMES = {(0, 1, 2, 3): "NCHW", (0, 2, 3, 1): "NHWC"}


def _tensor_text(val) -> str:
    shape = "x".join(str(int(s)) for s in val.shape)
    dtype = str(val.dtype).removeprefix("torch.")
    order = tuple(val.dim_order())
    layout = _DIM_ORDER_NAMES.get(order, "") if len(order) == 4 else ""
    if len(order) == 4 and not layout:
        layout = "dim_order=" + "".join(map(str, order))
    return f"{dtype}[{shape}]" + (f" {layout}" if layout else "")


def graph_section(edge_program) -> list[str]:
    """One line per node of the top-level graph: what it is, its tensor, and
    which earlier lines feed it."""
    from vgf_export.reports import op_name

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


_SCALAR_TYPES = {"CHAR": "int8", "SHORT": "int16", "BYTE": "uint8", "INT": "int32"}
_PTE_SCALAR_TYPES = {1: "int8", 2: "int16", 3: "int32", 6: "float32", 0: "uint8", 4: "int64"}


def pte_section(program_bytes: bytes, edge_program) -> dict:
    """The serialized program's tensors (sizes, dtype, dim order) and IO, and
    where its output layouts disagree with the edge graph's (the layout the
    delegates write)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(program_bytes)
    plan = getattr(program, "program", program).execution_plan[0]

    def text(index: int) -> str:
        tensor = plan.values[index].val
        sizes = "x".join(str(s) for s in tensor.sizes)
        order = tuple(tensor.dim_order)
        layout = _DIM_ORDER_NAMES.get(order, "dim_order=" + "".join(map(str, order))) if len(order) == 4 else ""
        dtype = _PTE_SCALAR_TYPES.get(int(tensor.scalar_type), str(tensor.scalar_type))
        return f"{dtype}[{sizes}]" + (f" {layout}" if layout else "")

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
    def instruction(instr) -> str:
        args = instr.instr_args
        kind = type(args).__name__
        if kind == "KernelCall":
            op = plan.operators[args.op_index]
            return f"{kind} {op.name}.{op.overload} {list(args.args)}"
        if kind == "DelegateCall":
            return f"{kind} {plan.delegates[args.delegate_index].id} {list(args.args)}"
        return kind

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
    dtype = entry.get("dtype")
    if dtype is not None and not isinstance(dtype, str):
        entry["dtype"] = _SCALAR_TYPES.get(getattr(dtype, "name", ""), str(dtype))
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


def build_golden(case, result, numerics: dict | None = None) -> dict:
    """All sections of one case's golden, from its export result."""
    from conformance.goldens.summaries import golden_tosa, golden_vgf, summarize_tosa, summarize_vgf
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    report = result.report
    def section(build, path):
        # A section that cannot be built (a tool's output format changed, a
        # file is unreadable) is recorded as such: the golden then differs
        # and says why, and the other sections still compare.
        try:
            return build(path)
        except Exception as error:  # noqa: BLE001 - any failure is the finding
            return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}

    tosa, vgf, grid_sampler = [], [], []
    for file in result.artifacts.delegate_files():
        index, path = file.index, file.path
        if file.kind == "tosa":
            tosa.append({"delegate": index, **section(lambda p: golden_tosa(summarize_tosa(p.read_bytes())), path)})
        elif file.kind == "vgf":
            vgf.append({"delegate": index, **section(lambda p: golden_vgf(summarize_vgf(str(p))), path)})
        elif file.kind == "json":
            grid_sampler.append({"delegate": index, **section(
                lambda p: GridSamplerPayload.from_bytes(p.read_bytes()).to_dict(), path)})
    golden = {
        "case": case.describe(),
        "graph": graph_section(result.edge_program),
        "delegates": [{"backend": d.backend, "ops": d.ops} for d in report.delegates],
        "cpu_ops": report.cpu_ops,
        "io_quant_params": io_section(report.io_quant_params, result.edge_program),
        "tosa": tosa,
        "vgf": vgf,
        "grid_sampler": grid_sampler,
        "pte": section(lambda p: pte_section(p.read_bytes(), result.edge_program), result.artifacts.program),
    }
    if numerics is not None:
        golden["numerics"] = numerics
    return round_floats(golden)


def serialize(golden: dict) -> str:
    return json.dumps(golden, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def changed_sections(stored_text: str | None, golden: dict) -> list[str]:
    """Sections that differ from the stored golden ("<new>" when none is stored)."""
    if stored_text is None:
        return ["<new>"]
    stored, current = json.loads(stored_text), json.loads(serialize(golden))
    keys = [k for k in SECTIONS if k in stored or k in current]
    keys += sorted((set(stored) | set(current)) - set(SECTIONS))
    return [k for k in keys if stored.get(k) != current.get(k)]


def _compute_ops(ops: list[str]) -> list[str]:
    from vgf_export.qdq import is_qdq_name

    return [op for op in ops if not is_qdq_name(op)]


def _worst_vs_float(golden: dict) -> float | None:
    outputs = (golden.get("numerics") or {}).get("outputs") or []
    values = [o["vs_float"]["max_lsb"] for o in outputs if o.get("vs_float")]
    return max(values) if values else None


def describe_changes(stored_text: str | None, golden: dict | None, failed_stage: str | None = None) -> list[str]:
    """What changed against the stored golden, in words that group well
    across cases ("no longer delegated", "tosa changed", ...)."""
    if stored_text is None:
        return ["new case (no golden)"] if golden is not None else []
    stored = json.loads(stored_text)
    if golden is None:
        return [f"now fails at {failed_stage} (exported on the baseline)"]
    current = json.loads(serialize(golden))
    changes = []
    before = [(d["backend"], _compute_ops(d["ops"])) for d in stored.get("delegates", [])]
    after = [(d["backend"], _compute_ops(d["ops"])) for d in current.get("delegates", [])]
    cpu_before = _compute_ops(stored.get("cpu_ops", []))
    cpu_after = _compute_ops(current.get("cpu_ops", []))
    if before and not after:
        changes.append("no longer delegated")
    elif after and not before:
        changes.append("newly delegated")
    elif len(cpu_after) > len(cpu_before):
        changes.append("more ops left on the CPU")
    elif len(cpu_after) < len(cpu_before):
        changes.append("fewer ops left on the CPU")
    elif before != after:
        changes.append("delegation changed")
    elif stored.get("delegates") != current.get("delegates"):
        changes.append("Q/DQ inside delegates changed")
    for section in ("graph", "io_quant_params", "tosa", "vgf", "grid_sampler", "pte"):
        if stored.get(section) != current.get(section):
            changes.append(f"{section} changed")
    worst_before, worst_after = _worst_vs_float(stored), _worst_vs_float(current)
    if worst_before is not None and worst_after is not None:
        if worst_after > worst_before + 0.5:
            changes.append("numerics vs float worse by more than 0.5 LSB")
        elif worst_after < worst_before - 0.5:
            changes.append("numerics vs float better by more than 0.5 LSB")
        elif stored.get("numerics") != current.get("numerics"):
            changes.append("numerics statistics changed (within 0.5 LSB)")
    return changes


# ---------------------------------------------------------------------------
# syrupy extension
# ---------------------------------------------------------------------------
def case_id_of(test_location) -> str:
    """The case id in a test's name, e.g. ``test_golden[<case id>]``."""
    name = test_location.nodename or ""
    return name[name.index("[") + 1 : name.rindex("]")] if "[" in name else name


class GoldenExtension(SingleFileSnapshotExtension):
    """Stores each case's golden as ``golden/<test module>/<case id>.json``.

    syrupy names a snapshot after its test (``test_golden[<case id>]``); this
    extension keeps that name internally but uses the bare case id as the file
    name, and tells syrupy which file belongs to which test, so that unused
    goldens are still detected (and, with ``--snapshot-update``, removed).
    """

    _write_mode = WriteMode.TEXT
    file_extension = "json"

    def serialize(self, data, *, exclude=None, include=None, matcher=None) -> str:
        return serialize(data)

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(GOLDEN_ROOT / test_location.basename)

    @classmethod
    def discovery_dirname(cls, *, test_location) -> str:
        return cls.dirname(test_location=test_location)

    @classmethod
    def get_file_basename(cls, *, test_location, index) -> str:
        return case_id_of(test_location)

    def read_snapshot_collection(self, *, snapshot_location: str) -> SnapshotCollection:
        collection = SnapshotCollection(location=snapshot_location)
        collection.add(Snapshot(name=f"{GOLDEN_TEST}[{Path(snapshot_location).stem}]"))
        return collection

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location: str) -> bool:
        path = Path(snapshot_location)
        return (
            path.parent.name == test_location.basename
            and path.stem == case_id_of(test_location)
        )
