"""Where a numerics divergence starts: the lowered TOSA graph, op by op, against its quantized source.

``python -m vgf_conformance localize CASE [--fault NAME] [--json FILE]``

A numerics failure says how far a case's outputs are from the PT2E program;
this says which op of the lowered graph makes them move. The case is exported
once more with ExecuTorch's TOSA debug information (for each TOSA op, the fx
nodes it was lowered from, back to the PT2E program's; an op a pass created
without a trace, as a TABLE, takes the quantized PT2E op that reads its
input's node). Each VGF delegate is run on the reference model with every
intermediate tensor dumped, on the very inputs the lowered program gives it.
Each TOSA tensor that holds a quantized PT2E node's output (the last int8 or
int16 result lowered from that node) is compared with that node's codes in
steps of its own quantization (LSB) twice: with the PT2E program run on its
own (the accumulated difference), and with the PT2E program fed the lowered
program's values at every matched tensor (the difference the op itself adds,
from the same inputs). The first op, in execution order, that adds more than
:data:`LOCAL_MAX_LSB` or a bias beyond :data:`LOCAL_BIAS_LSB` is named.

ExecuTorch's Inspector compares a runtime's intermediate outputs; this
compares a lowered TOSA graph with its quantized source. Only VGF delegates
are opened (a grid-sampler delegate is one op, its output is compared at the
program's outputs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.fx import Interpreter

from vgf_conformance.oracles.compare import BIAS_MIN_ELEMENTS
from vgf_conformance.oracles.delegates import TOSA_TIMEOUT, to_layout
from vgf_conformance.oracles.tosa_log import parse_dump


#: A tensor's header in the reference model's dump of intermediates.
#: Ops that only move or relabel values (a layout change at a delegate's edge): never the culprit.
_LAYOUT_OPS = frozenset({"TRANSPOSE", "RESHAPE"})

@dataclasses.dataclass(frozen=True)
class Row:
    """One TOSA tensor compared with the PT2E node it was lowered from."""
    delegate: int
    op_index: int
    op: str
    tensor: str
    source: str
    #: The largest difference where the PT2E op is fed the lowered program's
    #: values of its inputs: the error this op adds (what is judged).
    local_lsb: float
    #: The mean signed difference of that error (TOSA minus PT2E).
    local_bias_lsb: float
    #: The largest difference of the two programs run each on its own (accumulated).
    max_lsb: float
    #: The mean signed difference, accumulated (TOSA minus PT2E).
    bias_lsb: float
    #: Elements that differ, of the op's own error.
    differing: int
    elements: int

    def describe(self) -> str:
        return (f"delegate {self.delegate} op[{self.op_index}] {self.op} ({self.tensor}, from PT2E node "
                f"{self.source}): adds {self.local_lsb:g} LSB on {self.differing} of {self.elements} elements, "
                f"bias {self.local_bias_lsb:+.3f} "
                f"(accumulated: max {self.max_lsb:g}, bias {self.bias_lsb:+.3f} LSB)")


#: What one op may add, fed the lowered program's values of its inputs, in
#: steps of its output: one rounding step at most, and a mean below that.
#: Measured without a fault over the quick tier's localizable cases
#: (docs/selftest.md): every op's error at most 1 LSB; its bias at most 0.64
#: LSB in magnitude (a convolution followed by a ReLU, whose requantization
#: rounds the other way: the ReLU-folding entry of docs/divergences.md),
#: below 0.18 elsewhere. A one-step shift of all of an op's codes (bias 1.0) is
#: beyond; what an op accumulates from upstream is shown, not judged.
LOCAL_MAX_LSB = 1.0
LOCAL_BIAS_LSB = 0.75


@dataclasses.dataclass
class Localization:
    case: str
    rows: list[Row]

    @staticmethod
    def beyond(row: Row) -> bool:
        return row.local_lsb > LOCAL_MAX_LSB or (row.elements >= BIAS_MIN_ELEMENTS
                                                 and abs(row.local_bias_lsb) > LOCAL_BIAS_LSB)

    @property
    def first(self) -> Row | None:
        """The first op, in graph order, off by more than the bound."""
        return next((r for r in self.rows if self.beyond(r)), None)

    def describe(self) -> str:
        first = self.first
        bounds = f"{LOCAL_MAX_LSB:g} LSB (bias {LOCAL_BIAS_LSB:g})"
        head = (f"{self.case}: the first TOSA op that adds more than {bounds} to its PT2E source: "
                f"{first.describe()}"
                if first else f"{self.case}: every one of {len(self.rows)} TOSA tensors with a PT2E source "
                f"is within {bounds} of it")
        return "\n".join([head, *(f"  {'>' if r is first else ' '} {r.describe()}" for r in self.rows)])

    def to_dict(self) -> dict:
        first = self.first
        return {"case": self.case, "local_max_lsb": LOCAL_MAX_LSB, "local_bias_lsb": LOCAL_BIAS_LSB,
                "first": dataclasses.asdict(first) if first else None, "rows": [dataclasses.asdict(r) for r in self.rows]}


# ---------------------------------------------------------------------------
# The TOSA side: each delegate's intermediates, and which PT2E node each came from
# ---------------------------------------------------------------------------
def dump_intermediates(fb: bytes, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``fb`` on the reference model (the suite's child process, its
    timeout and crash mapping), every intermediate dumped (to its stderr)."""
    from vgf_conformance.oracles.tosa_reference import run_tosa_in_child_ex

    result = run_tosa_in_child_ex(fb, inputs, TOSA_TIMEOUT, trace_nodes=False,
                                  extra_opts={"dump_intermediates": 1, "fp_format": "0.9g"})
    if not result.ok:
        raise RuntimeError(f"the reference model's dump failed: {result.describe()}")
    return parse_dump(result.stderr)


