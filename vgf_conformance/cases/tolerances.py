"""Numeric tolerances, in quantization steps (LSB) of the output.

Each output of a case is compared with every oracle's reference
(:data:`vgf_conformance.oracles.references.ORACLES`: ``vs_fake_quant``,
``vs_float_dq``, ``vs_float``); each comparison has a
:class:`~vgf_conformance.oracles.compare.Bound`.

A case's tolerance is its op family's default (``Family.tolerance``, declared
in the family's module; an oracle the family does not name gets the oracle's
own default), loosened by the case's *traits* (:data:`TRAITS`, here: each
names the bounds it loosens and why). A trait that would not loosen anything
is refused when the table is built: a bound that cannot act is a lie. Bounds
are derived from measurement (``report.md`` shows each bound's worst observed
value and margin). Float outputs are measured in
:data:`vgf_conformance.oracles.compare.FLOAT_UNIT` (1/127, one SNORM8 step).

The Vulkan tier is not a tolerance: integer tensors must be bit-exact with the
TOSA-reference path; float tensors at delegate boundaries may differ by
``vulkan_float_lsb``.

A trait may instead *state* a case's bounds (``Trait.states``): the model
tier's measured statistical bounds (:data:`MODEL_BOUNDS`: SNR, 99th
percentile, a max cap), one trait per model, replacing the family default.

Which tolerance a case gets is decided in three places, each for its own
reason: the family module declares the traits its cases have (e.g. a split
resize), :attr:`Case.all_traits` adds the ones the IO implies (float IO,
int16 IO of int8 activations), and :func:`resolve` combines them.
"""

from __future__ import annotations

import dataclasses

from vgf_conformance.cases.model_bounds import MODEL_BOUNDS
from vgf_conformance.oracles.compare import EXACT, Bound
from vgf_conformance.oracles.references import ORACLES

#: One int8 (SNORM8) step in int16 (SNORM16) steps.
INT8_STEP_IN_INT16 = 32767.0 / 127.0
#: How a bound measured on a trait's scaled outputs names its source.
SCALED_MEASURED = "(measured on its scaled outputs)"
#: Fractions of elements that nearest sampling may flip to the neighbouring
#: texel, at most 1.5x the worst measured (8.33 %; 1.04 % against the raw
#: float model, 0.52 % against the dequantized-input one; see the traits below).
OUTLIERS_INT8_NEAREST = 0.124
OUTLIERS_COMPUTED_NEAREST = 0.015
OUTLIERS_COMPUTED_NEAREST_DQ = 0.0075


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """The bounds of one output: one :class:`Bound` per comparison, and where
    each came from (``sources``: the family default or a trait)."""

    bounds: dict[str, Bound]
    vulkan_float_lsb: float = 0.0
    why: tuple[str, ...] = ()
    sources: dict[str, str] = dataclasses.field(default_factory=dict)  # "vs_float.max_lsb" -> source

    def check(self, comparison, what: str) -> str | None:
        """A failure message when ``comparison`` breaks the bound of ``what``, else None."""
        problems = self.bounds[what].problems(comparison)
        if not problems:
            return None
        reason = f" (tolerance: {'; '.join(self.why)})" if self.why else ""
        return f"{what}: {'; '.join(problems)}{reason}\n  {comparison.describe()}"

    def to_dict(self) -> dict:
        """The bounds as the report records them."""
        out = {what: {k: v for k, v in dataclasses.asdict(b).items() if v is not None and (v or k != "outliers")}
               for what, b in self.bounds.items()}
        out["vulkan_float_lsb"] = self.vulkan_float_lsb
        return out


@dataclasses.dataclass(frozen=True)
class Trait:
    """A property of a case that needs looser bounds than its family's, and why.

    ``loosen`` maps a comparison to the :class:`Bound` fields it replaces; the
    looser value wins where a case has several traits."""

    why: str
    loosen: dict[str, dict] = dataclasses.field(default_factory=dict)
    #: What it loosens in the float pipeline (PT2E off, :data:`FLOAT_PIPELINE`),
    #: where ``loosen``, measured on quantized programs, does not apply.
    loosen_float: dict[str, dict] = dataclasses.field(default_factory=dict)
    vulkan_float_lsb: float = 0.0
    #: Multiply every LSB bound of an output of this dtype (finer than the pipeline).
    scale_outputs: tuple[str, float] | None = None
    #: Bound fields measured on the outputs it scales (in their LSB), per
    #: comparison: each replaces the scaled field (but a bound of 0, which
    #: stays exact, and the max of a comparison bounded with outliers, which
    #: is the bulk's), since an int8-internal pipeline's error is not the
    #: scaled int8 error of each family.
    scaled_states: dict[str, dict] = dataclasses.field(default_factory=dict)
    #: Bound fields this trait *states* per comparison (a model's measured
    #: statistical bounds, :data:`MODEL_BOUNDS`): each named field replaces the
    #: base's, the others are kept; a case has at most one trait that states
    #: bounds, and a family without a default tolerance needs one that states
    #: every comparison.
    states: dict[str, dict] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class HardwareDifference:
    """A known way the Vulkan tier computes otherwise than torch, stated with
    its measured bound: the fraction of a tensor's elements it may move."""

    why: str
    max_fraction: float


