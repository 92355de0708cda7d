"""The resize family's known failures on the pinned stack: why each fails
(the reasons), how far (the measured divergences) and ``EXPECTATIONS`` by case id."""

from __future__ import annotations

from fractions import Fraction as F

from vgf_conformance.cases.case import Expectation, frac_id, measured_lsb
from vgf_conformance.oracles.references import ORACLES

#: Each ``parameters.NONEXACT`` factor in the without-bilinear-scale-factor
#: flow (:mod:`vgf_conformance.cases.flows`): the divergence measured, smallest
#: and largest max error (LSB) over the three comparisons; its expectation
#: holds it to that range (``measured_lsb``).
UPSTREAM_DIVERGENCE = {((7, 7), F(3, 2)): (61.0, 61.83), ((9, 13), F(3, 2)): (73.03, 74.0),
                       ((20, 17), F(3, 10)): (57.0, 57.01), ((10, 13), F(7, 10)): (27.93, 28.0),
                       ((5, 7), F(5, 2)): (42.66, 43.0), ((10, 11), F(1, 3)): (193.97, 194.0),
                       ((62, 13), F(5, 64)): (124.84, 125.0)}  # found by the explorer

#: ExecuTorch 1.5.1 lowers bilinear (align_corners=False) with the output/input
#: size ratio even when a scale factor is given; PyTorch samples with the factor.
#: The bilinear-scale-factor workaround corrects it; the without-bilinear-scale-factor
#: flow shows what ExecuTorch does without it.
BILINEAR_SCALE_FACTOR_IGNORED = (
    "without the bilinear-scale-factor workaround: bilinear align_corners=False with a scale "
    "factor whose output floor(in * s) is not an exact multiple: the lowering samples with the "
    "out/in size ratio, PyTorch (recompute_scale_factor False/None) with the given factor, so "
    "pixels are sampled elsewhere (28 to 194 LSB; with recompute_scale_factor=True or a size, "
    "the same shapes agree). Nearest honours the factor (pytorch/executorch#22437); bilinear "
    "does not. See docs/divergences.md")

_ONE_BY_ONE_PTE = (
    "the program stays on the CPU; to_executorch() labels the upsample's 31x31 input NHWC (the "
    "channels-last marks of the reference export script) and its 1x1 output NCHW (a 1x1 image "
    "has the same strides either way), and the portable upsample kernel refuses tensors of "
    "different dim orders (InvalidArgument): the shipped program.pte does not run")

_SPLIT_FACTOR_IGNORED = (
    "the resize-split workaround (vgf_export.passes) rebuilds a bilinear downscale by 16 or more "
    "from sizes; where floor(in * s) is not an exact multiple (31 * 1/16 -> 1, 270 * 1/16 -> 16, "
    "270x480 * 1/64 -> 4x7) the stages sample with the size ratio (270/16) and PyTorch with the "
    "factor (16): pixels of other rows (41 to 197 LSB against float; the PT2E program is split "
    "too, so vs_fake_quant agrees). See docs/divergences.md")
_IO_PARAMS_LIFTED = (
    "bicubic decomposes into ops with lifted tensor constants; ExecuTorch's "
    "extract_io_quant_params keys the input's quant params by the first placeholder "
    "(_lifted_tensor_constant0), not by the user input x, so the input is fed unquantized and "
    "the TOSA reference model refuses it. With the params keyed right the delegates equal "
    "fake-quant (0 LSB). See docs/divergences.md")

_CPU_OUTPUT_LAYOUT = (
    "the output comes from a CPU op (the gather of nearest-exact's decomposition): "
    "to_executorch() re-derives its layout from the op's fake kernel, which returns a "
    "contiguous tensor, so program.pte declares the output NCHW while the exported program "
    "marks it NHWC (the channels-last contract of the reference export script); the "
    "pte-delegate-layouts workaround pins delegate outputs only. See docs/divergences.md")

