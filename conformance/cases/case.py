"""What a case is: :class:`Case`, its seeded inputs, its expected failure.

A :class:`Case` names a model factory, seeded example inputs
(:class:`InputSpec`), IO qspecs by name (:data:`QSPECS`), ``export_model``
options, the expected outcome (:class:`Expectation`: which stage is known to
fail, and how), tolerance traits and its expected delegation. Ids are
readable and stable, e.g. ``resize-bilinear-ac0-down16-int8io`` (lowercase
letters, digits, ``-``, ``_``, ``.``; :data:`ID_PATTERN`); they name the
golden files, and the inputs are seeded from them.

Cases are declared by op families (:mod:`conformance.cases.families`); the
tolerance of each output is resolved from the family's default and the
case's traits (:mod:`conformance.cases.tolerances`).
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

from conformance.oracles.references import ORACLES
from vgf_export import names, snorm_qspec

#: IO qspec names used in cases: SNORM8, SNORM16, or float (None).
QSPECS = {"int8": lambda: snorm_qspec(8), "int16": lambda: snorm_qspec(16), "float": lambda: None}



def _a16w8():
    from executorch.backends.arm.quantizer import get_symmetric_a16w8_quantization_config

    # epsilon is the observers' minimum scale: its default 2**-12 would hold [-1, 1]
    # activations at 8 SNORM16 steps; 2**-16 lets them reach 1/32767.
    return get_symmetric_a16w8_quantization_config(epsilon=2.0 ** -16)


#: Whole-model quantization configs a case can name (``options["quant_config"]``),
#: and the precision its activations compute at. Without one the model is int8
#: inside (the reference export script's config).
QUANT_CONFIGS = {"a16w8": (_a16w8, "int16")}

#: The stages of a case, in order: the export flow's, then "run" (the
#: lowered program executed by the oracles).
STAGES = (*names.STAGES, "run")

#: What a case id may look like.
ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]*")

#: The suite's tests that need the export only (not a run of the program).
EXPORT_ONLY_TESTS = ("test_export", "test_delegation", "test_golden")


def run_checks() -> dict[str, str]:
    """The checks of a run an Expectation can name, and the test of each:
    each oracle's comparison, the shipped program on ExecuTorch's runtime, and
    the program on Vulkan."""
    return {**{o.name: o.test_name for o in ORACLES.values()}, "pte": "test_pte", "vulkan": "test_vulkan"}


@dataclasses.dataclass(frozen=True)
class Expectation:
    """A known failure on the pinned version, recorded as a strict xfail.

    A stage failure names the stage and a regular expression its error
    matches; every test of the case expects it. A numerics divergence names
    the comparisons (oracle names, stage ``run``) and a regular expression of
    their failure message: only those comparisons' tests expect it, and the
    run fails (XPASS) once the divergence is gone.
    """

    stage: str
    match: str
    reason: str
    checks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"Expectation.stage must be one of {STAGES}, got {self.stage!r}")
        if self.checks and (self.stage != "run" or set(self.checks) - set(run_checks())):
            raise ValueError(f"Expectation.checks must be among {tuple(run_checks())} with stage 'run', "
                             f"got {self.checks!r} at stage {self.stage!r}")
        re.compile(self.match)

    def applies_to(self, test_name: str) -> bool:
        """Whether the test named ``test_name`` of the case is expected to fail:
        a comparison's test for a numerics divergence; for a failure at stage
        ``run``, the tests that run the program; else every test."""
        if self.checks:
            return test_name in {run_checks()[c] for c in self.checks}
        return self.stage != "run" or test_name not in EXPORT_ONLY_TESTS


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One seeded example input.

    kind: "image" (uniform noise in [-1, 1]), "smooth" (a smooth random
    image in [-1, 1]: 5x5 random control points upsampled, so that resizes which sample
    other pixels than the direct resize, such as the split of large
    downscales, stay comparable to float), "image_clip" (uniform in
    [-1.25, 1.25]: beyond the SNORM range, so the int8 boundary clips),
    "grid:<name>" (a sampling grid, see :data:`GRIDS`), "flow" (a small flow
    field in [-0.25, 0.25]).
    """

    kind: str
    shape: tuple[int, ...]

    def make(self, gen: torch.Generator) -> torch.Tensor:
        if self.kind.startswith("grid:"):
            return _grid(self.kind.split(":", 1)[1], self.shape, gen)
        if self.kind not in _INPUT_KINDS:
            raise ValueError(f"InputSpec.kind must be one of {sorted(_INPUT_KINDS)} or "
                             f"'grid:<{'|'.join(GRIDS)}>', got {self.kind!r}")
        return _INPUT_KINDS[self.kind](self.shape, gen)


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    family: str  # the name of its op family (conformance.cases.families)
    model: Callable[[], nn.Module]
    inputs: tuple[InputSpec, ...]
    input_qspecs: tuple[str, ...]  # names in QSPECS, one per input
    output_qspecs: tuple[str, ...]  # names in QSPECS, one per output
    options: dict = dataclasses.field(default_factory=dict)  # export_model options
    expect: Expectation | None = None
    quick: bool = False  # in the pull-request tier (set from its family's quick set)
    #: Properties that loosen tolerances (see conformance.cases.tolerances.TRAITS).
    traits: frozenset[str] = frozenset()
    #: None: the case is expected to be delegated (nothing but Q/DQ on the CPU);
    #: else why every op is expected to stay on the CPU.
    stays_on_cpu: str | None = None
    #: A partial delegation: the compute ops (export report names, e.g.
    #: "aten.index.Tensor") expected on the CPU beside the delegates, exactly;
    #: ``cpu_ops_reason`` says why.
    cpu_ops: tuple[str, ...] = ()
    cpu_ops_reason: str | None = None

    def __post_init__(self) -> None:
        if bool(self.cpu_ops) != bool(self.cpu_ops_reason) or (self.cpu_ops and self.stays_on_cpu):
            raise ValueError(f"{self.id}: cpu_ops needs cpu_ops_reason (and neither goes with stays_on_cpu)")
        if not ID_PATTERN.fullmatch(self.id):
            raise ValueError(f"case id {self.id!r} must be lowercase letters, digits, '-', '_', '.'")
        if len(self.input_qspecs) != len(self.inputs):
            raise ValueError(f"{self.id}: one input qspec per input, got {len(self.input_qspecs)} "
                             f"for {len(self.inputs)} inputs")
        if self.options.get("quant_config", "a16w8") not in QUANT_CONFIGS:
            raise ValueError(f"{self.id}: options['quant_config'] must be one of {sorted(QUANT_CONFIGS)}, "
                             f"got {self.options['quant_config']!r}")
        unknown = set(self.input_qspecs + self.output_qspecs) - set(QSPECS)
        if unknown:
            raise ValueError(f"{self.id}: qspecs must be among {sorted(QSPECS)}, got {sorted(unknown)}")

    @property
    def quantized(self) -> bool:
        return self.options.get("enable_pt2e_quantization", True)

    def make_inputs(self) -> tuple[torch.Tensor, ...]:
        gen = torch.Generator().manual_seed(zlib.crc32(self.id.encode()))
        return tuple(spec.make(gen) for spec in self.inputs)

    def export_kwargs(self) -> dict:
        kwargs = dict(self.options)
        if self.quantized:
            kwargs["quantized_input_qspecs"] = [QSPECS[q]() for q in self.input_qspecs]
            kwargs["quantized_output_qspecs"] = [QSPECS[q]() for q in self.output_qspecs]
        if "quant_config" in kwargs:  # "" names the whole model
            make, _ = QUANT_CONFIGS[kwargs.pop("quant_config")]
            kwargs["module_name_quant_configs"] = {"": make()}
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
        if (self.internal_precision == "int8"
                and "int16" in self.input_qspecs + self.output_qspecs):
            traits.add("int8-internal")
        return frozenset(traits)

    @property
    def internal_precision(self) -> str:
        """The precision the lowered program's activations compute at (what int16 IO carries)."""
        if not self.quantized:
            return "float32"
        config = self.options.get("quant_config")
        return QUANT_CONFIGS[config][1] if config else "int8"

    def get_tolerance(self, output: int = 0):
        """The tolerance of one output (see conformance.cases.tolerances)."""
        from conformance.cases.tolerances import tolerance_of

        return tolerance_of(self, output)

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
            "expected_delegation": "cpu" if self.stays_on_cpu else "partial" if self.cpu_ops else "delegated",
        }


