"""Numerics: run the lowered program, compare with references, in LSB.

Four programs per case, on the same seeded inputs:

* ``float``: the eager torch model (the reference);
* ``float_dq``: the eager torch model on the dequantized inputs (each input
  quantized as the converted program quantizes it, then dequantized): what
  the quantized program really sees;
* ``fake_quant`` (a): the PT2E-converted module, run in torch;
* ``lowered`` (b): the exported program, run node by node: each VGF delegate's
  TOSA flatbuffer through the TOSA reference model (in a child process), each
  grid-sampler delegate through :mod:`vgf_conformance.oracles.grid_sampler_reference`,
  and ops left on the CPU in torch.

Errors are in quantization steps (LSB) of each output's quantization
(:mod:`vgf_conformance.oracles.compare`). Each integer output's codes must also lie
within its quantization range ``[quant_min, quant_max]``
(:func:`codes_outside_range`, part of ``vs_fake_quant``): a code beyond it is
one no quantized program can produce, however loose the output's bound in
LSB. Outputs held to a statistical bound (the model tier) are rounded coarser
in goldens (``Comparison.to_dict``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from vgf_conformance.oracles.compare import EPSILON, Comparison, compare, dequantize, output_units
from vgf_conformance.oracles.lowered import LoweredProgram, output_quant, quantize_inputs
from vgf_conformance.oracles.references import ORACLES, Subject, fake_quant_program, float_model
from vgf_conformance.oracles.tosa_reference import RUNS_DIR


@dataclasses.dataclass
class Numerics:
    """Per-output comparisons of one case: ``comparisons[name][output]`` for
    each oracle of :data:`ORACLES` (the lowered program against its reference)."""

    comparisons: dict[str, list[Comparison]]
    fake_quant_vs_float: list[Comparison]  # (a) against the float model
    # With PT2E off the "converted program" (a) is the float model itself.
    tosa_status: str
    units: list[float]
    reference_outputs: list[torch.Tensor]  # the float model's
    program: "LoweredProgram"  # the run, with every value and delegate call
    #: Per output: whether it is held to a statistical bound (rounded coarser).
    statistical: list[bool] = dataclasses.field(default_factory=list)
    #: Per output: the codes outside its quantization range (None: none, or a float output).
    outside_range: list["OutsideRange | None"] = dataclasses.field(default_factory=list)
    #: Per output, per comparison whose bound allows outliers: the fraction
    #: of elements beyond its ``max_lsb`` (what the allowance decides).
    beyond: list[dict[str, float]] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The rounded statistics for goldens and the report."""
        outputs = []
        for i, unit in enumerate(self.units):
            coarse = i < len(self.statistical) and self.statistical[i]
            entry = {name: comparisons[i].to_dict(coarse) for name, comparisons in self.comparisons.items()}
            for name, fraction in (self.beyond[i] if i < len(self.beyond) else {}).items():
                entry[name]["beyond_max_lsb"] = round(fraction, 4)
            entry["fake_quant_vs_float"] = self.fake_quant_vs_float[i].to_dict(coarse)
            entry["unit"] = float(f"{unit:.6g}")
            if i < len(self.outside_range) and self.outside_range[i]:
                entry["codes_outside_range"] = self.outside_range[i].to_dict()
            outputs.append(entry)
        return {"tosa_status": self.tosa_status, "outputs": outputs}


@dataclasses.dataclass(frozen=True)
class OutsideRange:
    """The codes of one integer output that lie outside ``[quant_min, quant_max]``."""

    count: int
    elements: int
    values: tuple[int, ...]  # the distinct codes outside the range
    quant_min: int
    quant_max: int
    first_index: tuple[int, ...]

    def describe(self) -> str:
        return (f"{self.count} of {self.elements} codes outside the output's quantization range "
                f"[{self.quant_min}, {self.quant_max}]: {list(self.values)} (first at index "
                f"{list(self.first_index)}); the quantized program clamps to the range, so "
                "no bound in LSB excuses them")

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "values": list(self.values)}


def codes_outside_range(codes: torch.Tensor, params: dict | None) -> OutsideRange | None:
    """The codes of an integer output beyond its quantization range, or None."""
    if params is None:
        return None
    qmin, qmax = int(params["quant_min"]), int(params["quant_max"])
    wide = codes.to(torch.int64)
    outside = (wide < qmin) | (wide > qmax)
    if not bool(outside.any()):
        return None
    first = outside.flatten().nonzero()[0].item()
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), tuple(codes.shape)))
    return OutsideRange(int(outside.sum()), codes.numel(), tuple(sorted(set(codes[outside].tolist()))),
                        qmin, qmax, index)


def measure(case, result, model=None, inputs=None) -> Numerics:
    """Run the lowered program of a case and compare it with every oracle
    (``model``, ``inputs``: the ones the case was exported from; default:
    built again)."""
    model = case.model() if model is None else model
    subject = Subject(model.eval(), case.make_inputs() if inputs is None else inputs, result.quantized_module)
    with torch.no_grad():
        references = {name: oracle.reference(subject) for name, oracle in ORACLES.items()}
        reference, fake_quant = float_model(subject), fake_quant_program(subject)

    tosa_files = {f.index: f.path.read_bytes() for f in result.artifacts.delegate_files("tosa")}
    program = LoweredProgram(result.edge_program, tosa_files, tosa_runs=result.artifacts.root / RUNS_DIR)
    raw = program.run_program(*quantize_inputs(subject.inputs, result.edge_program, result.io_quant_params))
    params = output_quant(result.edge_program, result.io_quant_params)
    lowered = [dequantize(q, p) for q, p in zip(raw, params)]
    units = output_units(params)
    statuses = set(program.tosa_statuses)
    comparisons = {name: [compare(r, b, u) for r, b, u in zip(outputs, lowered, units)]
                   for name, outputs in references.items()}
    tolerances = [case.get_tolerance(i) for i in range(len(units))]
    return Numerics(
        comparisons=comparisons,
        fake_quant_vs_float=[compare(r, a, u) for r, a, u in zip(reference, fake_quant, units)],
        tosa_status=statuses.pop() if len(statuses) == 1 else ("none" if not statuses else "mixed"),
        units=units,
        reference_outputs=reference,
        program=program,
        statistical=[any(b.statistical for b in t.bounds.values()) for t in tolerances],
        outside_range=[codes_outside_range(q, p) for q, p in zip(raw, params)],
        beyond=[{name: comparisons[name][i].fraction_over(bound.max_lsb + EPSILON)
                 for name, bound in t.bounds.items() if bound.outliers} for i, t in enumerate(tolerances)],
    )
