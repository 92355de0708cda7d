"""Numerics: run the lowered program, compare with references, in LSB.

Four programs per case, on the same seeded inputs:

* ``float``: the eager torch model (the reference);
* ``float_dq``: the eager torch model on the dequantized inputs (each input
  quantized as the converted program quantizes it, then dequantized): what
  the quantized program really sees;
* ``fake_quant`` (a): the PT2E-converted module, run in torch;
* ``lowered`` (b): the exported program, run node by node: each VGF delegate's
  TOSA flatbuffer through the TOSA reference model (in a child process), each
  grid-sampler delegate through :mod:`conformance.oracles.grid_sampler_reference`,
  and ops left on the CPU in torch.

Errors are in quantization steps (LSB) of each output's quantization; a float
output is measured in :data:`conformance.cases.tolerances.FLOAT_UNIT`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch
from torch.fx import Interpreter

from conformance.oracles.grid_sampler_reference import run_payload
from conformance.cases.tolerances import COMPARISONS, FLOAT_UNIT
from conformance.oracles.tosa_reference import run_tosa_in_child_ex
from vgf_export.grid_sampler_backend import GridSamplerPayload
from vgf_export.qdq import is_q_op
from vgf_export.reports import target_name

TOSA_TIMEOUT = 120.0
#: The reference model checks the TOSA level limits (kernel sizes, tensor
#: ranks and sizes, scale ratios) of the 8K level: a delegate beyond them is a
#: failure at stage run naming the limit, not a silent pass.
TOSA_LEVEL = "EIGHTK"


class LoweredRunError(RuntimeError):
    """The lowered program could not be run (e.g. the TOSA reference model
    rejected a delegate); the message says which delegate and why."""

    def __init__(self, message: str, tosa_status: str) -> None:
        super().__init__(message)
        self.tosa_status = tosa_status


# ---------------------------------------------------------------------------
# Running the lowered program
# ---------------------------------------------------------------------------
def _to_layout(x: torch.Tensor, dim_order: tuple[int, ...]) -> np.ndarray:
    """The buffer of ``x`` in ``dim_order`` (what a delegate reads)."""
    return np.ascontiguousarray(x.permute(*dim_order).numpy()) if x.ndim > 1 else x.numpy()


def _from_layout(a: np.ndarray, dim_order: tuple[int, ...]) -> torch.Tensor:
    """Back to logical order from a buffer laid out in ``dim_order``."""
    inverse = [dim_order.index(i) for i in range(len(dim_order))]
    return torch.from_numpy(np.ascontiguousarray(a)).permute(*inverse).contiguous()


def _dim_orders(nodes) -> list[tuple[int, ...]]:
    return [tuple(n.meta["val"].dim_order()) for n in nodes]


@dataclasses.dataclass
class DelegateCall:
    """One delegate call of a run: which values went in and came out, and the
    dim order of their bytes as the delegate reads or writes them."""

    index: int
    backend: str
    processed_bytes: bytes
    inputs: list  # [(node, dim_order)]
    outputs: list  # [(getitem node, dim_order)]


class LoweredProgram(Interpreter):
    """Interprets the top-level graph; delegates run on the reference backends.

    ``tosa_files`` are the VGF delegates' flatbuffers in call order (the
    artifacts' ``NN_vgf.tosa``). After :meth:`run_program`, ``values`` holds
    every node's value (logical layout), ``calls`` every delegate call, and
    ``tosa_statuses`` the reference model's status of each VGF delegate run.
    """

    def __init__(self, edge_program, tosa_files: dict[int, bytes]) -> None:
        self.program = edge_program.exported_program()
        super().__init__(self.program.graph_module, garbage_collect_values=False)
        self.tosa_files = tosa_files
        self.delegate_index = 0
        self.tosa_statuses: list[str] = []
        self.calls: list[DelegateCall] = []
        self.values: dict = {}
        self._node = None

    def run_node(self, n):
        self._node = n
        return super().run_node(n)

    def run_program(self, *user_inputs: torch.Tensor) -> list[torch.Tensor]:
        self.delegate_index = 0
        signature = self.program.graph_signature
        state = {**self.program.state_dict, **self.program.constants}
        user = iter(user_inputs)
        args = []
        for spec in signature.input_specs:
            args.append(state[spec.target] if spec.target in state else next(user))
        outputs = self.run(*args)
        self.values = {n: v for n, v in self.env.items() if isinstance(v, torch.Tensor)}
        return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]

    def call_function(self, target, args, kwargs):
        if target_name(target) != "executorch_call_delegate":
            return super().call_function(target, args, kwargs)
        lowered, *inputs = args
        index = self.delegate_index
        self.delegate_index += 1
        if lowered.backend_id == "VgfBackend":
            in_orders, out_orders = self._vgf_layouts(lowered)
            run = self._run_vgf
        elif lowered.backend_id == "GridSamplerBackend":
            payload = GridSamplerPayload.from_bytes(lowered.processed_bytes)
            layouts = {"image": payload.image.dim_order, "grid": payload.grid.dim_order}
            in_orders = [layouts[role] for role in payload.inputs]
            out_orders = [payload.output.dim_order]
            run = self._run_grid_sampler
        else:
            raise LoweredRunError(f"delegate {index}: no reference for backend {lowered.backend_id}", "n/a")
        call_node = self._node
        getitems = {u.args[1]: u for u in call_node.users if target_name(u.target) == "getitem"}
        self.calls.append(DelegateCall(
            index=index,
            backend=lowered.backend_id,
            processed_bytes=lowered.processed_bytes,
            inputs=list(zip(call_node.args[1:], in_orders)),
            outputs=[(getitems[i], order) for i, order in enumerate(out_orders) if i in getitems],
        ))
        return run(index, lowered, inputs, in_orders, out_orders)

    @staticmethod
    def _vgf_layouts(lowered):
        graph = lowered.original_module.graph_module.graph
        user_inputs = set(lowered.original_module.graph_signature.user_inputs)
        placeholders = [n for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs]
        return _dim_orders(placeholders), _dim_orders(list(graph.output_node().args[0]))

    def _run_vgf(self, index, lowered, inputs, in_orders, out_orders):
        buffers = [_to_layout(x.contiguous(), order) for x, order in zip(inputs, in_orders)]
        result = run_tosa_in_child_ex(self.tosa_files[index], buffers, TOSA_TIMEOUT, tosa_level=TOSA_LEVEL)
        self.tosa_statuses.append(result.status)
        if not result.ok:
            raise LoweredRunError(
                f"delegate {index} (VgfBackend): TOSA reference model: {result.describe()}",
                result.status,
            )
        return tuple(_from_layout(a, order) for a, order in zip(result.outputs, out_orders))

    @staticmethod
    def _run_grid_sampler(index, lowered, inputs, in_orders, out_orders):
        payload = GridSamplerPayload.from_bytes(lowered.processed_bytes)
        by_role = dict(zip(payload.inputs, inputs))
        out = run_payload(payload, by_role["image"].numpy(), by_role["grid"].numpy())
        return (torch.from_numpy(np.ascontiguousarray(out)),)


def quantize_inputs(inputs, edge_program, io_quant_params: dict) -> list[torch.Tensor]:
    """Program inputs: quantized with the stripped IO params where there are some."""
    names = [
        n.name for n in edge_program.exported_program().graph_module.graph.nodes
        if n.op == "placeholder"
    ]
    user_names = [n for n in names if n in set(edge_program.exported_program().graph_signature.user_inputs)]
    quantized = []
    for name, x in zip(user_names, inputs):
        params = io_quant_params.get("inputs", {}).get(name)
        if params is None:
            quantized.append(x)
            continue
        q = torch.round(x * (1.0 / params["scale"])) + params["zero_point"]
        q = torch.clamp(q, params["quant_min"], params["quant_max"])
        quantized.append(q.to(_DTYPES[_dtype_name(params["dtype"])]))
    return quantized


_DTYPES = {"int8": torch.int8, "int16": torch.int16, "uint8": torch.uint8, "int32": torch.int32}
_SCALAR_TYPES = {"CHAR": "int8", "SHORT": "int16", "BYTE": "uint8", "INT": "int32"}


def _dtype_name(dtype) -> str:
    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    return _SCALAR_TYPES.get(getattr(dtype, "name", ""), str(dtype))


def output_quant(edge_program, io_quant_params: dict) -> list[dict | None]:
    """Each program output's stripped quant params (None: a float output)."""
    graph = edge_program.exported_program().graph_module.graph
    params = io_quant_params.get("outputs", {})
    return [params.get(n.name) for n in graph.output_node().args[0]]