#: Vulkan samples nearest grid sampling through a NEAREST sampler.
VULKAN_NEAREST_TIES = HardwareDifference(
    "a Vulkan NEAREST sampler picks texel floor(x + 0.5), torch rounds half to even: a source "
    "index exactly halfway between two texels picks the upper one where torch picks the even "
    "one. The Vulkan check compares nearest with a reference that rounds ties up (bit-exact) "
    "and bounds how many elements that moves from torch's rounding. Measured: 0 of 71328 "
    "elements over the 64 cases with a nearest grid sampler (an SNORM16 grid reaches a "
    "half-texel index only at coordinate 0 with align_corners=True and an even size, or at "
    "+1 with align_corners=False, and the two roundings part only where the lower texel is "
    "even). A case with such ties (tests/test_vulkan.py: 52 of 180 elements) needs this "
    "bound raised to its measure",
    max_fraction=0.0,
)


#: How a trait's ``loosen_float`` is named as a bound's source.
PT2E_OFF = "(PT2E off)"
#: The source of a bound a family does not state: its oracle's own default
#: (``Oracle.default``, :mod:`vgf_conformance.oracles.references`).
ORACLE_DEFAULT = "oracle default"


def family_tolerance(**bounds: Bound) -> Tolerance:
    """A family's default tolerance: the bounds it states (by oracle name)
    where they differ from the oracle's own default (whose fields keep
    :data:`ORACLE_DEFAULT` as their source)."""
    unknown = set(bounds) - set(ORACLES)
    if unknown:
        raise ValueError(f"family tolerance names unknown oracles {sorted(unknown)}; known: {sorted(ORACLES)}")
    sources = {f"{name}.{field}": ORACLE_DEFAULT for name in set(ORACLES) - set(bounds)
               for field in dataclasses.asdict(ORACLES[name].default)}
    return Tolerance(bounds={name: bounds.get(name, oracle.default) for name, oracle in ORACLES.items()},
                     sources=sources)


