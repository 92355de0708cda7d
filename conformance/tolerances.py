"""Numeric tolerances, in one place, in quantization steps (LSB) of the output.

A case's tolerance is its family default combined with the tolerances of its
*traits* (each with the reason it needs more than the default); the case
table may also give a case its own. For a float output the unit is stated:
:data:`FLOAT_UNIT` (1/127, one SNORM8 step of a [-1, 1] image).

Bounds:

* ``vs_fake_quant``: the lowered program (TOSA reference) against the PT2E
  fake-quantized program. TOSA's RESCALE and torch's quantize may round a
  value differently, so 1 LSB per requantizing step, and a bound on the mean
  signed error (bias) that catches a systematic shift.
* ``vs_float``: the lowered program against the eager float model.
* ``vulkan_vs_tosa``: the Vulkan runtime against the TOSA-reference path.
"""

from __future__ import annotations

import dataclasses

#: The unit of error for float outputs: one SNORM8 step.
FLOAT_UNIT = 1.0 / 127.0
#: One int8 (SNORM8) step in int16 (SNORM16) steps.
INT8_STEP_IN_INT16 = 32767.0 / 127.0
#: Slack for float rounding in the error itself (a 1-LSB difference can
#: measure 1.0000001 LSB after dequantization).
EPSILON = 1e-3


@dataclasses.dataclass(frozen=True)
class Tolerance:
    vs_fake_quant_lsb: float = 1.0
    bias_lsb: float = 0.5
    vs_float_lsb: float = 2.0
    #: Fraction of output elements allowed beyond ``vs_float_lsb``.
    vs_float_outliers: float = 0.0
    vulkan_vs_tosa_lsb: float = 0.0
    why: str = ""

    def combine(self, other: "Tolerance") -> "Tolerance":
        """The looser of two tolerances, field by field, reasons joined."""
        why = "; ".join(w for w in (self.why, other.why) if w)
        fields = {
            f.name: max(getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self)
            if f.name != "why"
        }
        return Tolerance(**fields, why=why)

    def scaled(self, factor: float, why: str) -> "Tolerance":
        """All LSB bounds times ``factor`` (an output finer than the pipeline)."""
        return dataclasses.replace(
            self,
            vs_fake_quant_lsb=self.vs_fake_quant_lsb * factor,
            bias_lsb=self.bias_lsb * factor,
            vs_float_lsb=self.vs_float_lsb * factor,
            vulkan_vs_tosa_lsb=self.vulkan_vs_tosa_lsb * factor,
            why="; ".join(w for w in (self.why, why) if w),
        )

    def check(self, comparison, what: str) -> str | None:
        """A failure message when ``comparison`` breaks this tolerance, else None."""
        bound = {"vs_fake_quant": self.vs_fake_quant_lsb, "vs_float": self.vs_float_lsb,
                 "vulkan_vs_tosa": self.vulkan_vs_tosa_lsb}[what]
        problems = []
        outliers = comparison.fraction_over(bound + EPSILON)
        allowed = self.vs_float_outliers if what == "vs_float" else 0.0
        if outliers > allowed:
            problems.append(
                f"max error {comparison.max_lsb:.3f} LSB > {bound:g} LSB"
                + (f" on {outliers:.1%} of elements (allowed {allowed:.0%})" if allowed else "")
            )
        if what == "vs_fake_quant" and abs(comparison.bias_lsb) > self.bias_lsb + EPSILON:
            problems.append(f"bias {comparison.bias_lsb:+.3f} LSB beyond +-{self.bias_lsb:g} LSB")
        if not problems:
            return None
        reason = f" (tolerance: {self.why})" if self.why else ""
        return f"{what}: {'; '.join(problems)}{reason}\n  {comparison.describe()}"


#: Family defaults.
FAMILY_TOLERANCES: dict[str, Tolerance] = {
    "resize": Tolerance(),
    "grid_sample": Tolerance(),
    "composite": Tolerance(),
}

#: Tolerances of case traits; a case with several takes the loosest of each bound.
TRAIT_TOLERANCES: dict[str, Tolerance] = {
    "split-resize": Tolerance(
        vs_float_lsb=8,
        why="the split of a downscale by 16 or more (pytorch/executorch#19069 workaround) "
        "samples other pixels than the direct resize",
    ),
    "align-corners-resize": Tolerance(
        vs_float_lsb=3,
        why="with align_corners the ratio (in-1)/(out-1) is approximated by TOSA RESIZE's "
        "fixed-point scale",
    ),
    "int8-grid": Tolerance(
        vs_float_lsb=8,
        vs_float_outliers=0.15,
        why="an SNORM8 grid moves sample positions by up to half a grid step (1/254 of the "
        "image); with nearest sampling that flips the texel picked near ties",
    ),
    "nearest-grid": Tolerance(
        vs_float_lsb=1,
        vs_float_outliers=0.05,
        why="nearest sampling with a quantized grid: a coordinate within a quantization step "
        "of a tie (x.5) may pick the neighbouring texel",
    ),
    "clipped-inputs": Tolerance(
        vs_fake_quant_lsb=2,
        vs_float_lsb=32,
        why="inputs beyond +-1 clip at the SNORM8 input (up to 0.25 = 32 LSB)",
    ),
    "float-io": Tolerance(
        vulkan_vs_tosa_lsb=0.01,
        why="float tensors at delegate boundaries: Vulkan (llvmpipe) and the reference "
        "implementations may round the last float bits differently",
    ),
    "chain": Tolerance(
        vs_fake_quant_lsb=2,
        why="two requantizing ops in a row may each round differently in TOSA and torch",
    ),
}


def tolerance_for(case, output: int = 0) -> Tolerance:
    """The tolerance of one output of ``case``."""
    tolerance = FAMILY_TOLERANCES[case.family]
    for trait in sorted(case.all_traits):
        tolerance = tolerance.combine(TRAIT_TOLERANCES[trait])
    if not case.quantized:
        # PT2E off: the "fake-quant" program is the float model itself.
        tolerance = dataclasses.replace(tolerance, vs_fake_quant_lsb=tolerance.vs_float_lsb)
    if case.quantized and case.output_qspecs[output] == "int16":
        tolerance = tolerance.scaled(
            INT8_STEP_IN_INT16,
            "an int16 output of int8 activations: one int8 step is 258 int16 LSB",
        )
    return tolerance
