"""The space the explorer draws from, and how a draw becomes a real case.

A draw is a small JSON-native dict of parameters (``params``). Hypothesis
strategies (:func:`strategy`) draw them; :func:`render` turns them into the
source text of a call of the family's own case builder (``resize_case(...)``,
``grid_case(...)``), and :func:`build_case` builds exactly that call (parsed,
never evaluated as Python; the parameters checked first by
:func:`check_params`, since a draw can come from a file). So the
case the explorer exports is the case the printed entry builds: same id,
traits, ``cpu_reason`` and tolerances as the suite's.

Strategies are ordered so that Hypothesis' shrinking (towards the first
element of each choice, the lowest integer) goes towards the simpler case:
bilinear align_corners=False, a single scale factor, int8 IO, one channel,
batch 1, the smallest sizes.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
from fractions import Fraction as F

from hypothesis import assume
from hypothesis import strategies as st

FAMILIES = ("resize", "grid_sample")

#: Resize modes (keys of ``vgf_conformance.cases.families.resize.MODES``).
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


# ---------------------------------------------------------------------------
# Parameters -> the builder call
# ---------------------------------------------------------------------------
def _q(text: str) -> str:
    return json.dumps(text)


def _float_of(f: F) -> str:
    return f"float(F({f.numerator}))" if f.denominator == 1 else f"float(F({f.numerator}, {f.denominator}))"


def _workaround_tag(names) -> str:
    """``-upstream`` (the table's name for ExecuTorch without the
    bilinear-scale-factor workaround), else ``-no-<workaround>...``."""
    names = tuple(names)
    if not names:
        return ""
    if names == ("bilinear-scale-factor",):
        return "-upstream"
    return "-no-" + "-".join(names)


def _options_text(options: dict) -> str:
    parts = []
    for key, value in options.items():
        if isinstance(value, (list, tuple)):
            value = "(" + ", ".join(_q(v) for v in value) + ("," if len(value) == 1 else "") + ")"
        elif isinstance(value, str):
            value = _q(value)
        parts.append(f"{key}={value}")
    return f"dict({', '.join(parts)})"


def render_resize(p: dict) -> str:
    from vgf_conformance.cases.case import frac_id

    mode, (h, w), c, n = p["mode"], p["in_hw"], p["channels"], p["batch"]
    if p["spec"] == "size":
        oh, ow = p["size"]
        name = f"{mode}-size{h}x{w}-{oh}x{ow}"
        kwargs = f"dict(MODES[{_q(mode)}], size=({oh}, {ow}))"
    else:
        fh, fw = (F(*f) for f in p["factors"])
        if p["spec"] == "factor":
            name, scale = f"{mode}-in{h}x{w}-s{frac_id(fh)}", _float_of(fh)
        else:
            name, scale = f"{mode}-in{h}x{w}-h{frac_id(fh)}-w{frac_id(fw)}", f"({_float_of(fh)}, {_float_of(fw)})"
        rsf = ", recompute_scale_factor=True" if p["recompute"] else ""
        name += "-rsf" if p["recompute"] else ""
        kwargs = f"dict(MODES[{_q(mode)}], scale_factor={scale}{rsf})"
    name += (f"-c{c}" if c != 4 else "") + (f"-n{n}" if n != 1 else "")
    name += {"image": "-noise", "smooth": "", "image_clip": ""}[p["kind"]]
    name += _workaround_tag(p["workarounds_off"])
    args = [_q(name), kwargs, f"({n}, {c}, {h}, {w})"]
    io = RESIZE_IO[p["io"]]
    if io is not None and io != ("int8", "int8"):
        args.append(f"io=({_q(io[0])}, {_q(io[1])})")
    if p["kind"] != "smooth":
        args.append(f"kind={_q(p['kind'])}")
    options = {}
    if io is None:
        options["enable_pt2e_quantization"] = False
    if p["workarounds_off"]:
        options["disable_workarounds"] = tuple(p["workarounds_off"])
    if options:
        args.append(f"options={_options_text(options)}")
    return f"resize_case({', '.join(args)})"


def render_grid(p: dict, default_out=None) -> str:
    if default_out is None:
        default_out = {g: list(v) for g, v in _grid_builder().OUT.items()}
    tag, io, options, image_kind = GRID_VARIANTS[p["io"]]
    tag = _workaround_tag(p["workarounds_off"]) + tag
    options = dict(options)
    if p["workarounds_off"]:
        options["disable_workarounds"] = tuple(p["workarounds_off"])
    args = [str(p["channels"]), _q(p["mode"]), _q(p["padding"]), str(bool(p["ac"])), _q(p["grid"])]
    if tag:
        args.append(f"tag={_q(tag)}")
    if io is not None:
        ins = ", ".join(_q(q) for q in io[0])
        args.append(f"io=(({ins}), ({_q(io[1][0])},))")
    if options:
        args.append(f"options={_options_text(options)}")
    if image_kind != "image":
        args.append(f"image_kind={_q(image_kind)}")
    if p.get("batch", 1) != 1:
        args.append(f"batch={p['batch']}")
    if list(p["out"]) != list(default_out[p["grid"]]):
        args.append(f"out=({p['out'][0]}, {p['out'][1]})")
    return f"grid_case({', '.join(args)})"


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
    from vgf_export.workarounds import WORKAROUNDS

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


def render(family: str, params: dict) -> str:
    """The source text of the builder call that makes this draw's case
    (its parameters checked first: :func:`check_params`)."""
    check_params(family, params)
    if family == "resize":
        return render_resize(params)
    if family == "grid_sample":
        return render_grid(params)
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def build_case(code: str):
    """The case ``code`` (a :func:`render` text) builds, with the family's
    known failures applied as the table applies them. Nothing is evaluated
    as Python: the text is parsed and only its grammar is followed (a call of
    ``resize_case``/``grid_case`` whose arguments are literals, tuples,
    ``dict(...)``, ``float(F(n, d))``, ``MODES[...]`` and an ``Expectation(...)``
    of literals); anything else is a
    ``ValueError`` naming it."""
    from vgf_conformance.cases.case import Expectation
    from vgf_conformance.cases.families import grid_sample, resize
    from vgf_conformance.cases.families.grid_sample import grid_case
    from vgf_conformance.cases.families.resize import MODES, resize_case

    calls = {"resize_case": resize_case, "grid_case": grid_case, "dict": dict, "float": float, "F": F,
             "Expectation": Expectation}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "MODES":
            key = value(node.slice)
            if key not in MODES:
                raise ValueError(f"MODES[{key!r}]: not a resize mode (one of {sorted(MODES)})")
            return MODES[key]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls \
                and all(k.arg is not None for k in node.keywords):
            return calls[node.func.id](*(value(a) for a in node.args),
                                       **{k.arg: value(k.value) for k in node.keywords})
        raise ValueError(f"not part of a builder call: {ast.unparse(node)}")

    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError as error:
        raise ValueError(f"not a builder call: {code!r} ({error.msg})") from None
    body = tree.body
    if not (isinstance(body, ast.Call) and isinstance(body.func, ast.Name)
            and body.func.id in ("resize_case", "grid_case")):
        raise ValueError(f"not a builder call (resize_case or grid_case): {code!r}")
    family = {"resize_case": resize.FAMILY, "grid_case": grid_sample.FAMILY}[body.func.id]
    return family.finish(value(body))  # its tolerances resolved, as the table's are


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
