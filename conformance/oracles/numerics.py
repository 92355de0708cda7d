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

Errors are in quantization steps (LSB) of each output's quantization
(:mod:`conformance.oracles.compare`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from conformance.cases.tolerances import COMPARISONS
from conformance.oracles.compare import Comparison, compare, dequantize, output_units
from conformance.oracles.lowered import LoweredProgram, output_quant, quantize_inputs
from vgf_export.qdq import is_q_op


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
