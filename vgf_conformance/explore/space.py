"""The space the explorer draws from.

A draw is a small JSON-native dict of parameters (``params``). Hypothesis
strategies (:func:`strategy`) draw them; :func:`check_params` holds a draw
(which can come from a file) to the space's domain;
:mod:`vgf_conformance.explore.entry` turns a draw into the case-table entry
it stands for and builds that entry's case.

Strategies are ordered so that Hypothesis' shrinking (towards the first
element of each choice, the lowest integer) goes towards the simpler case:
bilinear align_corners=False, a single scale factor, int8 IO, one channel,
batch 1, the smallest sizes.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from fractions import Fraction as F

from hypothesis import assume
from hypothesis import strategies as st

FAMILIES = ("resize", "grid_sample")

#: Resize modes (keys of ``vgf_conformance.cases.families.resize.parameters.MODES``).
RESIZE_MODES = ("bilinear-ac0", "bilinear-ac1", "nearest")
#: Resize IO: qspec names of (input, output), or "fp" (PT2E off).
RESIZE_IO = {
    "int8": ("int8", "int8"), "int16": ("int16", "int16"), "float": ("float", "float"),
    "int8-float": ("int8", "float"), "float-int8": ("float", "int8"),
    "int8-int16": ("int8", "int16"), "int16-int8": ("int16", "int8"), "fp": None,
}
#: Input kinds: smooth images (the builder's default), uniform noise (a pixel
#: sampled elsewhere shows fully), inputs beyond +-1 (clipped by SNORM8).
RESIZE_KINDS = ("smooth", "image", "image_clip")

#: grid_sample IO variants, as the table spells them: (tag, io, options, image_kind).
GRID_VARIANTS = {
    "default": ("", None, {}, "image"),
    "int8grid": ("-int8grid", (("int8", "int8"), ("int8",)), {"grid_sampler_grid_input_qspec": "int8"}, "image"),
    "floatout": ("-floatout", (("int8", "int16"), ("float",)), {"quantize_grid_sample_output": False}, "image"),
    "float-image": ("", (("float", "int16"), ("int8",)), {}, "image"),
    "float-grid": ("", (("int8", "float"), ("int8",)), {}, "image"),
    "float": ("", (("float", "float"), ("float",)), {}, "image"),
    "int16": ("", (("int16", "int16"), ("int16",)), {}, "image"),
    "fp": ("", None, {"enable_pt2e_quantization": False}, "image"),
    "clip": ("-clip", None, {}, "image_clip"),
}


@dataclasses.dataclass(frozen=True)
class Limits:
    """Bounds of the drawn space (sizes kept small: every draw is a real export)."""

    resize_modes: tuple[str, ...] = RESIZE_MODES
    max_in: int = 64  # resize input H, W
    max_out: int = 96  # resize output H, W
    max_channels: int = 8
    max_batch: int = 2
    max_grid: int = 24  # grid_sample grid (and output) H, W


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------
def _fraction():
    """A scale factor num/den: 1..8 over 1..20, or a large downscale (1/32, 1/64)."""
    return st.tuples(st.integers(1, 8), st.one_of(st.integers(1, 20), st.sampled_from((32, 64))))


@st.composite
def resize_params(draw, limits: Limits = Limits(), workarounds_off: tuple[str, ...] = ()):
    mode = draw(st.sampled_from(tuple(m for m in RESIZE_MODES if m in limits.resize_modes)))
    spec = draw(st.sampled_from(("factor", "size", "axis")))
    io = draw(st.sampled_from(tuple(RESIZE_IO)))
    quantized_in = io == "fp" or RESIZE_IO[io][0] != "float"
    kind = draw(st.sampled_from(RESIZE_KINDS if quantized_in else RESIZE_KINDS[:2]))
    channels = draw(st.integers(1, limits.max_channels))
    batch = draw(st.integers(1, limits.max_batch))
    params = {"mode": mode, "spec": spec}
    if spec == "size":
        params["in_hw"] = [draw(st.integers(1, limits.max_in)) for _ in range(2)]
        params["size"] = [draw(st.integers(1, limits.max_out)) for _ in range(2)]
    else:
        first = draw(_fraction())
        factors = [first, first] if spec == "factor" else [first, draw(_fraction())]
        factors = [F(*f) for f in factors]
        in_hw = []
        for f in factors:
            low = max(1, math.ceil(1 / f))  # an output of at least one pixel
            high = min(limits.max_in, math.floor(limits.max_out / f))
            assume(low <= high)
            in_hw.append(draw(st.integers(low, high)))
        params["in_hw"] = in_hw
        params["factors"] = [[f.numerator, f.denominator] for f in factors]
        params["recompute"] = draw(st.booleans())
        # floor(in * float(f)) in float arithmetic, as PyTorch computes it.
        assume(all(math.floor(i * float(f)) >= 1 for i, f in zip(in_hw, factors)))
    params.update(channels=channels, batch=batch, io=io, kind=kind, workarounds_off=list(workarounds_off))
    return params


def _grid_builder():
    from vgf_conformance.cases.families import grid_sample

    return grid_sample


def grid_features() -> dict:
    """What this checkout's ``grid_case`` supports (others extend it): grid
    sizes (``out=``), batch (``batch=``), the grids it knows, channel counts."""
    module = _grid_builder()
    accepted = inspect.signature(module.grid_case).parameters
    # The named grids (identity, zoom, rotation, random) and the input-kind
    # grids ("beyond": grid_case gives it the clipped-grid traits itself).
    grids = tuple(module.GRID_NAMES) + tuple(getattr(module, "GRID_INPUT", {}))
    channels = []
    for c in (1, 2, 3, 4):
        try:
            module.grid_case(c, "bilinear", "zeros", False, "identity")
            channels.append(c)
        except (KeyError, ValueError):
            pass
    return {"out": "out" in accepted, "batch": "batch" in accepted, "grids": grids,
            "channels": tuple(channels), "default_out": {g: list(v) for g, v in module.OUT.items()}}


@st.composite
def grid_params(draw, features: dict, limits: Limits = Limits(), workarounds_off: tuple[str, ...] = ()):
    params = {
        "channels": draw(st.sampled_from(features["channels"])),
        "mode": draw(st.sampled_from(("bilinear", "nearest"))),
        "padding": draw(st.sampled_from(("zeros", "border", "reflection"))),
        "ac": draw(st.booleans()),
        "grid": draw(st.sampled_from(features["grids"])),
        "io": draw(st.sampled_from(tuple(GRID_VARIANTS))),
    }
    default = features["default_out"][params["grid"]]
    if features["out"] and not (params["mode"] == "nearest" and params["grid"] in ("identity", "zoom")):
        params["out"] = [draw(st.integers(1, limits.max_grid)) for _ in range(2)]
    elif features["out"]:
        # Nearest on an identity or zoom grid of another size than the image puts
        # coordinates exactly on texel ties, which the SNORM16 grid moves: the
        # raw-float comparison then says nothing (seed 3's group 1, seed 4's 1
        # and 2: docs/explorer/seed-3-findings.md). The table keeps them at the
        # image's size too (grid_sample.OUT).
        params["out"] = list(default)
    else:
        params["out"] = default
    params["batch"] = draw(st.integers(1, limits.max_batch)) if features["batch"] else 1
    params["workarounds_off"] = list(workarounds_off)
    return params


def strategy(family: str, limits: Limits = Limits(), workarounds_off: tuple[str, ...] = ()):
    if family == "resize":
        return resize_params(limits, tuple(workarounds_off))
    if family == "grid_sample":
        return grid_params(grid_features(), limits, tuple(workarounds_off))
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def _ints(value, count: int, low: int, high: int) -> bool:
    return (isinstance(value, list) and len(value) == count
            and all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value))


def _int_in(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


#: The largest sizes a draw may ask for, whatever limits the explorer was run
#: with (``python -m vgf_conformance explore --max-in ...``): a draw read from a
#: file is checked against these.
DOMAIN = Limits(max_in=1024, max_out=2048, max_channels=64, max_batch=8, max_grid=1024)


def check_params(family: str, params, limits: Limits = DOMAIN) -> None:
    """Every parameter of a draw within the strategy's domain (a draw can come
    from a file or a pull request: ``docs/explorer/*.md``); a clear
    ``ValueError`` naming the first one that is not."""
    from vgf_export.names import WORKAROUNDS

    if not isinstance(params, dict):
        raise ValueError(f"params: expected an object of draw parameters, got {params!r}")
    if family == "resize":
        expected = {
            "mode": (lambda v: v in RESIZE_MODES, f"one of {list(RESIZE_MODES)}"),
            "spec": (lambda v: v in ("factor", "size", "axis"), "one of ['factor', 'size', 'axis']"),
            "io": (lambda v: v in RESIZE_IO, f"one of {list(RESIZE_IO)}"),
            "kind": (lambda v: v in RESIZE_KINDS, f"one of {list(RESIZE_KINDS)}"),
            "channels": (lambda v: _int_in(v, 1, limits.max_channels), f"an integer in 1..{limits.max_channels}"),
            "batch": (lambda v: _int_in(v, 1, limits.max_batch), f"an integer in 1..{limits.max_batch}"),
            "in_hw": (lambda v: _ints(v, 2, 1, limits.max_in), f"two integers in 1..{limits.max_in}"),
        }
        if params.get("spec") == "size":
            expected["size"] = (lambda v: _ints(v, 2, 1, limits.max_out), f"two integers in 1..{limits.max_out}")
        else:
            expected["factors"] = (lambda v: isinstance(v, list) and len(v) == 2
                                   and all(_ints(f, 2, 1, 64) for f in v), "two [numerator, denominator] pairs in 1..64")
            expected["recompute"] = (lambda v: isinstance(v, bool), "true or false")
    elif family == "grid_sample":
        features = grid_features()
        expected = {
            "channels": (lambda v: v in features["channels"], f"one of {list(features['channels'])}"),
            "mode": (lambda v: v in ("bilinear", "nearest"), "one of ['bilinear', 'nearest']"),
            "padding": (lambda v: v in ("zeros", "border", "reflection"), "one of ['zeros', 'border', 'reflection']"),
            "ac": (lambda v: isinstance(v, bool), "true or false"),
            "grid": (lambda v: v in features["grids"], f"one of {list(features['grids'])}"),
            "io": (lambda v: v in GRID_VARIANTS, f"one of {list(GRID_VARIANTS)}"),
            "out": (lambda v: _ints(v, 2, 1, limits.max_grid), f"two integers in 1..{limits.max_grid}"),
            "batch": (lambda v: _int_in(v, 1, limits.max_batch), f"an integer in 1..{limits.max_batch}"),
        }
    else:
        raise ValueError(f"family: expected one of {list(FAMILIES)}, got {family!r}")
    expected["workarounds_off"] = (lambda v: isinstance(v, list) and all(w in WORKAROUNDS for w in v),
                                   f"a list of workaround names among {sorted(WORKAROUNDS)}")
    for name, (ok, what) in expected.items():
        if name not in params:
            raise ValueError(f"params.{name}: missing (expected {what})")
        if not ok(params[name]):
            raise ValueError(f"params.{name}: expected {what}, got {params[name]!r}")
    unknown = sorted(set(params) - set(expected))
    if unknown:
        raise ValueError(f"params.{unknown[0]}: not a parameter of a {family} draw "
                         f"(expected only {sorted(expected)})")


def output_hw(params: dict) -> tuple[int, int]:
    """A resize draw's output H, W (PyTorch's: the size, or floor(in * s))."""
    if params["spec"] == "size":
        return tuple(params["size"])
    return tuple(math.floor(i * float(F(*f))) for i, f in zip(params["in_hw"], params["factors"]))


def size_key(family: str, params: dict) -> tuple:
    """An order of draws by size, simplest first (for picking the smallest
    case seen when Hypothesis' shrinking did not report one)."""
    if family == "resize":
        oh, ow = output_hw(params)
        h, w = params["in_hw"]
        elements = params["batch"] * params["channels"] * (h * w + oh * ow)
        return (elements, RESIZE_MODES.index(params["mode"]), tuple(RESIZE_IO).index(params["io"]))
    oh, ow = params["out"]
    return (params.get("batch", 1) * params["channels"] * oh * ow, params["channels"],
            tuple(GRID_VARIANTS).index(params["io"]))


def draw_key(family: str, params: dict) -> str:
    """A canonical text of a draw (the cache key)."""
    return json.dumps({"family": family, "params": params}, sort_keys=True)
