"""Small graphs of several ops: conv-resize-conv, conv+relu, chains of
resizes, a flow warp (a flow resized to the image, added to a base grid,
sampled with grid_sample), the frame-interpolation warp (a constant base
grid plus a full-resolution flow), chains that mix bilinear and nearest,
batch 2 and 4, two inputs and two outputs with mixed IO.

Traits: every case is a ``chain`` (two requantizing ops in a row); a split
downscale adds ``split-resize``; a warp with nearest sampling through a grid
the program computes adds ``computed-grid-nearest``; the base-grid + flow
warp adds ``computed-grid`` (its grid is an int8 activation).
"""

from __future__ import annotations

from typing import Callable

from torch import nn

import vgf_conformance.cases.op_models as models
from vgf_conformance.cases.case import Case, Expectation
from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.cases.family import Family
from vgf_conformance.cases.tolerances import family_tolerance

INT8 = (("int8",), ("int8",))
FLOAT = (("float",), ("float",))
FLOW_IO = (("int8", "float"), ("int8",))
PT2E_OFF = dict(enable_pt2e_quantization=False)

# The pull-request tier, chosen by coverage (python -m vgf_conformance coverage
# --from-scratch; tests/test_coverage.py): with the other families' quick cases,
# every lowering feature of the full matrix at the least recorded time. Each
# case with the features only it brings to the tier.
QUICK = frozenset({
    "basegrid-flow-buffer-rgba-nearest-border-n2-int8io",  # grid sampler: batch 2, nearest border
    "basegrid-flow-grid-int16out",  # TRANSPOSE INT16
    "basegrid-flow-linspace-rgba-nearest-border-int8io",  # stack: expand_copy to repeat, int64 constants
    "chain-down2-up2-n2-int8io",  # RESIZE with batch 2
    "conv-resize-conv-up2-fp",  # CONV2D FP32
    "conv-resize-conv-up2-floatio",  # stack: data movement moved to a smaller dtype
    "two-in-two-out-int8io",  # two outputs
})


def _image(h: int, w: int, c: int = 4, n: int = 1) -> InputSpec:
    return InputSpec("smooth", (n, c, h, w))


def _flow(h: int = 3, w: int = 4, n: int = 1) -> InputSpec:
    return InputSpec("flow", (n, 2, h, w))


def composite(case_id: str, model: Callable[[], nn.Module], inputs, io, *, options=None,
              traits=("chain",)) -> Case:
    return Case(id=case_id, family="composite", model=model, inputs=tuple(inputs), input_qspecs=io[0],
                output_qspecs=io[1], options=dict(options or {}), traits=frozenset(traits))


def _cases() -> list[Case]:
    up2, down2 = (lambda: models.ConvResizeConv(4, 2.0)), (lambda: models.ConvResizeConv(4, 0.5))
    two = models.TwoInTwoOut
    warp = models.FlowWarp
    return [
        composite("conv-resize-conv-up2-int8io", up2, [_image(8, 12)], INT8),
        composite("conv-resize-conv-down2-int8io", down2, [_image(16, 24)], INT8),
        composite("conv-resize-conv-down32-int8io", lambda: models.ConvResizeConv(4, 1 / 32), [_image(128, 64)],
                  INT8, traits=("chain", "split-resize")),
        composite("conv-resize-conv-up2-floatio", up2, [_image(8, 12)], FLOAT),
        composite("conv-resize-conv-up2-fp", up2, [_image(8, 12)], FLOAT, options=PT2E_OFF),
        composite("conv-relu-int8io", lambda: models.ConvRelu(4), [_image(8, 12)], INT8),
        composite("chain-down2-up2-int8io", lambda: models.ChainedResize((0.5, 2.0)), [_image(16, 24)], INT8),
        composite("chain-down4-up4-int8io", lambda: models.ChainedResize((0.25, 4.0)), [_image(16, 24)], INT8),
        composite("chain-down32-up2-int8io", lambda: models.ChainedResize((1 / 32, 2.0)), [_image(128, 64)], INT8,
                  traits=("chain", "split-resize")),
        composite("chain-up2-down2-up2-int8io", lambda: models.ChainedResize((2.0, 0.5, 2.0)), [_image(8, 12)], INT8),
        composite("flow-warp-rgba-border-int8io", lambda: warp("bilinear", "border"), [_image(12, 16), _flow()],
                  FLOW_IO),
        composite("flow-warp-rgb-border-int8io", lambda: warp("bilinear", "border"), [_image(12, 16, 3), _flow()],
                  FLOW_IO),
        composite("flow-warp-rgba-zeros-nearest-int8io", lambda: warp("nearest", "zeros"),
                  [_image(12, 16), _flow()], FLOW_IO, traits=("chain", "computed-grid-nearest")),
        composite("flow-warp-rgba-border-int16flow", lambda: warp("bilinear", "border"), [_image(12, 16), _flow()],
                  (("int8", "int16"), ("int8",))),
        composite("two-in-two-out-int8io", two, [_image(8, 12), _image(8, 12)], (("int8", "int8"), ("int8", "int8"))),
        composite("two-in-two-out-mixed", two, [_image(8, 12), _image(8, 12)], (("int8", "float"), ("int16", "int8"))),
        composite("two-in-two-out-floatio", two, [_image(8, 12), _image(8, 12)],
                  (("float", "float"), ("float", "float"))),
        composite("two-in-two-out-fp", two, [_image(8, 12), _image(8, 12)], (("float", "float"), ("float", "float")),
                  options=PT2E_OFF),
    ] + _dimension_cases()


