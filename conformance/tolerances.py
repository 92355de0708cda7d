"""Numeric tolerances, in one place, in quantization steps (LSB) of the output.

A case's tolerance is its family's default unless the case table gives one.
For a float output (no output quantization) the unit is stated instead: an
absolute error of ``FLOAT_UNIT`` (1/127, one SNORM8 step of a [-1, 1] image),
so that numbers read the same way across cases.
"""

from __future__ import annotations

import dataclasses

#: The unit of error for float outputs: one SNORM8 step.
FLOAT_UNIT = 1.0 / 127.0


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Bounds on max |error| in LSB of the output.

    vs_fake_quant_lsb: lowered program (TOSA reference) against the PT2E
        fake-quantized program run in torch.
    vs_float_lsb: either quantized program against the eager float model.
    vulkan_vs_tosa_lsb: Vulkan runtime against the TOSA-reference path.
    why: the reason for a bound beyond the family default.
    """

    vs_fake_quant_lsb: float = 1.0
    vs_float_lsb: float = 2.0
    vulkan_vs_tosa_lsb: float = 0.0
    why: str = ""


#: Family defaults.
FAMILY_TOLERANCES: dict[str, Tolerance] = {
    "resize": Tolerance(),
    "grid_sample": Tolerance(),
    "io": Tolerance(),
    "composite": Tolerance(),
}


def tolerance_for(case) -> Tolerance:
    return FAMILY_TOLERANCES[case.family]
