"""How a draw becomes a real case: :func:`render` turns a draw's parameters
(:mod:`vgf_conformance.explore.space`) into the source text of a call of the
family's own case builder (``resize_case(...)``, ``grid_case(...)``), and
:func:`build_case` builds exactly that call (parsed, never evaluated as
Python; the parameters checked first by
:func:`~vgf_conformance.explore.space.check_params`, since a draw can come
from a file). So the case the explorer exports is the case the printed entry
builds: same id, traits, ``cpu_reason`` and tolerances as the suite's.
"""

from __future__ import annotations

import ast
import json
from fractions import Fraction as F

from vgf_conformance.explore.space import FAMILIES, GRID_VARIANTS, RESIZE_IO, _grid_builder, check_params


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