_FACTOR_BORDER_ILLEGAL = (
    "found by the explorer: bilinear align_corners=False, 62x13 at 5/64 (out 4x1). The "
    "bilinear-scale-factor workaround encodes the factor, and the border that factor needs "
    "(-167) is beyond TOSA's range for the RESIZE's scale ([-160, 10)): the lowering refuses "
    "it. Without the workaround ExecuTorch lowers the size ratio and diverges by 125 LSB (its "
    "run in the without-bilinear-scale-factor flow). A bug of vgf_export's workaround: it should fall back (e.g. split the "
    "resize) where the factor cannot be encoded. See docs/divergences.md")

_NO_TOSA_DUMP = (
    "found by the explorer: a float (PT2E off) bilinear resize by 1: the VGF delegate that "
    "remains leaves no TOSA flatbuffer in the intermediates (the upsample itself is a no-op, "
    "pytorch/executorch#22140), and vgf_export's artifact writer refuses a VGF delegate without "
    "its dump. Ours (vgf_export/artifacts.py); the quantized twin (-same-int8io) exports")

_SPLIT_FROM_SIZES = (
    "found by the explorer: the resize-split workaround (vgf_export.passes) decides and rebuilds "
    "a bilinear downscale from sizes: it acts wherever the size ratio in/out is 16 or more on "
    "an axis (9x16 at 1/9 -> 1x1: W's ratio is 16, the factor 1/9), and rebuilds both axes "
    "from sizes (16x12 at 1/10: W, not split, samples with the ratio 12), so PyTorch's factor "
    "is lost: pixels 1 to 3.5 px away (2.6 to 63 LSB against float). The PT2E program is split "
    "too (vs_fake_quant agrees); with PT2E off the float model stands in for it, so every "
    "comparison sees it. Ours, not ExecuTorch's. See docs/divergences.md")

_NARROW_RANGE_SATURATES = (
    "inputs beyond +-1 clip at the SNORM8 input; the resize's own int8 range (calibrated on them: "
    "scale 1/102.6, zero point 1) is wider than the SNORM8 output's, and ExecuTorch 1.5.1 lowers "
    "the output's requantization as a RESCALE (x1.238) without a clamp: it saturates at the int8 "
    "dtype's -128, not at quant_min -127 (the PT2E program clamps). One step, inside the LSB "
    "bound; the range check sees it. The class of the ReLU and SNORM16 grid cases. See "
    "docs/divergences.md")

_NEAREST_FLOAT32_INDEX = (
    "found by the explorer (seed 5): nearest to a size where dst * in / out is an integer that "
    "float32 rounds down (W 52 -> 88: 22 * float32(52/88) = 12.999999): PyTorch (eager and the "
    "PT2E program) samples column 12, the TOSA RESIZE (NEAREST, scale 44/26, exact integers) "
    "column 13; columns 22 and 44 of 88 take the neighbouring pixel, in the lowered program "
    "only. No RESIZE offset reproduces float32's sporadic rounding. See docs/divergences.md")

