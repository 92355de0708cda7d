"""Resizes (``F.interpolate``): bilinear with align_corners False and True,
and nearest; scale factors and sizes, per axis; factors whose output is not an
exact multiple; int8, int16, float and mixed IO, PT2E off; clipped inputs;
1 to 16 channels, 1x1 inputs and outputs, odd widths, 256x256 and 270x480
images; nearest-exact, bicubic and antialiased bilinear.

Traits this family gives its cases: ``split-resize`` (a bilinear downscale by
16 or more, which the reference script splits), ``align-corners-resize``,
``clipped-inputs``. Cases the VGF partitioner keeps on the CPU declare why
(:func:`delegation.cpu_reason`, on the RESIZE rule of :mod:`vgf_conformance.tosa.rules`);
modes torch decomposes into gathers are partly delegated and declare their CPU ops
(:data:`delegation.PARTLY_DELEGATED`).

What each module of the package holds:

* this module: the builders (``resize_case``, one per dimension), tolerance, quick tier, ``FAMILY``;
* :mod:`.parameters`: the tables the builders walk (modes, factors, sizes, channel counts, shapes);
* :mod:`.delegation`: what the pinned stack does with a resize (split, kept on the CPU, partly delegated);
* :mod:`.expectations`: the known failures (reasons, measured divergences, ``EXPECTATIONS`` by case id).
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import vgf_conformance.cases.op_models as models
from vgf_conformance.cases.case import Case, factor_id, frac_id, io_suffix
from vgf_conformance.cases.families.resize.delegation import PARTLY_DELEGATED, cpu_reason, is_split
from vgf_conformance.cases.families.resize.expectations import EXPECTATIONS
from vgf_conformance.cases.families.resize.parameters import (AXIS_FACTORS, CHANNELS, EDGE_SIZES, FACTORS, LARGE,
                                                              MODE_FACTORS, MODES, NONEXACT, ODD_WIDTHS,
                                                              OTHER_MODES, SIZES)
from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.cases.family import Family
from vgf_conformance.cases.tolerances import family_tolerance
from vgf_conformance.oracles.compare import Bound

# One requantizing op, SNORM8 in and out: vs_fake_quant and vs_float keep the
# oracles' defaults (1 LSB, bias 0.3; 2 LSB, measured 1.63: the input
# quantization adds up to 0.5 LSB). Against the float model on dequantized
# inputs a resize is off by its output rounding (0.5) plus TOSA's rounding of
# the interpolation (measured up to 1.4 LSB at 5/2, bias 0.25).
TOLERANCE = family_tolerance(vs_float_dq=Bound(1.5, bias_lsb=0.36))

# The pull-request tier, chosen by coverage (python -m vgf_conformance coverage
# --from-scratch; tests/test_coverage.py): with the other families' quick cases,
# every lowering feature of the full matrix at the least recorded time. Each
# case with the features only it brings to the tier.
QUICK = frozenset({
    "resize-bicubic-ac0-down2-int8io",  # CPU add, sub, clamp; FP32 CONCAT, TRANSPOSE
    "resize-bilinear-ac0-aa-down2-int8io",  # CPU antialiased bilinear
    "resize-bilinear-ac0-in16x56-s1_13-rsf-int8io",  # a RESIZE axis of scale 1
    "resize-bilinear-ac0-in62x13-s5_64-int8io",  # stack: resize_utils' and the TOSA dialect's large-ratio branches
    "resize-bilinear-ac0-same-fp",  # stack: a float RESIZE of ratio 1 removed as a no-op (remove_noop_pass)
    "resize-bilinear-ac1-size64x48-3x2-int8io",  # CPU upsample_bilinear2d
    "resize-nearest-down2-fp",  # RESIZE NEAREST down
    "resize-nearest-exact-x2_3-int8io",  # CPU unsqueeze_copy; a .pte output dim-order mismatch
    "resize-nearest-size31x31-1x1-int8io",  # CPU upsample_nearest2d
    "resize-nearest-up2-int16io",  # RESCALE INT16->INT8
    "resize-nearest-down64-int8io",  # stack: the emitter's double lists (a 1/64 scale)
})


def factor_sizes(f: F) -> tuple[int, int]:
    """Smallest k with input den*k >= 8 and output num*k >= 4: (k, den*k)."""
    k = 1
    while f.denominator * k < 8 or f.numerator * k < 4:
        k += 1
    return k, f.denominator * k


def output_hw(model_kwargs: dict, in_hw) -> tuple[int, int]:
    """The output size PyTorch gives: the size, or floor(in * scale) per axis."""
    if model_kwargs.get("size") is not None:
        return tuple(model_kwargs["size"])
    scale = model_kwargs["scale_factor"]
    scales = scale if isinstance(scale, tuple) else (scale, scale)
    return tuple(int(math.floor(i * s)) for i, s in zip(in_hw, scales))


def resize_case(name: str, model_kwargs: dict, shape, io=("int8", "int8"), kind="smooth",
                traits=(), **extra) -> Case:
    """One resize case; its id, traits and expected delegation follow from
    its parameters."""
    out_hw = output_hw(model_kwargs, shape[2:])
    suffix = io_suffix((io[0],), (io[1],))
    case_id = f"resize-{name}-{suffix}"
    if kind == "image_clip":
        case_id = f"resize-{name}-clip-{suffix}"
        traits = (*traits, "clipped-inputs")
    if is_split(model_kwargs, shape[2:], out_hw):
        traits = (*traits, "split-resize")
    if model_kwargs.get("align_corners"):
        traits = (*traits, "align-corners-resize")
    if extra.get("options", {}).get("enable_pt2e_quantization") is False:
        case_id = f"resize-{name}-fp"
    return Case(
        id=case_id,
        family="resize",
        model=lambda: models.Resize(**model_kwargs),
        inputs=(InputSpec(kind, shape),),
        input_qspecs=(io[0],),
        output_qspecs=(io[1],),
        traits=frozenset(traits),
        stays_on_cpu=cpu_reason(model_kwargs, shape[2:], out_hw),
        **dict(zip(("cpu_ops", "cpu_ops_reason"), PARTLY_DELEGATED.get(model_kwargs.get("mode"), ()))),
        **extra,
    )


def _factor_shape(f: F) -> tuple[int, int, int, int]:
    _, size_in = factor_sizes(f)
    return (1, 4, size_in, size_in + f.denominator)


def _ratio_cases() -> list[Case]:
    """Every mode at every factor, per-axis factors, and sizes."""
    cases = []
    for mode_name, mode in MODES.items():
        for f in FACTORS:
            cases.append(resize_case(f"{mode_name}-{factor_id(f)}", dict(mode, scale_factor=float(f)),
                                     _factor_shape(f)))
        for fh, fw in AXIS_FACTORS:
            shape = (1, 4, factor_sizes(fh)[1], factor_sizes(fw)[1])
            cases.append(resize_case(f"{mode_name}-h{frac_id(fh)}-w{frac_id(fw)}",
                                     dict(mode, scale_factor=(float(fh), float(fw))), shape))
        for (hi, wi), (ho, wo) in SIZES:
            cases.append(resize_case(f"{mode_name}-size{hi}x{wi}-{ho}x{wo}", dict(mode, size=(ho, wo)),
                                     (1, 4, hi, wi)))
    return cases


def _nonexact_cases() -> list[Case]:
    """Factors whose output is not an exact multiple: each mode; for bilinear
    align_corners=False also without the workaround (strict expected
    divergences), with recompute_scale_factor=True, and as a size."""
    cases = []
    for (h, w), f in NONEXACT:
        shape = (1, 4, h, w)
        noise = dict(kind="image")  # uniform noise: a pixel sampled elsewhere shows fully
        out = output_hw(dict(scale_factor=float(f)), (h, w))
        for mode_name, mode in MODES.items():
            name = f"{mode_name}-in{h}x{w}-s{frac_id(f)}"
            kwargs = dict(mode, scale_factor=float(f))
            cases.append(resize_case(name, kwargs, shape, **noise))
            if mode_name != "bilinear-ac0":
                continue
            cases += [  # (without the workaround: the without-bilinear-scale-factor flow)
                resize_case(f"{name}-rsf", dict(kwargs, recompute_scale_factor=True), shape, **noise),
                resize_case(f"{mode_name}-size{h}x{w}-{out[0]}x{out[1]}", dict(mode, size=out), shape, **noise),
            ]
    return cases


def _io_cases() -> list[Case]:
    """int16, float and mixed IO and PT2E off at a few factors; inputs beyond
    the SNORM range, which the int8 boundary clips."""
    cases = []
    for f in (F(2), F(1, 2), F(1, 16), F(1, 32)):
        for mode_name in ("bilinear-ac0", "nearest"):
            if mode_name == "nearest" and f in (F(1, 16), F(1, 32)):
                continue
            kwargs, name = dict(MODES[mode_name], scale_factor=float(f)), f"{mode_name}-{factor_id(f)}"
            cases += [
                resize_case(name, kwargs, _factor_shape(f), io=("int16", "int16")),
                resize_case(name, kwargs, _factor_shape(f), io=("float", "float")),
                resize_case(name, kwargs, _factor_shape(f), io=("int8", "float")),
                resize_case(name, kwargs, _factor_shape(f), options=dict(enable_pt2e_quantization=False)),
            ]
    for f in (F(2), F(1, 2)):
        cases.append(resize_case(f"bilinear-ac0-{factor_id(f)}", dict(MODES["bilinear-ac0"], scale_factor=float(f)),
                                 _factor_shape(f), kind="image_clip"))
    return cases


def _channel_cases() -> list[Case]:
    """Channel counts other than RGBA's 4 (grey, two, RGB, and wider feature maps)."""
    cases = []
    for mode_name, f, channels in CHANNELS:
        _, size_in = factor_sizes(f)
        cases.append(resize_case(f"{mode_name}-{factor_id(f)}-c{channels}",
                                 dict(MODES[mode_name], scale_factor=float(f)),
                                 (1, channels, size_in, size_in + f.denominator)))
    return cases