#: Case traits; a case with several takes the loosest of each bound.
TRAITS: dict[str, Trait] = {
    "split-resize": Trait(
        "the split of a downscale by 16 or more (pytorch/executorch#19069 workaround) "
        "samples other pixels than the direct resize; PT2E's fake-quant program is split too, "
        "into two requantizing RESIZEs in a row, each of which TOSA and torch may round "
        "differently (as 'chain'; found by the explorer: 2 LSB on 16x56 at 1/13)",
        loosen={"vs_fake_quant": dict(max_lsb=2), "vs_float_dq": dict(max_lsb=2.5), "vs_float": dict(max_lsb=2.5)},
        # PT2E off: the split samples other pixels of a smooth image (measured 0.27 LSB, bias 0.005)
        loosen_float={"vs_fake_quant": dict(bias_lsb=0.01), "vs_float_dq": dict(max_lsb=0.4, bias_lsb=0.01),
                      "vs_float": dict(max_lsb=0.4, bias_lsb=0.01)},
    ),
    "align-corners-resize": Trait(
        "bilinear with align_corners=True: PT2E's fake-quant program itself is up to 2.2 LSB "
        "from float (the resize's own calibrated int8 range is narrower than its input's, "
        "e.g. resize-bilinear-ac1-up8: [-0.991, 0.975] against inputs up to 0.992, so the "
        "input's extremes clip; see resize-range-clips-peak); the lowered program equals fake-quant",
        loosen={"vs_float_dq": dict(max_lsb=2.5), "vs_float": dict(max_lsb=3.0)},
    ),
    "resize-range-clips-peak": Trait(
        "the resize's own int8 quantization (PT2E calibrates it, shared by its input and output) "
        "covers the output's range, not the input's: an align_corners=True upscale samples an "
        "interior input pixel only at exact multiples, so an interior peak is never an output and "
        "the requantized input clips it (resize-bilinear-ac1-in5x4-s8-c5-n2: scale 0.00776, zero "
        "point 2, [-1.001, 0.970], the input pixel at 1.0 clips to 0.970; measured 3.84 LSB against "
        "the float model on dequantized inputs, 3.85 against the raw float model, where fake-quant "
        "is too: the lowered program equals it, 0 LSB)",
        loosen={"vs_float_dq": dict(max_lsb=4.5), "vs_float": dict(max_lsb=4.5)},
    ),
    "int8-grid": Trait(
        "an SNORM8 grid moves bilinear sample positions by up to half a grid step (1/254 of "
        "the image) against the float model on the raw grid (measured 9.84 LSB); the "
        "dequantized-input reference samples where the program does",
        loosen={"vs_float": dict(bias_lsb=0.4, max_lsb=14.7)},
    ),
    "int8-grid-nearest": Trait(
        "nearest sampling through an SNORM8 grid: against the float model on the raw grid a "
        "coordinate moved by half a grid step picks the neighbouring texel, a difference of "
        "any size on the elements near a texel boundary (measured: up to 8.3 % of elements, "
        "196 LSB); the dequantized-input reference picks the texels the program picks",
        loosen={"vs_float": dict(bias_lsb=3.0, outliers=OUTLIERS_INT8_NEAREST, outlier_max_lsb=235)},
    ),
    "computed-grid-nearest": Trait(
        "nearest sampling through a grid the program computes and quantizes inside (a resized "
        "flow): the dequantized-input reference cannot see that quantization, so a few "
        "coordinates near a texel boundary pick the neighbouring texel (measured: 1.04 % of "
        "elements against the raw float model, 0.52 % against the dequantized-input one, 41 LSB)",
        loosen={"vs_float_dq": dict(outliers=OUTLIERS_COMPUTED_NEAREST_DQ, outlier_max_lsb=61),
                "vs_float": dict(outliers=OUTLIERS_COMPUTED_NEAREST, outlier_max_lsb=61)},
    ),
    "basegrid-nearest": Trait(
        "nearest sampling through base grid + flow: the add's output is an int8 activation "
        "(step about 1.2/127, 0.073 texel at width 16) that the dequantized-input and float "
        "references cannot see, so coordinates within half a step of a texel boundary pick "
        "the neighbour (measured on the three basegrid-flow nearest cases: up to 3.65 % of "
        "elements against the dequantized-input model, 4.17 % against the raw float model, "
        "85 LSB; allowed 1.5x that; the lowered program equals fake-quant, 0 LSB)",
        loosen={"vs_float_dq": dict(bias_lsb=1.25, outliers=0.052, outlier_max_lsb=125),
                "vs_float": dict(bias_lsb=1.25, outliers=0.06, outlier_max_lsb=125)},
    ),
    "clipped-grid": Trait(
        "grid coordinates beyond [-1, 1] with zeros or reflection padding: the SNORM16 grid "
        "qspec (scale 1/32767, range [-32767, 32767]) clips them to [-1, 1] by design, also "
        "behind a float grid input (the sampler's grid qspec quantizes it inside), so those "
        "elements sample the edge instead of zeros or the reflected texel: against the float "
        "model on the raw grid, measured on a grid uniform in [-1.25, 1.25]: up to 42.9 % of "
        "elements beyond 1.5 LSB, 156.1 LSB (zeros: 59); the dequantized-input reference sees "
        "the clipped grid and holds the family bound. Border padding is unaffected (with "
        "align_corners=False, -1 is half a texel beyond the edge: both clip to it)",
        loosen={"vs_float": dict(bias_lsb=1.15, outliers=0.64, outlier_max_lsb=234)},
    ),
    "clipped-grid-nearest": Trait(
        "as clipped-grid, with nearest sampling (a clipped coordinate picks another texel "
        "outright): measured 31.1 % of elements beyond 1.5 LSB, 228.8 LSB against the float "
        "model on the raw grid (reflection, align_corners=True)",
        loosen={"vs_float": dict(bias_lsb=7.5, outliers=0.46, outlier_max_lsb=240)},
    ),
    "computed-grid": Trait(
        "a grid the program computes from a base grid and a flow (base + flow): the add's "
        "output is an int8 activation with a calibrated scale (about 1.2/127: a step of 0.08 "
        "texel at width 16) before the SNORM16 grid qspec requantizes it, so sample positions "
        "move by up to half that step; the dequantized-input reference cannot see that "
        "quantization (measured 5.50 LSB against it, 5.68 against the raw float model; the "
        "lowered program equals fake-quant within the chain bound)",
        loosen={"vs_float_dq": dict(max_lsb=6.9), "vs_float": dict(max_lsb=7.5)},
    ),
    "clipped-output": Trait(
        "an output whose float values go beyond +-1 (a base grid plus a flow in [-0.25, 0.25]: "
        "up to 1.19) clips at its SNORM range by design, by up to 0.25 = 32 LSB (int8 steps; "
        "measured 24.1 on 4.9 % of elements, both float references); fake-quant clips the same",
        loosen={"vs_float_dq": dict(outliers=0.074, outlier_max_lsb=32),
                "vs_float": dict(outliers=0.074, outlier_max_lsb=32)},
    ),
    "clipped-inputs": Trait(
        "inputs beyond +-1 clip at the SNORM8 input (up to 0.25 = 32 LSB against the raw float "
        "model, measured 26.2; the dequantized-input reference sees the clipped values); TOSA "
        "and torch round the saturated interpolation differently (measured 2 LSB vs fake-quant, "
        "1.56 vs the dequantized-input model)",
        loosen={"vs_fake_quant": dict(max_lsb=2), "vs_float_dq": dict(max_lsb=2), "vs_float": dict(bias_lsb=0.9, max_lsb=32)},
    ),
    "float-io": Trait(
        "float tensors at delegate boundaries: Vulkan (llvmpipe) and the reference "
        "implementations may round the last float bits differently",
        vulkan_float_lsb=0.01,
    ),
    "chain": Trait(
        "two requantizing ops in a row may each round differently in TOSA and torch",
        loosen={"vs_fake_quant": dict(max_lsb=2), "vs_float_dq": dict(max_lsb=2)},
    ),
    "int8-weights": Trait(
        "16-bit activations with int8 per-channel weights (a16w8): the conv weights are "
        "rounded to int8 steps, which moves the output by up to ~120 SNORM16 LSB against the "
        "float model (measured 83.4 on the case's inputs, bias 0.57, bound 1.5x that; 75-119.5 "
        "over 8 other seeds of conv-resize-conv, so new inputs may need it raised; the program is "
        "within 1.15 LSB of the float model given the quantized weights): 0.4 % of the range",
        loosen={"vs_float_dq": dict(bias_lsb=0.82, max_lsb=125), "vs_float": dict(bias_lsb=0.82, max_lsb=125)},
    ),
    "int8-internal": Trait(
        "int16 (SNORM16) IO of a program whose activations are int8: the lowering rescales "
        "the input to int8 (RESCALE INT16->INT8) and computes at 8 bits, so an int16 output "
        "carries int8 accuracy: one int8 step is 258 int16 LSB. Its max and bias are not its "
        "family's int8 bounds times 258 (the last RESCALE to int16 and the float references see "
        "the int8 step differently: up to 5.8x looser than measured): they are measured over "
        "the 9 int16 outputs of int8-internal cases, 1.5x the worst, rounded down to 0.1. Against "
        "fake-quant max 258 (one int8 step, resize-bilinear-ac0-up2/down2-int16io), bias 38.66 "
        "(resize-bilinear-ac0-down2-int16io); against the float model on dequantized inputs max "
        "269.25, bias 25.74; against the float model max 269.56, bias 25.74 "
        "(resize-bilinear-ac0-down16/down2-int16io): a regression of 2 int8 steps fails",
        scale_outputs=("int16", INT8_STEP_IN_INT16),
        scaled_states={"vs_fake_quant": dict(max_lsb=387.0, bias_lsb=57.9),
                       "vs_float_dq": dict(max_lsb=403.8, bias_lsb=38.6),
                       "vs_float": dict(max_lsb=404.3, bias_lsb=38.6)},
    ),
}