# ---------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class Comparison:
    """Error statistics of ``got`` against ``expected``, in ``unit`` steps."""

    max_lsb: float
    mean_lsb: float
    p99_lsb: float  # 99th percentile of |error|
    bias_lsb: float  # mean signed error: a systematic shift shows here
    snr_db: float
    worst_index: tuple[int, ...]
    worst_expected: float
    worst_got: float
    unit: float
    errors: torch.Tensor = dataclasses.field(repr=False, default=None)  # |error| in LSB

    def fraction_over(self, bound: float) -> float:
        """Fraction of elements whose error exceeds ``bound`` LSB."""
        if self.errors is None or not self.errors.numel():
            return 0.0
        return float((self.errors > bound).float().mean())

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_lsb": round(self.max_lsb, 2),
            "mean_lsb": round(self.mean_lsb, 3),
            "p99_lsb": round(self.p99_lsb, 2),
            "bias_lsb": round(self.bias_lsb, 3),
            "snr_db": round(self.snr_db, 1) if math.isfinite(self.snr_db) else "inf",
        }

    def describe(self) -> str:
        return (
            f"max {self.max_lsb:.3f} LSB, mean {self.mean_lsb:.3f} LSB, "
            f"bias {self.bias_lsb:+.3f} LSB, SNR {self.snr_db:.1f} dB; "
            f"worst at index {list(self.worst_index)}: expected {self.worst_expected:.6g}, "
            f"got {self.worst_got:.6g} (error {self.max_lsb:.3f} LSB of {self.unit:.6g})"
        )


