"""The case table: every model the suite exports, declared once.

A :class:`Case` names a model factory, seeded example inputs, IO qspecs,
export options, the expected outcome (:class:`Expectation`: which stage is
known to fail, and how), its tolerance and marks. Ids are readable and stable,
e.g. ``resize-bilinear-ac0-down16-int8io``; they name the golden files.

The table is built by the ``_resize_cases`` ... ``_composite_cases``
generators below; ``CASES`` is the result; ``Case.quick`` marks the pull-request tier.
Tolerances live in :mod:`conformance.cases.tolerances`, one place for all.
"""

from __future__ import annotations

import dataclasses
import math
import re
import zlib
from fractions import Fraction
from typing import Callable

import torch
from torch import nn

from conformance.cases import models
from conformance.cases.tolerances import COMPARISONS, Tolerance, resolve
from vgf_export import snorm_qspec

# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------
#: IO qspec names used in the table: SNORM8, SNORM16, or float (None).
QSPECS = {"int8": lambda: snorm_qspec(8), "int16": lambda: snorm_qspec(16), "float": lambda: None}

#: The stages of a case, in order; "run" executes the lowered program.
STAGES = ("export", "quantize", "partition", "lower", "convert", "serialize", "run")


#: The suite's tests that need the export only (not a run of the program).
EXPORT_ONLY_TESTS = ("test_export", "test_delegation", "test_golden")
#: The checks of a run an Expectation can name, and the test of each: the
#: numerics comparisons, and the shipped program on ExecuTorch's runtime.
RUN_CHECKS = {**{c: f"test_numerics_{c}" for c in COMPARISONS}, "pte": "test_pte"}