# ---------------------------------------------------------------------------
# Input generators
# ---------------------------------------------------------------------------
def _affine(theta: list[list[float]]):
    def make(n: int, h: int, w: int) -> torch.Tensor:
        t = torch.tensor([theta], dtype=torch.float32).expand(n, 2, 3)
        return torch.nn.functional.affine_grid(t, [n, 1, h, w], align_corners=False)
    return make


_C, _S = 0.7 * math.cos(math.pi / 6), 0.7 * math.sin(math.pi / 6)
#: Sampling grids by name: identity; zoom (on the centre: coordinates within
#: [-0.5, 0.5]); rotation (30 degrees, scaled so the corners stay inside
#: [-1, 1]); random (uniform in [-1, 1]).
GRIDS: dict[str, Callable] = {
    "identity": _affine([[1, 0, 0], [0, 1, 0]]),
    "zoom": _affine([[0.5, 0, 0.1], [0, 0.5, -0.1]]),
    "rotation": _affine([[_C, -_S, 0], [_S, _C, 0]]),
    "random": None,  # seeded: drawn from the case's generator
}


def _grid(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; known: {sorted(GRIDS)}")
    if name == "random":
        return torch.rand(shape, generator=gen) * 2 - 1
    n, h, w, _ = shape
    return GRIDS[name](n, h, w)


def _smooth(shape, gen: torch.Generator) -> torch.Tensor:
    n, c, h, w = shape
    coarse = torch.rand((n, c, 5, 5), generator=gen) * 2 - 1
    smooth = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)
    return smooth.clamp(-1, 1)


_INPUT_KINDS: dict[str, Callable] = {
    "image": lambda shape, gen: torch.rand(shape, generator=gen) * 2 - 1,
    "smooth": _smooth,
    "image_clip": lambda shape, gen: torch.rand(shape, generator=gen) * 2.5 - 1.25,
    "flow": lambda shape, gen: torch.rand(shape, generator=gen) * 0.5 - 0.25,
}


# ---------------------------------------------------------------------------
# Id grammar
# ---------------------------------------------------------------------------
def factor_id(f: Fraction) -> str:
    """``up2``, ``down16``, ``x3_2``, ``same``: a scale factor in an id."""
    if f == 1:
        return "same"
    if f.denominator == 1:
        return f"up{f.numerator}"
    if f.numerator == 1:
        return f"down{f.denominator}"
    return f"x{f.numerator}_{f.denominator}"


def frac_id(f: Fraction) -> str:
    """``2``, ``1_2``: a fraction in an id."""
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}_{f.denominator}"


def io_suffix(inputs: tuple[str, ...], outputs: tuple[str, ...]) -> str:
    """``int8io`` when every IO has one qspec, else ``in-int8-float.out-int8``."""
    if len(set(inputs + outputs)) == 1:
        return f"{inputs[0]}io"
    return f"in-{'-'.join(inputs)}.out-{'-'.join(outputs)}"