def compare(expected: torch.Tensor, got: torch.Tensor, unit: float) -> Comparison:
    """Compare two float tensors of the same logical shape."""
    if tuple(expected.shape) != tuple(got.shape):
        raise ValueError(f"shape mismatch: expected {tuple(expected.shape)}, got {tuple(got.shape)}")
    e = expected.detach().to(torch.float64)
    g = got.detach().to(torch.float64)
    signed = (g - e) / unit
    error = signed.abs()
    flat = int(torch.argmax(error))
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(e.shape)))
    noise = float(((g - e) ** 2).sum())
    signal = float((e**2).sum())
    snr = math.inf if noise == 0 else (10 * math.log10(signal / noise) if signal > 0 else -math.inf)
    return Comparison(
        max_lsb=float(error.max()) if error.numel() else 0.0,
        mean_lsb=float(error.mean()) if error.numel() else 0.0,
        p99_lsb=float(torch.quantile(error.flatten(), 0.99)) if error.numel() else 0.0,
        bias_lsb=float(signed.mean()) if error.numel() else 0.0,
        snr_db=snr,
        worst_index=index,
        worst_expected=float(e.flatten()[flat]),
        worst_got=float(g.flatten()[flat]),
        unit=unit,
        errors=error,
    )


def output_units(params: list[dict | None]) -> list[float]:
    """The error unit of each output: its quantization step, or FLOAT_UNIT."""
    return [p["scale"] if p else FLOAT_UNIT for p in params]


def dequantize(q: torch.Tensor, params: dict | None) -> torch.Tensor:
    if params is None:
        return q.to(torch.float32)
    return (q.to(torch.float32) - params["zero_point"]) * params["scale"]