EXPECTATIONS = {
    "resize-nearest-size2x52-47x88-c1-int8io": Expectation(
        "run", r"max error \d+\.\d+ LSB >", _NEAREST_FLOAT32_INDEX, checks=tuple(ORACLES),
        lsb=measured_lsb(12.0, 12.37)),
    "resize-bilinear-ac0-up2-clip-int8io": Expectation(
        "run", r"codes outside the output's quantization range \[-127, 127\]: \[-128\]",
        _NARROW_RANGE_SATURATES, checks=("vs_fake_quant",)),
    "resize-bilinear-ac0-in9x16-s1_9-c1-int8io": Expectation(
        "run", r"max error \d+\.\d+ LSB >", _SPLIT_FROM_SIZES, checks=("vs_float_dq", "vs_float"),
        lsb=measured_lsb(63.0, 63.08)),
    "resize-bilinear-ac0-in16x12-s1_10-c1-int8io": Expectation(
        "run", r"max error \d+\.\d+ LSB >", _SPLIT_FROM_SIZES, checks=("vs_float_dq", "vs_float"),
        lsb=measured_lsb(6.25, 6.44)),
    "resize-bilinear-ac0-in17x16-s1_12-c1-int8io": Expectation(
        "run", r"max error \d+\.\d+ LSB >", _SPLIT_FROM_SIZES, checks=("vs_float",),
        lsb=measured_lsb(2.58)),
    "resize-bilinear-ac0-in32x33-s1_32-c1-fp": Expectation(
        "run", r"max error \d+\.\d+ LSB >", _SPLIT_FROM_SIZES, checks=tuple(ORACLES),
        lsb=measured_lsb(11.34)),
    "resize-bilinear-ac0-same-fp": Expectation("serialize", r"expected one TOSA dump for delegate", _NO_TOSA_DUMP),
    "resize-bilinear-ac0-in62x13-s5_64-int8io": Expectation(
        "lower", r"RESIZE border_y must be in \[-160, 10\); got -167", _FACTOR_BORDER_ILLEGAL),
    **{f"resize-nearest-exact-{f}-int8io": Expectation(
        # Two failures of the one cause, each named: the declared layout, and
        # the plan executed with it (its NCHW output read against the NHWC one).
        "run", r"program\.pte declares .*'output': \['int8\[[0-9x]+\] dim_order=\[0, 1, 2, 3\]'\]"
               r"|executed from its serialized plan .*differs from the lowered program:\n"
               r"output 0 \(int8\[1, 4, \d+, \d+\]\): \d+ of \d+ elements differ",
        _CPU_OUTPUT_LAYOUT + ". Executed from its serialized plan, the program so reads its NCHW output "
        "against the lowered program's NHWC one: that mismatch is this failure too", checks=("pte",))
       for f in ("up2", "down2", "x2_3")},
    **{f"resize-bilinear-ac0-in{shape}-s{f}-int8io": Expectation(
        "run", r"max error \d+\.\d+ LSB >", _SPLIT_FACTOR_IGNORED, checks=("vs_float_dq", "vs_float"),
        lsb=measured_lsb(*measured))
       for shape, f, measured in (("31x31", "1_16", (197.09, 197.25)), ("270x480", "1_16", (40.5, 40.63)),
                                  ("270x480", "1_64", (49.5, 49.59)))},
    **{f"resize-bicubic-{name}-int8io": Expectation(
        "run", r"BAD_INPUT; input\[0\] \(\w+\): dtype float32, graph wants INT8", _IO_PARAMS_LIFTED)
       for name in ("ac0-up2", "ac0-down2", "ac1-up2")},
    "resize-nearest-size31x31-1x1-int8io": Expectation(
        "run", r"different dim orders", _ONE_BY_ONE_PTE, checks=("pte",)),
    "resize-bilinear-ac1-size31x31-1x1-int8io": Expectation(
        "run", r"different dim orders", _ONE_BY_ONE_PTE, checks=("pte",)),
    "resize-nearest-size37x53-64x96-int8io": Expectation(
        "run", r"vs_float_dq: max error 2\.000 LSB",
        "nearest 37x53 -> 64x96 (non-integer ratios): one element ([0, 1, 63, 42]) of the PT2E "
        "program picks another source pixel than eager F.interpolate on the same dequantized "
        "input (2 LSB); the lowered program equals the PT2E program (vs_fake_quant 0 LSB), so the "
        "index rounding differs in PyTorch's exported upsample_nearest2d, not in the lowering",
        checks=("vs_float_dq",), lsb=measured_lsb(2.0)),
}


def _bilinear_ac0_id(hw: tuple[int, int], f: F) -> str:
    return f"resize-bilinear-ac0-in{hw[0]}x{hw[1]}-s{frac_id(f)}-int8io"


#: Case id -> how it fails in the without-bilinear-scale-factor flow.
WITHOUT_BILINEAR_SCALE_FACTOR = {
    _bilinear_ac0_id(hw, f): Expectation("run", r"max error \d+\.\d+ LSB >", BILINEAR_SCALE_FACTOR_IGNORED,
                                         checks=tuple(ORACLES), lsb=measured_lsb(*measured))
    for (hw, f), measured in UPSTREAM_DIVERGENCE.items()}