def debug_sources(debug: list[dict], known: set[str]) -> list[tuple[str, str, str]]:
    """``(tosa tensor, TOSA op, PT2E node)`` per TOSA op of ``debug.json``, in
    serialization order, for ops lowered from a node in ``known`` (the first
    node of its trace that is)."""
    found = []
    for event in debug:
        trace = event.get("torch_info", {}).get("node_trace")
        names = [n["name"] for n in trace] if isinstance(trace, list) else []
        source = next((n for n in names if n in known), None)
        if source:
            op = event.get("tosa_info", {}).get("operator_name", "?").removeprefix("Op.")
            found.append((event["aten_info"]["node_name"], op, source))
    return found


# ---------------------------------------------------------------------------
# The PT2E side: each quantized node, run plain and fed the TOSA values
# ---------------------------------------------------------------------------
_QUANTIZE = "quantize_per_tensor"


def quantized_chains(module: torch.fx.GraphModule) -> dict[str, list[str]]:
    """Each quantize node of the PT2E program, with the nodes whose output it
    quantizes: its input and those fused into it (a producer used only by the
    next op of the chain and not quantized itself, as a convolution before its
    ReLU), which lower to the same requantized TOSA tensor."""
    chains: dict[str, list[str]] = {}
    seen: set[str] = set()
    for node in module.graph.nodes:
        if node.op != "call_function" or _QUANTIZE not in str(node.target):
            continue
        chain, source = [], node.args[0]
        while isinstance(source, torch.fx.Node) and source.op == "call_function" \
                and "quantize" not in str(source.target) and source.name not in seen:
            chain.append(source.name)
            seen.add(source.name)
            producer = source.args[0] if source.args else None
            if not (isinstance(producer, torch.fx.Node) and len(producer.users) == 1):
                break
            source = producer
        if chain:
            chains[node.name] = chain
    return chains


class _Fed(Interpreter):
    """The PT2E program with the given quantize nodes' outputs replaced (by
    the lowered program's values), each node's own output kept in ``own``:
    what the op computes from the very inputs the lowered op had."""

    def __init__(self, module, replacements: dict[str, torch.Tensor]) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.replacements, self.own = replacements, {}

    def run_node(self, n):
        value = super().run_node(n)
        if n.name in self.replacements:
            self.own[n.name] = value
            return self.replacements[n.name]
        return value


def _run(module, inputs, replacements=None) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    interpreter = _Fed(module, replacements or {})
    with torch.no_grad():
        interpreter.run(*inputs)
    return {n.name: v for n, v in interpreter.env.items()}, interpreter.own


def _to_tosa(codes: torch.Tensor, shape: tuple[int, ...]) -> np.ndarray | None:
    """``codes`` in a TOSA tensor's layout: the Arm backend lays every rank-4
    tensor out NHWC (so a 1x16x16x16 tensor is transposed too), others as they are."""
    reference = codes.detach().to(torch.int64).numpy()
    if reference.ndim == 4 and reference.transpose(0, 2, 3, 1).shape == tuple(shape):
        return reference.transpose(0, 2, 3, 1)
    return reference if reference.shape == tuple(shape) else None


