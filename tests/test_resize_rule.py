"""The suite's light copy of ExecuTorch's TOSA RESIZE support rule
(vgf_conformance.tosa.rules, which the resize family's ``cpu_reason`` uses:
which resizes the VGF partitioner keeps on the CPU) agrees with ExecuTorch's
own functions, so a case's declared delegation is true."""

from __future__ import annotations

import itertools

import pytest

from vgf_conformance.cases.families.resize import delegation
from vgf_conformance.tosa import rules

SHAPES = [((3, 3), (1, 1)), ((31, 31), (1, 1)), ((17, 17), (1, 1)), ((16, 16), (1, 1)), ((62, 13), (4, 1)),
          ((64, 80), (4, 5)), ((9, 31), (18, 62)), ((37, 53), (5, 7)), ((256, 256), (16, 16)), ((1, 1), (5, 7)),
          ((13, 40), (1, 1)), ((48, 48), (3, 3))]


def _executorch_error(in_hw, out_hw, align_corners, nearest, scales):
    from executorch.backends.arm._passes.rewrite_upsample import RewriteUpsamplePass
    from executorch.backends.arm.tosa import TosaSpecification
    from executorch.backends.arm.tosa.resize_utils import get_tosa_resize_validation_error

    axes = [RewriteUpsamplePass.get_resize_parameters_1d(i, o, align_corners, "nearest" if nearest else "bilinear", s)
            for i, o, s in zip(in_hw, out_hw, scales)]
    return get_tosa_resize_validation_error(
        input_hw=in_hw, output_hw=out_hw, scale=[axes[0][0], axes[0][1], axes[1][0], axes[1][1]],
        offset=[axes[0][2], axes[1][2]], border=[axes[0][3], axes[1][3]],
        tosa_spec=TosaSpecification.create_from_string("TOSA-1.0+INT"))


@pytest.mark.parametrize("shape, align_corners, nearest",
                         [(s, ac, n) for s, (ac, n) in itertools.product(SHAPES, ((True, False), (False, True)))])
def test_the_rule_agrees_with_executorch(shape, align_corners, nearest):
    in_hw, out_hw = shape
    ours = rules.tosa_resize_error([rules.tosa_resize_1d(i, o, align_corners, nearest, None)
                                     for i, o in zip(in_hw, out_hw)])
    assert (ours is None) == (_executorch_error(in_hw, out_hw, align_corners, nearest, (None, None)) is None)


def test_nearest_with_a_factor_samples_with_the_factor():
    """62x13 at 5/64 (out 4x1): the factor's border is beyond TOSA's range, so
    the partitioner keeps it on the CPU (the size ratio 4/62 would be legal)."""
    kwargs = dict(mode="nearest", scale_factor=5 / 64)
    assert _executorch_error((62, 13), (4, 1), False, True, (5 / 64, 5 / 64)) is not None
    assert "border_y" in delegation.cpu_reason(kwargs, (62, 13), (4, 1))
    assert delegation.cpu_reason(dict(kwargs, recompute_scale_factor=True), (62, 13), (4, 1)) is None
    assert delegation.cpu_reason(dict(mode="bilinear", align_corners=True, size=(1, 1)), (3, 3), (1, 1)) is None