def _edge_size_cases() -> list[Case]:
    """1x1 inputs upscaled, 1x1 outputs of non-square inputs; odd, non-square
    widths (no multiple of 4 or 16: an odd row pitch) at factors 2 and 1/2."""
    cases = []
    for mode_name, (hi, wi), (ho, wo) in EDGE_SIZES:
        cases.append(resize_case(f"{mode_name}-size{hi}x{wi}-{ho}x{wo}", dict(MODES[mode_name], size=(ho, wo)),
                                 (1, 4, hi, wi)))
    for mode_name, (h, w), f in ODD_WIDTHS:
        cases.append(resize_case(f"{mode_name}-in{h}x{w}-s{frac_id(f)}", dict(MODES[mode_name], scale_factor=float(f)),
                                 (1, 4, h, w)))
    return cases


def _large_cases() -> list[Case]:
    """Camera-sized images reduced to thumbnails: the split of large bilinear
    downscales acts; nearest and align_corners=True stay on the CPU."""
    return [resize_case(f"{mode_name}-in{h}x{w}-s{frac_id(f)}", dict(MODES[mode_name], scale_factor=float(f)),
                        (1, 4, h, w))
            for mode_name, (h, w), f in LARGE]


def _mode_cases() -> list[Case]:
    """Modes beyond bilinear and nearest: nearest-exact, bicubic, antialiased bilinear."""
    return [resize_case(f"{mode_name}-{factor_id(f)}", dict(OTHER_MODES[mode_name], scale_factor=float(f)),
                        _factor_shape(f))
            for mode_name, f in MODE_FACTORS]


