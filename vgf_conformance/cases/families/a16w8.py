"""16-bit activations (Arm's a16w8 quantization config over the whole model):
int16 (SNORM16) IO held to 16-bit accuracy, unlike the other families'
int16-IO cases, which compute at 8 bits inside (``int8-internal``).

Measured on the pinned stack: a bilinear RESIZE int16 -> INT48 is exact and
rounds once, in the output RESCALE (ties toward +inf, torch half to even: 1 LSB
on ties only, a bias of half the tie fraction, +0.04 measured); nearest copies
values (0 LSB); conv-resize-conv is within 1 LSB of fake-quant, and its int8
weights (``int8-weights``) move it up to ~120 LSB from the float model.
"""

from __future__ import annotations

import vgf_conformance.cases.op_models as models
from vgf_conformance.cases.case import Case
from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.cases.family import Family
from vgf_conformance.cases.tolerances import family_tolerance
from vgf_conformance.oracles.compare import Bound

A16W8 = dict(quant_config="a16w8")
# The pull-request tier, chosen by coverage (python -m vgf_conformance coverage
# --from-scratch; tests/test_coverage.py): with the other families' quick cases,
# every lowering feature of the full matrix at the least recorded time. Each
# case with the features only it brings to the tier.
QUICK = frozenset({
    "a16w8-conv-resize-conv-up2-int16io",  # CONV2D INT16 x INT8, 16-bit RESCALE and CLAMP
    "a16w8-resize-nearest-up2-int16io",  # RESIZE INT16->INT16
})


def _case(name: str, model, traits=()) -> Case:
    return Case(id=f"a16w8-{name}-int16io", family="a16w8", model=model,
                inputs=(InputSpec("smooth", (1, 4, 8, 12)),), input_qspecs=("int16",),
                output_qspecs=("int16",), options=dict(A16W8), traits=frozenset(traits))


def _cases() -> list[Case]:
    return [
        _case("resize-bilinear-ac0-up2", lambda: models.Resize("bilinear", align_corners=False, scale_factor=2.0)),
        _case("resize-nearest-up2", lambda: models.Resize("nearest", scale_factor=2.0)),
        _case("conv-resize-conv-up2", lambda: models.ConvResizeConv(4, 2.0), traits=("chain", "int8-weights")),
    ]


# In SNORM16 LSB, each at most 1.5x the worst measured. vs_fake_quant: one
# output rounding that may differ on ties (1.002 measured; bias 0.057).
# vs_float_dq: the output rounding (0.502 measured; 1 LSB is the floor).
# vs_float: plus input quantization, 0.5 LSB (0.94 measured, bias 0.083).
TOLERANCE = family_tolerance(vs_fake_quant=Bound(1.0, bias_lsb=0.08), vs_float=Bound(1.4, bias_lsb=0.12))

FAMILY = Family("a16w8", __doc__, _cases, TOLERANCE, QUICK)