TRAITS.update({f"model-{name}": Trait(why, states=bounds) for name, (why, bounds) in MODEL_BOUNDS.items()})

#: PT2E off: every tensor is float and the "fake-quant" program is the float
#: model itself; TOSA's FP profile computes what torch does (measured 0 LSB on
#: all 13 such outputs, within EPSILON = 1e-3 LSB): exact. The split of a large
#: downscale samples other pixels (trait ``split-resize``, ``loosen_float``).
FLOAT_PIPELINE = family_tolerance(vs_fake_quant=EXACT, vs_float_dq=EXACT, vs_float=EXACT)


def resolve(base: Tolerance | None, base_name: str, traits, output_dtype: str | None,
            quantized: bool = True) -> Tolerance:
    """The tolerance of one output: ``base`` (a family default named
    ``base_name``; :data:`FLOAT_PIPELINE` when not ``quantized``; None: the
    family has none, a trait states every bound) loosened by ``traits``."""
    if not quantized:
        base, base_name = FLOAT_PIPELINE, "float pipeline"
    stating = sorted(name for name in traits if TRAITS[name].states)
    if len(stating) > 1:
        raise ValueError(f"traits {stating} each state bounds: a case may have one of them")
    if base is None:
        missing = sorted(set(ORACLES) - set(TRAITS[stating[0]].states)) if stating else sorted(ORACLES)
        if missing:
            raise ValueError(f"{base_name} is none: a case of it needs a trait that states the bounds of "
                             f"every comparison; {stating or 'no trait'} leaves {missing} unbounded")
        base = Tolerance(bounds={what: Bound(**TRAITS[stating[0]].states[what]) for what in ORACLES})
        base_name = stating[0]
    # An oracle the base does not name (one added after it was declared) gets its own default.
    bounds = {what: dataclasses.asdict(base.bounds.get(what, oracle.default)) for what, oracle in ORACLES.items()}
    sources = {f"{what}.{k}": base.sources.get(f"{what}.{k}", base_name) for what, b in bounds.items() for k in b}
    vulkan, why, scale = base.vulkan_float_lsb, list(base.why), None
    for name in stating:  # a model's measured bounds narrow the fields they name, the others stay
        for what, fields in TRAITS[name].states.items():
            bounds[what].update(fields)
            sources.update({f"{what}.{k}": name for k in fields})
    for name in sorted(traits):
        trait = TRAITS[name]
        why.append(trait.why)
        for what, fields in (trait.loosen if quantized else trait.loosen_float).items():
            for key, value in fields.items():
                current = bounds[what][key]
                looser = value < current if key == "min_snr_db" and current is not None else None
                if current is None or (looser if looser is not None else value > current):
                    bounds[what][key] = value
                    sources[f"{what}.{key}"] = name if quantized else f"{name} {PT2E_OFF}"
        vulkan = max(vulkan, trait.vulkan_float_lsb)
        if trait.scale_outputs and trait.scale_outputs[0] == output_dtype:
            scale = (name, trait.scale_outputs[1])
    if not quantized:  # no fake-quant program: the float model stands in for it
        bounds["vs_fake_quant"] = dict(bounds["vs_float"], bias_lsb=bounds["vs_fake_quant"]["bias_lsb"])
        sources.update({k.replace("vs_float.", "vs_fake_quant."): v for k, v in sources.items()
                        if k.startswith("vs_float.")})
    resolved = {what: Bound(**b) for what, b in bounds.items()}
    if scale is not None:
        resolved = {what: b.scaled(scale[1]) for what, b in resolved.items()}
        sources = {k: f"{v} x{scale[1]:.0f} ({scale[0]})" for k, v in sources.items()}
        for what, fields in TRAITS[scale[0]].scaled_states.items():
            stated = {k: v for k, v in fields.items() if getattr(resolved[what], k)  # a 0 stays exact
                      and not (k == "max_lsb" and resolved[what].outliers)}  # then it bounds the bulk
            resolved[what] = dataclasses.replace(resolved[what], **stated)
            sources.update({f"{what}.{k}": f"{scale[0]} {SCALED_MEASURED}" for k in stated})
    return Tolerance(resolved, vulkan, tuple(why), sources)


def check_traits(defaults: list[Tolerance]) -> None:
    """Every trait names known bounds and loosens something that the family
    ``defaults`` do not already allow (else it would have no effect)."""
    defaults = [d for d in defaults if d is not None]  # a family that states none
    for name, trait in TRAITS.items():
        unknown = set(trait.states) - set(ORACLES)
        if unknown:
            raise ValueError(f"trait {name!r} states bounds of {sorted(unknown)}, which are no oracles "
                             f"({sorted(ORACLES)})")
        for what, fields, bases in [*((w, f, defaults) for w, f in trait.loosen.items()),
                                    *((w, f, [FLOAT_PIPELINE]) for w, f in trait.loosen_float.items())]:
            if what not in ORACLES:
                raise ValueError(f"trait {name!r} loosens {what!r}, which is no oracle ({sorted(ORACLES)})")
            for key, value in fields.items():
                values = [getattr(t.bounds[what], key) for t in bases]
                if all(d is not None and value <= d for d in values):
                    raise ValueError(f"trait {name!r}: {what}.{key}={value} is no looser than every "
                                     "family default: it would have no effect")