def _explored_cases() -> list[Case]:
    """Found by the explorer (python -m vgf_conformance explore); without the
    workaround: the without-bilinear-scale-factor flow."""
    kwargs, shape, noise = dict(MODES["bilinear-ac0"], scale_factor=5 / 64), (1, 4, 62, 13), "image"
    return [resize_case("bilinear-ac0-same", dict(MODES["bilinear-ac0"], scale_factor=1.0), _factor_shape(F(1)),
                        options=dict(enable_pt2e_quantization=False)),
            resize_case("bilinear-ac0-in62x13-s5_64", kwargs, shape, kind=noise),
            *_seed3_cases(),
            # Seed 4's group 6 (docs/explorer/seed-4-findings.md): the lowered
            # program equals fake-quant; PT2E's own range clips the input's peak.
            resize_case("bilinear-ac1-in5x4-s8-c5-n2", dict(MODES["bilinear-ac1"], scale_factor=8.0),
                        (2, 5, 5, 4), traits=("resize-range-clips-peak",)),
            # Seed 5's group 4 (docs/explorer/seed-5-findings.md): PyTorch's float32
            # nearest index against TOSA's exact one (expectation in EXPECTATIONS).
            resize_case("nearest-size2x52-47x88-c1", dict(MODES["nearest"], size=(47, 88)), (1, 1, 2, 52)),
            # Drawn by explore --stack-target (seed 7) where the matrix reached no stack line:
            # a nearest factor of 7/64 on a 26-wide axis gives a RESIZE border of -229, below
            # TOSA's -16 * scale_n = -224, so the partitioner refuses the RESIZE for its border
            # (resize_utils._validate_border); every other CPU resize is refused for its ratio.
            resize_case("nearest-in38x26-h1_6-w7_64-c2", dict(MODES["nearest"], scale_factor=(float(F(1, 6)),
                                                                                               float(F(7, 64)))),
                        (1, 2, 38, 26))]


def _seed3_cases() -> list[Case]:
    """The explorer's seed-3 groups (docs/explorer/seed-3-findings.md), as its
    minimal draws: one-channel smooth images downscaled to one or a few
    pixels. Expectations in EXPECTATIONS; the last two hold (the bias bound on
    one element, the split's two requantizing stages)."""
    def case(h, w, f, channels=1, **extra):
        name = f"bilinear-ac0-in{h}x{w}-s{frac_id(f)}" + (f"-c{channels}" if channels != 4 else "")
        kwargs = dict(MODES["bilinear-ac0"], scale_factor=float(f))
        if extra.pop("rsf", False):
            name, kwargs = f"{name}-rsf", dict(kwargs, recompute_scale_factor=True)
        return resize_case(name, kwargs, (1, channels, h, w), **extra)

    return [case(9, 16, F(1, 9)), case(16, 12, F(1, 10)), case(17, 16, F(1, 12)),
            case(32, 33, F(1, 32), options=dict(enable_pt2e_quantization=False)),
            case(32, 33, F(1, 32), io=("int8", "float")),
            case(16, 56, F(1, 13), channels=4, rsf=True)]


def _cases() -> list[Case]:
    return (_ratio_cases() + _nonexact_cases() + _io_cases() + _channel_cases() + _edge_size_cases()
            + _large_cases() + _mode_cases() + _explored_cases())


FAMILY = Family("resize", __doc__, _cases, TOLERANCE, QUICK, expectations=EXPECTATIONS)
