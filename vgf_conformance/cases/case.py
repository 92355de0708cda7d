"""What a case is: :class:`Case` and its expected failure (its inputs:
:mod:`vgf_conformance.cases.inputs`).

A :class:`Case` names a model factory, example inputs (:class:`InputSpec`:
seeded generators, or sample tensors from ``.npy``/``.pt`` files), IO qspecs
by name (:data:`QSPECS`), ``export_model`` options (:data:`EXPORT_OPTIONS`),
the expected outcome (:class:`Expectation`: which stage is known to fail, and
how), tolerance traits and its expected delegation. Ids are readable and
stable, e.g. ``resize-bilinear-ac0-down16-int8io`` (lowercase letters,
digits, ``-``, ``_``, ``.``; :data:`ID_PATTERN`); they name the golden files,
and the generated inputs are seeded from them. ``docs/case-api.md`` is the
user's guide to this API (the same ``Case`` for built-in families and a
team's case file).

Cases are declared by op families (:mod:`vgf_conformance.cases.families`); the
tolerance of each output is resolved from the family's default and the
case's traits (:mod:`vgf_conformance.cases.tolerances`).
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from fractions import Fraction
from typing import Callable

import torch
from torch import nn

from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.oracles.references import ORACLES
from vgf_conformance.text import CASE_ID_PATTERN, DEFAULT_FLOW
from vgf_export import names, snorm_qspec

#: IO qspec names used in cases: SNORM8, SNORM16, or float (None).
QSPECS = {"int8": lambda: snorm_qspec(8), "int16": lambda: snorm_qspec(16), "float": lambda: None}



def _a16w8():
    from executorch.backends.arm.quantizer import get_symmetric_a16w8_quantization_config

    # epsilon is the observers' minimum scale: its default 2**-12 would hold [-1, 1]
    # activations at 8 SNORM16 steps; 2**-16 lets them reach 1/32767.
    return get_symmetric_a16w8_quantization_config(epsilon=2.0 ** -16)


#: Quantization configs a case can name (``options["quant_config"]`` for the
#: whole model, or values of ``options["module_name_quant_configs"]``), and the
#: precision its activations compute at. Without one the model is int8 inside
#: (the reference export script's config).
QUANT_CONFIGS = {"a16w8": (_a16w8, "int16")}

#: ``export_model`` options a case may set in ``Case.options`` (by name, so
#: that the golden states them), and what each takes. Every keyword of
#: :func:`vgf_export.export_model` (the reference export script's, and its
#: own) is here or set elsewhere: the IO qspecs by ``Case.input_qspecs`` and
#: ``Case.output_qspecs``, the artifact directories by the harness.
EXPORT_OPTIONS = {
    "quant_config": "a QUANT_CONFIGS name: that config for the whole model "
                    "(module_name_quant_configs={'': config})",
    "module_name_quant_configs": "{submodule name ('' = the whole model): a QUANT_CONFIGS name, or None "
                                 "to leave that submodule unquantized}",
    "grid_sampler_grid_input_qspec": "a QSPECS name: the qspec of every grid_sample grid (default int16, SNORM16)",
    "quantize_grid_sample_output": "bool: quantize grid_sample outputs as SNORM8 (default True)",
    "enable_pt2e_quantization": "bool: False exports the float model (default True)",
    "disable_workarounds": "names of vgf_export workarounds to turn off (vgf_export/workarounds.toml)",
    "grid_sampler_lowering": "how grid_sample is lowered (vgf_export.export.GRID_SAMPLER_LOWERINGS): "
                             "'project' (default, the reference script's GridSamplerBackend) or 'upstream'",
}
#: ``export_model`` keywords a case does not set in ``options``, and who does.
EXPORT_KEYWORDS_SET_ELSEWHERE = {
    "quantized_input_qspecs": "Case.input_qspecs",
    "quantized_output_qspecs": "Case.output_qspecs",
    "artifacts_root": "the harness (--vgf-artifacts)",
    "intermediate_artifacts_root": "the harness (under artifacts_root)",
    "overwrite_artifacts": "the harness (never)",
}

#: The stages of a case, in order: the export flow's, then "run" (the
#: lowered program executed by the oracles).
STAGES = (*names.STAGES, "run")

#: What a case id may look like (defined in vgf_conformance.text: the golden
#: store checks file names against it without importing the table).
ID_PATTERN = CASE_ID_PATTERN

#: The suite's tests that need the export only (not a run of the program).
EXPORT_ONLY_TESTS = ("test_export", "test_delegation", "test_golden")


def run_checks() -> dict[str, str]:
    """The checks of a run an Expectation can name, and the test of each:
    each oracle's comparison, the shipped program on ExecuTorch's runtime, and
    the program on Vulkan."""
    return {**{o.name: o.test_name for o in ORACLES.values()}, "pte": "test_pte", "vulkan": "test_vulkan"}


#: A failure no expectation may match: a pattern that does is a catch-all.
_UNRELATED_FAILURE = "\x00an unrelated failure 0\x00"


def measured_lsb(low: float, high: float | None = None) -> tuple[float, float]:
    """The range an expected divergence measured at ``low`` to ``high`` LSB
    (over its comparisons) may take: from 0.8x the smallest to 1.25x the
    largest, so doubling or halving it is a failure."""
    high = low if high is None else high
    return (round(low * 0.8, 2), round(high * 1.25, 2))


@dataclasses.dataclass(frozen=True)
class Expectation:
    """A known failure on the pinned version, recorded as a strict xfail.

    A stage failure names the stage and a regular expression its error
    matches; every test of the case expects it. A numerics divergence names
    the comparisons (oracle names, stage ``run``) and a regular expression of
    their failure message, and its measured size (``lsb``): only those
    comparisons' tests expect it, each failure must be excused on its own
    (:meth:`excuses`), and the run fails (XPASS) once the divergence is gone.
    """

    stage: str
    match: str
    reason: str
    checks: tuple[str, ...] = ()
    #: A numerics divergence's measured size: every ``max error X LSB`` the
    #: failures name must lie in ``[low, high]`` (:func:`measured_lsb`), so a
    #: divergence that grows or shrinks past it is news, not "expected".
    lsb: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"Expectation.stage must be one of {STAGES}, got {self.stage!r}")
        if self.checks and (self.stage != "run" or set(self.checks) - set(run_checks())):
            raise ValueError(f"Expectation.checks must be among {tuple(run_checks())} with stage 'run', "
                             f"got {self.checks!r} at stage {self.stage!r}")
        re.compile(self.match)
        if re.search(self.match, "") or re.search(self.match, _UNRELATED_FAILURE):
            raise ValueError(f"Expectation.match must name the failure it expects: /{self.match}/ matches "
                             "the empty text or an unrelated failure, so it would excuse any failure")
        if self.lsb is not None and not (0 <= self.lsb[0] <= self.lsb[1]):
            raise ValueError(f"Expectation.lsb must be a range (low, high) with 0 <= low <= high, got {self.lsb!r}")
        if self.lsb is None and "max error" in self.match:
            raise ValueError(f"Expectation /{self.match}/ excuses a numerics divergence: pin its measured "
                             "size (lsb=measured_lsb(low, high)), else any size of it stays 'expected'")
        if self.lsb is not None and "max error" not in self.match:
            raise ValueError("Expectation.lsb pins the size of a numerics divergence: its match must name "
                             f"the 'max error' it excuses, got /{self.match}/")

    def excuses(self, failure: str) -> str | None:
        """Why this expectation does not excuse ``failure`` (one failure of one
        check), or None when it does: its text must match, and every max error
        it names must lie in :attr:`lsb`."""
        if not re.search(self.match, failure):
            return f"does not match /{self.match}/"
        if self.lsb is not None:
            for size in re.findall(r"max error (\d+(?:\.\d+)?) LSB", failure):
                if not self.lsb[0] <= float(size) <= self.lsb[1]:
                    return (f"max error {size} LSB is outside the divergence's measured range "
                            f"[{self.lsb[0]:g}, {self.lsb[1]:g}] LSB")
        return None

    def applies_to(self, test_name: str) -> bool:
        """Whether the test named ``test_name`` of the case is expected to fail:
        a comparison's test for a numerics divergence; for a failure at stage
        ``run``, the tests that run the program; else every test."""
        if self.checks:
            return test_name in {run_checks()[c] for c in self.checks}
        return self.stage != "run" or test_name not in EXPORT_ONLY_TESTS


@dataclasses.dataclass(frozen=True)
class Case:
    """One model exported and checked through every tier: the case API.

    The same class for the built-in families and a team's case file
    (``--vgf-cases``; ``docs/case-api.md`` is the guide). Fields:

    * ``id``: readable and stable (:data:`ID_PATTERN`); names the golden
      ``<id>.json`` and seeds the generated inputs.
    * ``family``: the name of its :class:`~vgf_conformance.cases.family.Family`
      (which gives the default tolerance, the quick tier, known failures).
    * ``model``: a factory, called with no arguments, returning the
      ``nn.Module``; called more than once per run (export, oracles), so it
      must return the same model each time (seed its weights, or load them).
      Its ``repr`` goes into the golden (``extra_repr`` states parameters).
    * ``inputs``: one :class:`InputSpec` per model input: a seeded generator,
      or a sample tensor from a ``.npy``/``.pt`` file (:meth:`InputSpec.file`).
    * ``input_qspecs``, ``output_qspecs``: IO qspecs by name (:data:`QSPECS`:
      "int8" = SNORM8, "int16" = SNORM16, "float" = left float), one per
      input and output (``quantized_input_qspecs`` and
      ``quantized_output_qspecs`` of ``export_model``).
    * ``options``: the other ``export_model`` options, by name
      (:data:`EXPORT_OPTIONS`: whole-model or per-submodule quant configs,
      the grid qspec, float grid_sample outputs, PT2E off, workarounds off);
      unknown keys are refused.
    * ``expect``: a known failure (:class:`Expectation`), a strict xfail.
    * ``traits``: named properties that loosen its family's tolerance
      (:data:`vgf_conformance.cases.tolerances.TRAITS`, each with its reason).
    * ``stays_on_cpu`` / ``cpu_ops`` + ``cpu_ops_reason``: the expected
      delegation (default: fully delegated, nothing but Q/DQ on the CPU).
    * ``quick``: set from its family's quick set (the pull-request tier).
    * ``flow``: the way it is lowered (:mod:`vgf_conformance.cases.flows`);
      a run of another flow than the default is keyed ``<flow>/<case id>``
      (its ``id``) and draws the inputs of the case (:attr:`case_id`).
    """

    id: str
    family: str  # the name of its op family (vgf_conformance.cases.families)
    model: Callable[[], nn.Module]
    inputs: tuple[InputSpec, ...]
    input_qspecs: tuple[str, ...]  # names in QSPECS, one per input
    output_qspecs: tuple[str, ...]  # names in QSPECS, one per output
    options: dict = dataclasses.field(default_factory=dict)  # export_model options
    expect: Expectation | None = None
    quick: bool = False  # in the pull-request tier (set from its family's quick set)
    #: Properties that loosen tolerances (see vgf_conformance.cases.tolerances.TRAITS).
    traits: frozenset[str] = frozenset()
    #: None: the case is expected to be delegated (nothing but Q/DQ on the CPU);
    #: else why every op is expected to stay on the CPU.
    stays_on_cpu: str | None = None
    #: A partial delegation: the compute ops (export report names, e.g.
    #: "aten.index.Tensor") expected on the CPU beside the delegates, exactly;
    #: ``cpu_ops_reason`` says why.
    cpu_ops: tuple[str, ...] = ()
    cpu_ops_reason: str | None = None
    #: One :class:`~vgf_conformance.cases.tolerances.Tolerance` per output,
    #: resolved when the case's family builds it (:meth:`Family.finish`):
    #: the family default loosened by the case's traits.
    tolerances: tuple = ()
    flow: str = DEFAULT_FLOW

    @property
    def case_id(self) -> str:
        """The case's own id: ``id`` without the flow of the run."""
        return self.id.partition("/")[2] if self.flow != DEFAULT_FLOW else self.id

    def __post_init__(self) -> None:
        if bool(self.cpu_ops) != bool(self.cpu_ops_reason) or (self.cpu_ops and self.stays_on_cpu):
            raise ValueError(f"{self.id}: cpu_ops needs cpu_ops_reason (and neither goes with stays_on_cpu)")
        if not ID_PATTERN.fullmatch(self.case_id) or (self.flow != DEFAULT_FLOW
                                                      and self.id != f"{self.flow}/{self.case_id}"):
            raise ValueError(f"case id {self.id!r} must be lowercase letters, digits, '-', '_', '.' "
                             f"(a run of another flow: <flow>/<case id>)")
        if len(self.input_qspecs) != len(self.inputs):
            raise ValueError(f"{self.id}: one input qspec per input, got {len(self.input_qspecs)} "
                             f"for {len(self.inputs)} inputs")
        unknown = set(self.input_qspecs + self.output_qspecs) - set(QSPECS)
        if unknown:
            raise ValueError(f"{self.id}: qspecs must be among {sorted(QSPECS)}, got {sorted(unknown)}")
        self._check_options()

    def _check_options(self) -> None:
        options = self.options
        unknown = sorted(set(options) - set(EXPORT_OPTIONS))
        if unknown:
            elsewhere = [f"{k} (set by {EXPORT_KEYWORDS_SET_ELSEWHERE[k]})" for k in unknown
                         if k in EXPORT_KEYWORDS_SET_ELSEWHERE]
            raise ValueError(f"{self.id}: options {unknown} are not export_model options a case sets; "
                             f"known: {sorted(EXPORT_OPTIONS)}" + (f"; {', '.join(elsewhere)}" if elsewhere else ""))
        if options.get("quant_config", "a16w8") not in QUANT_CONFIGS:
            raise ValueError(f"{self.id}: options['quant_config'] must be one of {sorted(QUANT_CONFIGS)}, "
                             f"got {options['quant_config']!r}")
        modules = options.get("module_name_quant_configs", {})
        if not isinstance(modules, dict) or not all(isinstance(k, str) for k in modules):
            raise ValueError(f"{self.id}: options['module_name_quant_configs'] must be a dict "
                             f"{{submodule name: config name or None}}, got {modules!r}")
        bad = {k: v for k, v in modules.items() if v is not None and v not in QUANT_CONFIGS}
        if bad:
            raise ValueError(f"{self.id}: options['module_name_quant_configs'] values must be one of "
                             f"{sorted(QUANT_CONFIGS)} or None, got {bad}")
        if "quant_config" in options and "" in modules:
            raise ValueError(f"{self.id}: options['quant_config'] and module_name_quant_configs[''] both "
                             "name the whole model's config; keep one")
        if options.get("grid_sampler_grid_input_qspec", "int16") not in QSPECS:
            raise ValueError(f"{self.id}: options['grid_sampler_grid_input_qspec'] must be one of "
                             f"{sorted(QSPECS)}, got {options['grid_sampler_grid_input_qspec']!r}")
        for flag in ("quantize_grid_sample_output", "enable_pt2e_quantization"):
            if not isinstance(options.get(flag, True), bool):
                raise ValueError(f"{self.id}: options[{flag!r}] must be True or False, got {options[flag]!r}")
        if "grid_sampler_lowering" in options:
            from vgf_export.export import GRID_SAMPLER_LOWERINGS

            if options["grid_sampler_lowering"] not in GRID_SAMPLER_LOWERINGS:
                raise ValueError(f"{self.id}: options['grid_sampler_lowering'] must be one of "
                                 f"{GRID_SAMPLER_LOWERINGS}, got {options['grid_sampler_lowering']!r}")
        workarounds = options.get("disable_workarounds", ())
        if isinstance(workarounds, str) or not all(isinstance(w, str) for w in workarounds):
            raise ValueError(f"{self.id}: options['disable_workarounds'] must be a tuple of workaround "
                             f"names, got {workarounds!r}")

    @property
    def quantized(self) -> bool:
        return self.options.get("enable_pt2e_quantization", True)

    def make_inputs(self) -> tuple[torch.Tensor, ...]:
        """The example inputs: generated from the seed of the id (in order;
        a file input draws nothing from it), or read from their files."""
        gen = torch.Generator().manual_seed(zlib.crc32(self.case_id.encode()))
        inputs = []
        for index, spec in enumerate(self.inputs):
            try:
                inputs.append(spec.make(gen))
            except ValueError as error:
                raise ValueError(f"case {self.id}, input {index}: {error}") from None
        return tuple(inputs)

    def export_kwargs(self) -> dict:
        kwargs = dict(self.options)
        if self.quantized:
            kwargs["quantized_input_qspecs"] = [QSPECS[q]() for q in self.input_qspecs]
            kwargs["quantized_output_qspecs"] = [QSPECS[q]() for q in self.output_qspecs]
        modules = dict(kwargs.pop("module_name_quant_configs", {}))
        if "quant_config" in kwargs:  # "" names the whole model
            modules[""] = kwargs.pop("quant_config")
        if modules:
            kwargs["module_name_quant_configs"] = {
                name: None if config is None else QUANT_CONFIGS[config][0]() for name, config in modules.items()}
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
        config = self.options.get("quant_config") or self.options.get("module_name_quant_configs", {}).get("")
        return QUANT_CONFIGS[config][1] if config else "int8"

    def get_tolerance(self, output: int = 0):
        """The tolerance of one output (see vgf_conformance.cases.tolerances),
        resolved when the case was built."""
        if not self.tolerances:
            raise ValueError(f"case {self.id}: no tolerances: a case's tolerances are resolved when its "
                             "family builds it (Family.build or Family.finish); this one was not")
        return self.tolerances[output]

    def describe(self, model=None) -> dict:
        """The declarative parameters, as they appear at the top of the golden
        (``model``: the case's model as built for its export; default: a new one);
        a run of another flow than the default names it."""
        flow = {} if self.flow == DEFAULT_FLOW else {"flow": self.flow}
        return {
            **flow,
            "family": self.family,
            "model": repr(self.model() if model is None else model),
            "inputs": [s.describe() for s in self.inputs],
            "input_qspecs": list(self.input_qspecs),
            "output_qspecs": list(self.output_qspecs),
            "options": {k: v for k, v in sorted(self.options.items())},
            "traits": sorted(self.all_traits),
            "internal_precision": self.internal_precision,
            "expected_delegation": "cpu" if self.stays_on_cpu else "partial" if self.cpu_ops else "delegated",
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