def _from_tosa(values: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """A TOSA tensor's values as the PT2E tensor ``like`` holds them."""
    nchw = values.ndim == 4 and values.transpose(0, 3, 1, 2).shape == tuple(like.shape)
    array = values.transpose(0, 3, 1, 2) if nchw else values
    return torch.from_numpy(np.ascontiguousarray(array)).to(like.dtype)


def _next_quantized(module: torch.fx.GraphModule, chains: dict[str, list[str]], source: str) -> str | None:
    """The one quantized PT2E op that reads ``source``'s quantized output
    (through its dequantize), or None where there are none or several."""
    quantize = next((q for q, chain in chains.items() if source in chain), None)
    if quantize is None:
        return None
    quantized = {name for chain in chains.values() for name in chain}
    node = next(n for n in module.graph.nodes if n.name == quantize)
    found = {user.name for dq in node.users for user in dq.users} & quantized
    return found.pop() if len(found) == 1 else None


def _inferred_sources(operators: list[dict], sources, module, chains) -> list[tuple[str, str, str]]:
    """Sources for the TOSA ops a pass created without a trace (a TABLE that
    InsertTableOpsPass put in a tanh's place): an op whose one input comes
    from a traced op lowers the one quantized PT2E op that reads that op's node."""
    traced = {tensor: source for tensor, _, source in sources}
    extra = []
    for op in operators:
        outputs = [o["name"] for o in op["outputs"]]
        inputs = [i for i in op["inputs"] if i.get("role") == "input"]
        if any(o in traced for o in outputs) or len(inputs) != 1 or inputs[0]["name"] not in traced:
            continue
        source = _next_quantized(module, chains, traced[inputs[0]["name"]])
        if source:
            extra += [(o, op["op"], source) for o in outputs]
            traced.update(dict.fromkeys(outputs, source))
    return extra


def _tosa_tensors(delegate: int, fb: bytes, buffers, sources, module, chains) -> dict[str, tuple]:
    """``{PT2E node: (delegate, op index, op, tensor name, values)}``: the
    last int8/int16 tensor of the delegate lowered from each node."""
    from vgf_conformance.oracles.tosa_reference import graph_io

    operators = graph_io(fb)["operators"]
    ops = {out["name"]: (op["index"], op["op"], out["dtype"]) for op in operators for out in op["outputs"]}
    dumped = dump_intermediates(fb, buffers)
    found = {}
    for tensor, _, source in [*sources, *_inferred_sources(operators, sources, module, chains)]:
        if tensor in dumped and tensor in ops and ops[tensor][2] in ("INT8", "INT16") \
                and ops[tensor][1] not in _LAYOUT_OPS:
            index, op, _ = ops[tensor]
            if source not in found or found[source][1] < index:
                found[source] = (delegate, index, op, tensor, dumped[tensor])
    return found


# ---------------------------------------------------------------------------
# The case
# ---------------------------------------------------------------------------
@contextlib.contextmanager
def _debug_info():
    """VGF compile specs that also keep ExecuTorch's TOSA debug information:
    yields a list that gets one list of events per VGF delegate, in the order
    they are lowered (each delegate writes the same debug.json, so the file
    keeps only the last)."""
    from executorch.backends.arm.common.arm_compile_spec import ArmCompileSpec
    from executorch.backends.arm.debug.schema import DebugHook
    from executorch.backends.arm.vgf import VgfCompileSpec

    original, serialize = VgfCompileSpec.dump_intermediate_artifacts_to, DebugHook.serialize
    per_delegate: list[list[dict]] = []

    def with_debug(self, path):
        return original(self, path).dump_debug_info(ArmCompileSpec.DebugMode.JSON)

    def keeping(self):
        text = serialize(self)
        per_delegate.append(json.loads(text))
        return text

    VgfCompileSpec.dump_intermediate_artifacts_to, DebugHook.serialize = with_debug, keeping
    try:
        yield per_delegate
    finally:
        VgfCompileSpec.dump_intermediate_artifacts_to, DebugHook.serialize = original, serialize


def localize(case, root: Path) -> Localization:
    """Export ``case`` into ``root`` with debug information and compare its
    VGF delegates' intermediates with the PT2E program's codes."""
    from vgf_conformance.oracles.lowered import LoweredProgram, quantize_inputs
    from vgf_conformance.speed_patches import enable
    from vgf_export import export_model

    enable()
    model, inputs, kwargs = case.model(), case.make_inputs(), case.export_kwargs()
    with _debug_info() as debug:
        result = export_model(model, inputs, artifacts_root=root, **kwargs)
    if result.quantized_module is None:
        raise ValueError(f"case {case.id}: a float export (PT2E off) has no quantized source to compare with")
    tosa_files = {f.index: f.path.read_bytes() for f in result.artifacts.delegate_files("tosa")}
    if len(debug) != len(tosa_files):
        raise RuntimeError(f"case {case.id}: debug information for {len(debug)} VGF delegates, "
                           f"{len(tosa_files)} TOSA files")
    debug_of = dict(zip(sorted(tosa_files), debug))  # lowered in the order of their index

    program = LoweredProgram(result.edge_program, tosa_files)
    program.run_program(*quantize_inputs(inputs, result.edge_program, result.io_quant_params))
    # Each VGF delegate's input bytes, as the lowered program gave them.
    calls = [(call.index, [to_layout(program.values[node].contiguous(), order) for node, order in call.inputs])
             for call in program.calls if call.index in tosa_files]

    module = result.quantized_module
    chains = quantized_chains(module)
    known = {name for chain in chains.values() for name in chain}
    by_source: dict[str, tuple] = {}
    for order, (index, buffers) in enumerate(calls):
        sources = debug_sources(debug_of[index], known)
        for source, found in _tosa_tensors(index, tosa_files[index], buffers, sources, module, chains).items():
            by_source[source] = (order, *found)
    plain, _ = _run(module, inputs)
    # Each quantize node: the latest TOSA tensor lowered from its chain, in its layout.
    matched = {}
    for q, chain in chains.items():
        candidates = [(by_source[s], s) for s in chain if s in by_source]
        if candidates:
            (order, delegate, index, op, tensor, values), source = max(candidates, key=lambda c: c[0][:3])
            if _to_tosa(plain[q], values.shape) is not None:
                matched[q] = (order, delegate, index, op, tensor, values, source)
    _, own = _run(module, inputs, {q: _from_tosa(m[5], plain[q]) for q, m in matched.items()})
    rows = []
    for q, (order, delegate, index, op, tensor, values, source) in sorted(matched.items(), key=lambda kv: kv[1][:3]):
        accumulated = values - _to_tosa(plain[q], values.shape)
        signed = values - _to_tosa(own[q], values.shape)
        local = np.abs(signed)
        rows.append(Row(delegate, index, op, tensor, source, float(local.max(initial=0)),
                        round(float(signed.mean()), 4) if signed.size else 0.0,
                        float(np.abs(accumulated).max(initial=0)),
                        round(float(accumulated.mean()), 4) if accumulated.size else 0.0,
                        int((local > 0).sum()), int(local.size)))
    return Localization(case.id, rows)


def describe_first(localization: dict) -> str:
    """One line for a failure message: the op a recorded localization names."""
    if localization.get("error"):
        return f"not localized ({localization['error'][:200]})"
    first = localization.get("first")
    if not first:
        return ("every TOSA op is within its bounds of its PT2E source (the divergence is outside the "
                "TOSA graph, or a sum of small steps)")
    return (f"the first TOSA op that adds more than its bounds to its PT2E source is delegate "
            f"{first['delegate']} op[{first['op_index']}] {first['op']} (from PT2E node {first['source']}): "
            f"{first['local_lsb']:g} LSB on {first['differing']} of {first['elements']} elements, bias "
            f"{first['local_bias_lsb']:+.3f}; python -m vgf_conformance localize {localization['case']}")


def localize_run(case, guard=None) -> dict:
    """The localization of ``case`` as the report records it; a failure to
    localize is recorded as such (``error``), never raised: it explains a
    failure, it is not one. ``guard(stage, fn, *args)``: how the re-export
    runs (the case's watchdog, :attr:`vgf_conformance.harness.execution.runner.CaseRun.guard`)."""
    try:
        with tempfile.TemporaryDirectory(prefix="vgf-localize-") as root:
            args = (case, Path(root) / "artifacts")
            return (guard("localize", localize, *args) if guard else localize(*args)).to_dict()
    except Exception as error:  # noqa: BLE001 - reported beside the failure it would explain
        return {"case": case.id, "error": f"{type(error).__name__}: {error}"[:500]}


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("localize", "vgf_conformance.oracles.localize")