def _dimension_cases() -> list[Case]:
    """Batch > 1, chains that mix bilinear and nearest, the base-grid + flow warp."""
    up2 = lambda: models.ConvResizeConv(4, 2.0)  # noqa: E731
    bl_up_nn_down = (("bilinear", 2.0), ("nearest", 0.5))
    nn_up_bl_down = (("nearest", 2.0), ("bilinear", 0.5))
    cases = [
        composite("conv-resize-conv-up2-n2-int8io", up2, [_image(8, 12, n=2)], INT8),
        composite("chain-down2-up2-n2-int8io", lambda: models.ChainedResize((0.5, 2.0)), [_image(16, 24, n=2)], INT8),
        composite("chain-down4-up4-n4-int8io", lambda: models.ChainedResize((0.25, 4.0)), [_image(16, 24, n=4)], INT8),
        composite("chain-bilinear-up2-nearest-down2-int8io", lambda: models.ModeChain(bl_up_nn_down),
                  [_image(8, 12)], INT8),
        composite("chain-nearest-up2-bilinear-down2-int8io", lambda: models.ModeChain(nn_up_bl_down),
                  [_image(8, 12)], INT8),
        composite("chain-nearest-up2-bilinear-down2-n2-int8io", lambda: models.ModeChain(nn_up_bl_down),
                  [_image(8, 12, n=2)], INT8),
        composite("chain-bilinear-down2-nearest-up4-bilinear-down2-int8io",
                  lambda: models.ModeChain((("bilinear", 0.5), ("nearest", 4.0), ("bilinear", 0.5))),
                  [_image(16, 24)], INT8),
        composite("flow-warp-rgba-border-n2-int8io", lambda: models.FlowWarp("bilinear", "border"),
                  [_image(12, 16, n=2), _flow(n=2)], FLOW_IO),
    ]
    # The frame-interpolation warp: grid_sample(image, base + flow.permute(0, 2, 3, 1)).
    # Not in the table (docs/divergences.md, "Base grid + flow"): the linspace
    # base at batch 2 (one element 1 step off on Vulkan). Nearest with border
    # padding: the lowered program equals fake-quant once the grid-sampler
    # reference reads the RESCALE's -32768 as SNORM does (-1.0).
    for base in ("buffer", "linspace"):
        for n in (1, 2):
            for mode, padding in (("bilinear", "border"), ("nearest", "border")):
                if base == "linspace" and n == 2:
                    continue
                traits = ("chain", "basegrid-nearest") if mode == "nearest" else ("chain", "computed-grid")
                batch = f"-n{n}" if n > 1 else ""
                cases.append(composite(
                    f"basegrid-flow-{base}-rgba-{mode}-{padding}{batch}-int8io",
                    lambda m=mode, p=padding, b=base, n=n: models.BaseGridFlowWarp(m, p, b, (12, 16), n),
                    [_image(12, 16, n=n), _flow(12, 16, n=n)], FLOW_IO, traits=traits))
    # The warp's grid as an SNORM16 output: the int8 add's range is wider than
    # [-1, 1], so its requantization to int16 must clamp to -32767 (a divergence).
    cases.append(composite("basegrid-flow-grid-int16out", lambda: models.BaseGridPlusFlow((12, 16)),
                           [_flow(12, 16)], (("int8",), ("int16",)), traits=("chain", "clipped-output")))
    return cases


#: Known failures on the pinned stack.
EXPECTATIONS = {
    "basegrid-flow-grid-int16out": Expectation(
        "run", r"codes outside the output's quantization range \[-32767, 32767\]: \[-32768\]",
        "ExecuTorch 1.5.1 lowers the int8 add's requantization to the SNORM16 output (quant_min -32767) "
        "as a TOSA RESCALE INT8->INT16 without a clamp: where base + flow < -1 it saturates at the "
        "int16 dtype's -32768, where the PT2E program clamps to -32767 (docs/divergences.md, "
        "\"Base grid + flow\"; docs/divergences/narrow_range_output_saturation.py)",
        checks=("vs_fake_quant",)),
}



# The oracles' defaults: every composite case is a chain (trait "chain"), which
# loosens vs_fake_quant and vs_float_dq; vs_float keeps 2 LSB (measured 1.75).
TOLERANCE = family_tolerance()

FAMILY = Family("composite", __doc__, _cases, TOLERANCE, QUICK, EXPECTATIONS)