@dataclasses.dataclass(frozen=True)
class Expectation:
    """A known failure on the pinned version, recorded as a strict xfail.

    A stage failure names the stage and a regular expression its error
    matches; every test of the case expects it. A numerics divergence names
    the comparison (one of ``COMPARISONS``, stage ``run``) and a regular
    expression of that comparison's failure message: only that comparison's
    test expects it, and it fails the run (XPASS) once the divergence is gone.
    """

    stage: str
    match: str
    reason: str
    checks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"Expectation.stage must be one of {STAGES}, got {self.stage!r}")
        if self.checks and (self.stage != "run" or set(self.checks) - set(RUN_CHECKS)):
            raise ValueError(f"Expectation.checks must be among {tuple(RUN_CHECKS)} with stage 'run', "
                             f"got {self.checks!r} at stage {self.stage!r}")
        re.compile(self.match)

    def applies_to(self, test_name: str) -> bool:
        """Whether the test named ``test_name`` of the case is expected to fail:
        a comparison's test for a numerics divergence; for a failure at stage
        ``run``, the tests that run the program; else every test."""
        if self.checks:
            return test_name in {RUN_CHECKS[c] for c in self.checks}
        return self.stage != "run" or test_name not in EXPORT_ONLY_TESTS


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One seeded example input.

    kind: "image" (uniform noise in [-1, 1]), "smooth" (a smooth random
    image in [-1, 1]: 5x5 random control points upsampled, so that resizes which sample
    other pixels than the direct resize, such as the split of large
    downscales, stay comparable to float), "image_clip" (uniform in
    [-1.25, 1.25]: beyond the SNORM range, so the int8 boundary clips),
    "grid:<name>" (a sampling grid, see ``_grid``), "flow" (a small flow
    field in [-0.25, 0.25]).
    """

    kind: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    family: str  # resize | grid_sample | io | composite
    model: Callable[[], nn.Module]
    inputs: tuple[InputSpec, ...]
    input_qspecs: tuple[str, ...]  # names in QSPECS, one per input
    output_qspecs: tuple[str, ...]  # names in QSPECS, one per output
    options: dict = dataclasses.field(default_factory=dict)  # export_model options
    expect: Expectation | None = None
    tolerance: Tolerance | None = None  # overrides the family and trait tolerances
    quick: bool = False
    #: Properties that loosen tolerances (see conformance.cases.tolerances.TRAITS).
    traits: frozenset[str] = frozenset()
    #: None: the case is expected to be delegated (nothing but Q/DQ on the CPU);
    #: else why every op is expected to stay on the CPU.
    stays_on_cpu: str | None = None

    @property
    def quantized(self) -> bool:
        return self.options.get("enable_pt2e_quantization", True)

    def make_inputs(self) -> tuple[torch.Tensor, ...]:
        gen = torch.Generator().manual_seed(zlib.crc32(self.id.encode()))
        return tuple(_make_input(spec, gen) for spec in self.inputs)

    def export_kwargs(self) -> dict:
        kwargs = dict(self.options)
        if self.quantized:
            kwargs["quantized_input_qspecs"] = [QSPECS[q]() for q in self.input_qspecs]
            kwargs["quantized_output_qspecs"] = [QSPECS[q]() for q in self.output_qspecs]
        if "grid_sampler_grid_input_qspec" in kwargs:
            kwargs["grid_sampler_grid_input_qspec"] = QSPECS[kwargs["grid_sampler_grid_input_qspec"]]()
        return kwargs

    @property
    def all_traits(self) -> frozenset[str]:
        """The declared traits plus the ones the IO implies."""
        traits = set(self.traits)
        if (not self.quantized or "float" in self.input_qspecs + self.output_qspecs
                or self.options.get("quantize_grid_sample_output") is False):
            traits.add("float-io")
        if self.quantized and "int16" in self.input_qspecs + self.output_qspecs:
            traits.add("int8-internal")
        return frozenset(traits)

    @property
    def internal_precision(self) -> str:
        """The precision the lowered program computes at (what int16 IO carries)."""
        return "int8" if self.quantized else "float32"

    def get_tolerance(self, output: int = 0) -> Tolerance:
        """The tolerance of one output (see conformance.cases.tolerances)."""
        return self.tolerance or resolve(self.family, self.all_traits, self.output_qspecs[output],
                                         self.quantized)

    def describe(self) -> dict:
        """The declarative parameters, as they appear at the top of the golden."""
        return {
            "family": self.family,
            "model": repr(self.model()),
            "inputs": [{"kind": s.kind, "shape": list(s.shape)} for s in self.inputs],
            "input_qspecs": list(self.input_qspecs),
            "output_qspecs": list(self.output_qspecs),
            "options": {k: v for k, v in sorted(self.options.items())},
            "traits": sorted(self.all_traits),
            "internal_precision": self.internal_precision,
            "expected_delegation": "cpu" if self.stays_on_cpu else "delegated",
        }


def _grid(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    n, h, w, _ = shape

    def affine(theta: list[list[float]]) -> torch.Tensor:
        t = torch.tensor([theta], dtype=torch.float32).expand(n, 2, 3)
        return torch.nn.functional.affine_grid(t, [n, 1, h, w], align_corners=False)

    if name == "identity":
        return affine([[1, 0, 0], [0, 1, 0]])
    if name == "zoom":  # zoom in on the centre: coordinates within [-0.5, 0.5]
        return affine([[0.5, 0, 0.1], [0, 0.5, -0.1]])
    if name == "rotation":  # 30 degrees, scaled so the corners stay inside [-1, 1]
        c, s = 0.7 * math.cos(math.pi / 6), 0.7 * math.sin(math.pi / 6)
        return affine([[c, -s, 0], [s, c, 0]])
    if name == "random":
        return torch.rand(shape, generator=gen) * 2 - 1
    raise ValueError(f"unknown grid {name!r}")


def _make_input(spec: InputSpec, gen: torch.Generator) -> torch.Tensor:
    if spec.kind == "image":
        return torch.rand(spec.shape, generator=gen) * 2 - 1
    if spec.kind == "smooth":
        n, c, h, w = spec.shape
        coarse = torch.rand((n, c, 5, 5), generator=gen) * 2 - 1
        smooth = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)
        return smooth.clamp(-1, 1)
    if spec.kind == "image_clip":
        return torch.rand(spec.shape, generator=gen) * 2.5 - 1.25
    if spec.kind == "flow":
        return torch.rand(spec.shape, generator=gen) * 0.5 - 0.25
    if spec.kind.startswith("grid:"):
        return _grid(spec.kind.split(":", 1)[1], spec.shape, gen)
    raise ValueError(f"unknown input kind {spec.kind!r}")


def _factor_id(f: Fraction) -> str:
    if f == 1:
        return "same"
    if f.denominator == 1:
        return f"up{f.numerator}"
    if f.numerator == 1:
        return f"down{f.denominator}"
    return f"x{f.numerator}_{f.denominator}"


def _frac_id(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}_{f.denominator}"


def _factor_sizes(f: Fraction) -> tuple[int, int]:
    """Smallest k with input den*k >= 8 and output num*k >= 4: (k, den*k)."""
    k = 1
    while f.denominator * k < 8 or f.numerator * k < 4:
        k += 1
    return k, f.denominator * k


def _io_suffix(inputs: tuple[str, ...], outputs: tuple[str, ...]) -> str:
    if len(set(inputs + outputs)) == 1:
        return f"{inputs[0]}io"
    return f"in-{'-'.join(inputs)}.out-{'-'.join(outputs)}"


# ---------------------------------------------------------------------------
# Resize
# ---------------------------------------------------------------------------
RESIZE_MODES = {
    "bilinear-ac0": dict(mode="bilinear", align_corners=False),
    "bilinear-ac1": dict(mode="bilinear", align_corners=True),
    "nearest": dict(mode="nearest"),
}
F = Fraction
RESIZE_FACTORS = [
    F(8), F(4), F(2), F(3, 2), F(4, 3), F(1), F(3, 4), F(2, 3), F(1, 2),
    F(1, 3), F(1, 4), F(1, 8), F(1, 15), F(1, 16), F(1, 17), F(1, 32), F(1, 64),
]
#: (H factor, W factor): different per axis.
RESIZE_AXIS_FACTORS = [
    (F(2), F(1, 2)), (F(1, 2), F(1, 4)), (F(4), F(1, 16)), (F(1, 32), F(1, 2)), (F(3, 2), F(3, 4)),
]
#: (input HxW, output HxW) given as sizes, from odd input sizes.
RESIZE_SIZES = [
    ((37, 53), (16, 16)), ((37, 53), (64, 96)), ((17, 31), (8, 12)),
    ((53, 37), (5, 7)), ((31, 31), (1, 1)), ((64, 48), (3, 2)),
]
QUICK_RESIZE = {
    "resize-bilinear-ac0-up2-int8io", "resize-bilinear-ac0-down2-int8io",
    "resize-bilinear-ac0-down16-int8io", "resize-bilinear-ac0-down32-int8io",
    "resize-bilinear-ac1-x2_3-int8io", "resize-bilinear-ac1-down16-int8io",
    "resize-nearest-up4-int8io", "resize-nearest-down3-int8io",
    "resize-bilinear-ac0-size37x53-16x16-int8io", "resize-nearest-size53x37-5x7-int8io",
    "resize-bilinear-ac0-h2-w1_2-int8io",
}


def _is_split(model_kwargs: dict, in_hw, out_hw) -> bool:
    """Whether the resize split pass rewrites this resize (bilinear,
    align_corners=False, a downscale by 16 or more on an axis)."""
    if model_kwargs.get("mode") != "bilinear" or model_kwargs.get("align_corners"):
        return False
    return any(i >= 16 * o for i, o in zip(in_hw, out_hw))


def _cpu_reason(model_kwargs: dict, in_hw, out_hw) -> str | None:
    """Why the VGF partitioner keeps this resize on the CPU on the pinned
    ExecuTorch, or None. TOSA RESIZE needs scale_d < 16 * scale_n per axis; the
    split pass only rewrites bilinear with align_corners=False."""
    mode = model_kwargs.get("mode")
    if mode == "bilinear" and model_kwargs.get("align_corners"):
        if any(o == 1 or i - 1 >= 16 * (o - 1) for i, o in zip(in_hw, out_hw)):
            return ("bilinear align_corners=True with (in-1)/(out-1) >= 16 on an axis: the VGF "
                    "partitioner refuses it (no split for align_corners=True)")
    if mode == "nearest" and any(i >= 16 * o for i, o in zip(in_hw, out_hw)):
        return "nearest downscale by 16 or more on an axis: the VGF partitioner refuses it"
    return None


def resize_output_hw(model_kwargs: dict, in_hw) -> tuple[int, int]:
    """The output size PyTorch gives: the size, or floor(in * scale) per axis."""
    if model_kwargs.get("size") is not None:
        return tuple(model_kwargs["size"])
    scale = model_kwargs["scale_factor"]
    scales = scale if isinstance(scale, tuple) else (scale, scale)
    return tuple(int(math.floor(i * s)) for i, s in zip(in_hw, scales))


def _resize_case(name: str, model_kwargs: dict, shape, io=("int8", "int8"), out_hw=None,
                 kind="smooth", traits=(), **extra) -> Case:
    out_hw = resize_output_hw(model_kwargs, shape[2:])
    case_id = f"resize-{name}-{_io_suffix((io[0],), (io[1],))}"
    if kind == "image_clip":
        case_id = f"resize-{name}-clip-{_io_suffix((io[0],), (io[1],))}"
        traits = (*traits, "clipped-inputs")
    if _is_split(model_kwargs, shape[2:], out_hw):
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
        quick=case_id in QUICK_RESIZE or extra.pop("quick", False),
        traits=frozenset(traits),
        stays_on_cpu=_cpu_reason(model_kwargs, shape[2:], out_hw),
        **extra,
    )


def _resize_cases() -> list[Case]:
    cases = []
    for mode_name, mode in RESIZE_MODES.items():
        for f in RESIZE_FACTORS:
            k, size_in = _factor_sizes(f)
            shape = (1, 4, size_in, size_in + f.denominator)
            out_hw = (f.numerator * k, f.numerator * (k + 1))
            cases.append(
                _resize_case(f"{mode_name}-{_factor_id(f)}", dict(mode, scale_factor=float(f)),
                             shape, out_hw=out_hw)
            )
        for fh, fw in RESIZE_AXIS_FACTORS:
            kh, h = _factor_sizes(fh)
            kw, w = _factor_sizes(fw)
            name = f"{mode_name}-h{_frac_id(fh)}-w{_frac_id(fw)}"
            cases.append(
                _resize_case(name, dict(mode, scale_factor=(float(fh), float(fw))), (1, 4, h, w),
                             out_hw=(fh.numerator * kh, fw.numerator * kw))
            )
        for (hi, wi), (ho, wo) in RESIZE_SIZES:
            cases.append(
                _resize_case(
                    f"{mode_name}-size{hi}x{wi}-{ho}x{wo}", dict(mode, size=(ho, wo)), (1, 4, hi, wi),
                    out_hw=(ho, wo),
                )
            )
    return cases


#: Input sizes and scale factors whose output floor(in * s) is not an exact
#: multiple of the input: PyTorch samples with the given factor, unless
#: recompute_scale_factor=True (then with out/in, as a size does).
RESIZE_NONEXACT = [((7, 7), F(3, 2)), ((9, 13), F(3, 2)), ((20, 17), F(3, 10)), ((10, 13), F(7, 10)),
                   ((5, 7), F(5, 2)), ((10, 11), F(1, 3))]

#: ExecuTorch 1.5.1 lowers bilinear (align_corners=False) with the output/input
#: size ratio even when a scale factor is given; PyTorch samples with the factor.
#: The bilinear-scale-factor workaround corrects it; the "-upstream" cases show
#: what ExecuTorch does without it.
BILINEAR_SCALE_FACTOR_IGNORED = (
    "without the bilinear-scale-factor workaround: bilinear align_corners=False with a scale "
    "factor whose output floor(in * s) is not an exact multiple: the lowering samples with the "
    "out/in size ratio, PyTorch (recompute_scale_factor False/None) with the given factor, so "
    "pixels are sampled elsewhere (24 to 194 LSB; with recompute_scale_factor=True or a size, "
    "the same shapes agree). Nearest honours the factor (pytorch/executorch#22437); bilinear "
    "does not. See docs/divergences.md")


def _nonexact_resize_cases() -> list[Case]:
    cases = []
    for (h, w), f in RESIZE_NONEXACT:
        shape = (1, 4, h, w)
        noise = dict(kind="image")  # uniform noise: a pixel sampled elsewhere shows fully
        out = resize_output_hw(dict(scale_factor=float(f)), (h, w))
        for mode_name, mode in RESIZE_MODES.items():
            name = f"{mode_name}-in{h}x{w}-s{_frac_id(f)}"
            cases.append(_resize_case(name, dict(mode, scale_factor=float(f)), shape,
                                      quick=mode_name == "bilinear-ac0" and (h, w) == (10, 11), **noise))
            if mode_name == "bilinear-ac0":  # and as ExecuTorch lowers it without the workaround
                cases.append(_resize_case(
                    f"{name}-upstream", dict(mode, scale_factor=float(f)), shape,
                    options=dict(disable_workarounds=("bilinear-scale-factor",)),
                    expect=Expectation("run", r"max error \d+\.\d+ LSB >", BILINEAR_SCALE_FACTOR_IGNORED,
                                       checks=COMPARISONS),
                    quick=(h, w) == (10, 11), **noise))
            if mode_name == "bilinear-ac0":
                cases.append(_resize_case(f"{name}-rsf", dict(mode, scale_factor=float(f),
                                                              recompute_scale_factor=True), shape, **noise))
                cases.append(_resize_case(f"{mode_name}-size{h}x{w}-{out[0]}x{out[1]}", dict(mode, size=out),
                                          shape, quick=(h, w) == (10, 11), **noise))
    return cases


# ---------------------------------------------------------------------------
# grid_sample
# ---------------------------------------------------------------------------
GRID_IMAGE = (12, 16)  # H, W of the sampled image (non-square on purpose)
#: H, W of the grid and the output. Identity and zoom grids have the image's
#: size: at (6, 10) their coordinates land on texel ties (x.5), where nearest
#: sampling of a quantized grid picks either neighbour.
GRID_OUT = {"identity": GRID_IMAGE, "zoom": GRID_IMAGE, "rotation": (6, 10), "random": (6, 10)}
GRIDS = ("identity", "zoom", "rotation", "random")
QUICK_GRID = {
    "grid-rgba-bilinear-zeros-ac0-identity-int8io",
    "grid-rgba-bilinear-zeros-ac0-random-int8io",
    "grid-rgb-bilinear-border-ac0-rotation-int8io",
    "grid-rgb-nearest-reflection-ac1-zoom-int8io",
    "grid-rgba-nearest-zeros-ac1-random-int8io",
    "grid-rgba-bilinear-zeros-ac0-random-int8grid-int8io",
    "grid-rgb-bilinear-zeros-ac0-rotation-floatout",
}


def _grid_case(channels: int, mode: str, padding: str, ac: bool, grid: str, *,
               tag: str = "", io=None, options=None, image_kind="image") -> Case:
    color = {3: "rgb", 4: "rgba"}[channels]
    io = io or (("int8", "int16"), ("int8",))
    base = f"grid-{color}-{mode}-{padding}-ac{int(ac)}-{grid}{tag}"
    if io == (("int8", "int16"), ("int8",)):
        case_id = f"{base}-int8io"
    else:
        case_id = f"{base}-{_io_suffix(*io)}"
    if options and options.get("enable_pt2e_quantization") is False:
        case_id = f"{base}-fp"
    if tag == "-floatout":
        case_id = base
    traits = set()
    if (options or {}).get("grid_sampler_grid_input_qspec") == "int8":
        traits.add("int8-grid-nearest" if mode == "nearest" else "int8-grid")
    if image_kind == "image_clip":
        traits.add("clipped-inputs")
    return Case(
        id=case_id,
        family="grid_sample",
        model=lambda: models.GridSample(mode, padding, ac),
        inputs=(
            InputSpec(image_kind, (1, channels, *GRID_IMAGE)),
            InputSpec(f"grid:{grid}", (1, *GRID_OUT[grid], 2)),
        ),
        input_qspecs=io[0],
        output_qspecs=io[1],
        options=dict(options or {}),
        quick=case_id in QUICK_GRID,
        traits=frozenset(traits),
    )


def _grid_sample_cases() -> list[Case]:
    cases = [
        _grid_case(c, mode, padding, ac, grid)
        for c in (3, 4)
        for mode in ("bilinear", "nearest")
        for padding in ("zeros", "border", "reflection")
        for ac in (False, True)
        for grid in GRIDS
    ]
    # An int8 (SNORM8) grid instead of the default int16.
    for c in (3, 4):
        for mode in ("bilinear", "nearest"):
            for grid in ("identity", "rotation", "random"):
                cases.append(
                    _grid_case(
                        c, mode, "zeros", False, grid, tag="-int8grid",
                        io=(("int8", "int8"), ("int8",)),
                        options=dict(grid_sampler_grid_input_qspec="int8"),
                    )
                )
    # The sampler's output left in float (quantize_grid_sample_output=False).
    for c in (3, 4):
        for mode in ("bilinear", "nearest"):
            for grid in ("rotation", "random"):
                cases.append(
                    _grid_case(
                        c, mode, "zeros", False, grid, tag="-floatout",
                        io=(("int8", "int16"), ("float",)),
                        options=dict(quantize_grid_sample_output=False),
                    )
                )
    return cases


# ---------------------------------------------------------------------------
# IO variants
# ---------------------------------------------------------------------------
def _io_cases() -> list[Case]:
    cases = []
    for f in (F(2), F(1, 2), F(1, 16), F(1, 32)):
        k, size_in = _factor_sizes(f)
        shape = (1, 4, size_in, size_in + f.denominator)
        out_hw = (f.numerator * k, f.numerator * (k + 1))
        for mode_name in ("bilinear-ac0", "nearest"):
            if mode_name == "nearest" and f in (F(1, 16), F(1, 32)):
                continue
            kwargs = dict(RESIZE_MODES[mode_name], scale_factor=float(f))
            name = f"{mode_name}-{_factor_id(f)}"
            cases += [
                _resize_case(name, kwargs, shape, io=("int16", "int16"), out_hw=out_hw,
                             quick=f == F(2)),
                _resize_case(name, kwargs, shape, io=("float", "float"), out_hw=out_hw),
                _resize_case(name, kwargs, shape, io=("int8", "float"), out_hw=out_hw),
                _resize_case(name, kwargs, shape, options=dict(enable_pt2e_quantization=False),
                             out_hw=out_hw, quick=f == F(1, 2)),
            ]
    # Inputs beyond the SNORM range: the int8 boundary clips them.
    for f in (F(2), F(1, 2)):
        k, size_in = _factor_sizes(f)
        cases.append(
            _resize_case(
                f"bilinear-ac0-{_factor_id(f)}",
                dict(RESIZE_MODES["bilinear-ac0"], scale_factor=float(f)),
                (1, 4, size_in, size_in + f.denominator),
                kind="image_clip",
                quick=f == F(2),
            )
        )
    # grid_sample with other IO: float image, float grid, int8 everything, PT2E off.
    for c in (3, 4):
        cases += [
            _grid_case(c, "bilinear", "zeros", False, "rotation", io=(("float", "int16"), ("int8",))),
            _grid_case(c, "bilinear", "zeros", False, "rotation", io=(("int8", "float"), ("int8",))),
            _grid_case(c, "bilinear", "zeros", False, "rotation", io=(("float", "float"), ("float",))),
            _grid_case(c, "bilinear", "border", False, "random", io=(("int16", "int16"), ("int16",))),
            _grid_case(c, "bilinear", "zeros", False, "rotation",
                       options=dict(enable_pt2e_quantization=False)),
            _grid_case(c, "bilinear", "zeros", False, "random", tag="-clip", image_kind="image_clip"),
        ]
    return cases


# ---------------------------------------------------------------------------
# Composites
# ---------------------------------------------------------------------------
def _composite(case_id: str, model: Callable[[], nn.Module], inputs, io, *, quick=False,
               options=None, traits=("chain",)) -> Case:
    return Case(
        id=case_id,
        family="composite",
        model=model,
        inputs=tuple(inputs),
        input_qspecs=io[0],
        output_qspecs=io[1],
        options=dict(options or {}),
        quick=quick,
        traits=frozenset(traits),
    )


def _composite_cases() -> list[Case]:
    img = lambda h, w, c=4: InputSpec("smooth", (1, c, h, w))  # noqa: E731
    int8 = (("int8",), ("int8",))
    return [
        _composite("conv-resize-conv-up2-int8io", lambda: models.ConvResizeConv(4, 2.0), [img(8, 12)], int8, quick=True),
        _composite("conv-resize-conv-down2-int8io", lambda: models.ConvResizeConv(4, 0.5), [img(16, 24)], int8),
        _composite("conv-resize-conv-down32-int8io", lambda: models.ConvResizeConv(4, 1 / 32), [img(128, 64)], int8,
                   traits=("chain", "split-resize")),
        _composite("conv-resize-conv-up2-floatio", lambda: models.ConvResizeConv(4, 2.0), [img(8, 12)], (("float",), ("float",))),
        _composite("conv-resize-conv-up2-fp", lambda: models.ConvResizeConv(4, 2.0), [img(8, 12)], (("float",), ("float",)),
                   options=dict(enable_pt2e_quantization=False)),
        _composite("conv-relu-int8io", lambda: models.ConvRelu(4), [img(8, 12)], int8, quick=True),
        _composite("chain-down2-up2-int8io", lambda: models.ChainedResize((0.5, 2.0)), [img(16, 24)], int8),
        _composite("chain-down4-up4-int8io", lambda: models.ChainedResize((0.25, 4.0)), [img(16, 24)], int8),
        _composite("chain-down32-up2-int8io", lambda: models.ChainedResize((1 / 32, 2.0)), [img(128, 64)], int8,
                   quick=True, traits=("chain", "split-resize")),
        _composite("chain-up2-down2-up2-int8io", lambda: models.ChainedResize((2.0, 0.5, 2.0)), [img(8, 12)], int8),
        _composite("flow-warp-rgba-border-int8io", lambda: models.FlowWarp("bilinear", "border"),
                   [img(12, 16), InputSpec("flow", (1, 2, 3, 4))], (("int8", "float"), ("int8",)), quick=True),
        _composite("flow-warp-rgb-border-int8io", lambda: models.FlowWarp("bilinear", "border"),
                   [img(12, 16, 3), InputSpec("flow", (1, 2, 3, 4))], (("int8", "float"), ("int8",))),
        _composite("flow-warp-rgba-zeros-nearest-int8io", lambda: models.FlowWarp("nearest", "zeros"),
                   [img(12, 16), InputSpec("flow", (1, 2, 3, 4))], (("int8", "float"), ("int8",)),
                   traits=("chain", "computed-grid-nearest")),
        _composite("flow-warp-rgba-border-int16flow", lambda: models.FlowWarp("bilinear", "border"),
                   [img(12, 16), InputSpec("flow", (1, 2, 3, 4))], (("int8", "int16"), ("int8",))),
        _composite("two-in-two-out-int8io", models.TwoInTwoOut, [img(8, 12), img(8, 12)],
                   (("int8", "int8"), ("int8", "int8")), quick=True),
        _composite("two-in-two-out-mixed", models.TwoInTwoOut, [img(8, 12), img(8, 12)],
                   (("int8", "float"), ("int16", "int8"))),
        _composite("two-in-two-out-floatio", models.TwoInTwoOut, [img(8, 12), img(8, 12)],
                   (("float", "float"), ("float", "float"))),
        _composite("two-in-two-out-fp", models.TwoInTwoOut, [img(8, 12), img(8, 12)],
                   (("float", "float"), ("float", "float")), options=dict(enable_pt2e_quantization=False)),
    ]


# ---------------------------------------------------------------------------
# Known failures on the pinned ExecuTorch (strict xfails)
# ---------------------------------------------------------------------------
_ONE_BY_ONE_PTE = (
    "the program stays on the CPU; to_executorch() labels the upsample's 31x31 input NHWC (the "
    "channels-last marks of the reference export script) and its 1x1 output NCHW (a 1x1 image "
    "has the same strides either way), and the portable upsample kernel refuses tensors of "
    "different dim orders (InvalidArgument): the shipped program.pte does not run")

EXPECTED_FAILURES: dict[str, Expectation] = {
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
        checks=("vs_float_dq",)),
}


def _build() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for case in (_resize_cases() + _nonexact_resize_cases() + _grid_sample_cases() + _io_cases()
                 + _composite_cases()):
        if case.id in cases:
            raise ValueError(f"duplicate case id {case.id!r}")
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", case.id):
            raise ValueError(f"case id {case.id!r} must be lowercase letters, digits, '-', '_', '.'")
        if len(case.input_qspecs) != len(case.inputs):
            raise ValueError(f"{case.id}: one input qspec per input")
        if case.id in EXPECTED_FAILURES:
            case = dataclasses.replace(case, expect=EXPECTED_FAILURES[case.id])
        cases[case.id] = case
    unknown = set(EXPECTED_FAILURES) - set(cases)
    if unknown:
        raise ValueError(f"EXPECTED_FAILURES names unknown cases: {sorted(unknown)}")
    return cases


CASES: dict[str, Case] = _build()