def _as_list(outputs) -> list[torch.Tensor]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def _first_quantize(node, depth: int = 3):
    """The quantize op that first quantizes ``node``'s value (through a few
    single-user layout ops such as the RGB pad), or None."""
    for _ in range(depth):
        users = list(node.users)
        if len(users) != 1:
            return None
        node = users[0]
        if is_q_op(node):
            return node
    return None


def dequantized_inputs(inputs, quantized_module) -> list[torch.Tensor]:
    """Each input as the converted program sees it: quantized with the
    parameters of its first quantize op, dequantized; inputs that are never
    quantized (PT2E off, a float path) as they are."""
    if quantized_module is None:
        return list(inputs)
    placeholders = [n for n in quantized_module.graph.nodes if n.op == "placeholder"]
    out = []
    for x, node in zip(inputs, placeholders):
        q = _first_quantize(node)
        if q is None:
            out.append(x)
            continue
        # The converted program's own quantize op and its inverse, so that
        # ties round exactly as the program rounds them.
        levels = q.target(x, *q.args[1:])
        out.append(torch.ops.quantized_decomposed.dequantize_per_tensor(levels, *q.args[1:]))
    return out


@dataclasses.dataclass
class Numerics:
    """Per-output comparisons of one case: ``comparisons[name][output]`` for
    each name of ``COMPARISONS`` (the lowered program against a reference)."""

    comparisons: dict[str, list[Comparison]]
    fake_quant_vs_float: list[Comparison]  # (a) against the float model
    # With PT2E off the "converted program" (a) is the float model itself.
    tosa_status: str
    units: list[float]
    reference_outputs: list[torch.Tensor]
    program: "LoweredProgram"  # the run, with every value and delegate call

    def to_dict(self) -> dict[str, Any]:
        """The rounded statistics for goldens and the report."""
        outputs = []
        for i, unit in enumerate(self.units):
            entry = {name: self.comparisons[name][i].to_dict() for name in COMPARISONS}
            entry["fake_quant_vs_float"] = self.fake_quant_vs_float[i].to_dict()
            entry["unit"] = float(f"{unit:.6g}")
            outputs.append(entry)
        return {"tosa_status": self.tosa_status, "outputs": outputs}

    def report_dict(self) -> dict[str, Any]:
        """The report's ``numerics``: per output, each comparison's statistics."""
        return {"tosa_status": self.tosa_status, "outputs": self.to_dict()["outputs"]}


def measure(case, result) -> Numerics:
    """Run the programs of a case and compare them."""
    inputs = case.make_inputs()
    model = case.model().eval()
    with torch.no_grad():
        reference = _as_list(model(*inputs))
        reference_dq = _as_list(model(*dequantized_inputs(inputs, result.quantized_module)))
        fake_quant = (
            _as_list(result.quantized_module(*inputs)) if result.quantized_module else reference
        )

    tosa_files = {f.index: f.path.read_bytes() for f in result.artifacts.delegate_files("tosa")}
    program = LoweredProgram(result.edge_program, tosa_files)
    raw = program.run_program(*quantize_inputs(inputs, result.edge_program, result.io_quant_params))
    params = output_quant(result.edge_program, result.io_quant_params)
    lowered = [dequantize(q, p) for q, p in zip(raw, params)]
    units = output_units(params)
    statuses = set(program.tosa_statuses)
    references = {"vs_fake_quant": fake_quant, "vs_float_dq": reference_dq, "vs_float": reference}
    return Numerics(
        comparisons={name: [compare(r, b, u) for r, b, u in zip(references[name], lowered, units)]
                     for name in COMPARISONS},
        fake_quant_vs_float=[compare(r, a, u) for r, a, u in zip(reference, fake_quant, units)],
        tosa_status=statuses.pop() if len(statuses) == 1 else ("none" if not statuses else "mixed"),
        units=units,
        reference_outputs=reference,
        program=program,
    )
