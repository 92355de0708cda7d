"""A TOSA op line of a golden (``op[5] RESCALE(multiplier=[...] ...) ... -> ... <- ...``)
taken apart: its calibrated operands and float attributes (which the
compliance comparison holds to bands, :mod:`vgf_conformance.goldens.compliance`),
and what differs between two lines, field by field."""

from __future__ import annotations

import re

#: An attribute of a TOSA op line (``name=value``, no spaces in a value).
_TOKEN = re.compile(r"\b([a-z_0-9]+)=(\[[^\]]*\]|[^\s)]+)")
#: Integer operands computed from calibrated scales (a RESCALE's, a convolution's).
CALIBRATED_INTS = ("multiplier", "shift", "bias")
#: A value with a float literal: a float constant operand of an FP32 graph (a
#: quantize's or dequantize's scale, as MUL operands), compared relatively.
_FLOAT = re.compile(r"\d\.\d|\de[-+]?\d|\b(inf|nan)\b")


#: How an attribute absent from one of two op lines is shown.
NO_ATTRIBUTE = "(none)"


def _values(text: str, kind=int) -> list:
    """``[1,2]``, ``38x16`` (sixteen times 38) or ``5`` as numbers of ``kind``."""
    if text.startswith("["):
        return [kind(v) for v in text[1:-1].split(",") if v.strip()]
    if "x" in text:
        value, count = text.rsplit("x", 1)
        return [kind(value)] * int(count)
    return [kind(text)]


def split_op_line(line: str) -> tuple[str, dict[str, list]]:
    """An op line with its tolerant operands masked, and their values: the
    calibrated integers (``multiplier``, ``shift``, ``bias``) and every
    float-valued attribute."""
    values: dict[str, list] = {}

    def mask(match: re.Match) -> str:
        name, text = match.group(1), match.group(2)
        try:
            if name in CALIBRATED_INTS:
                values[name] = _values(text)
            elif _FLOAT.search(text):
                values[name] = _values(text, float)
            else:
                return match.group(0)
        except ValueError:
            return match.group(0)
        return f"{name}=<{name}>"

    return _TOKEN.sub(mask, line), values


_OP_LINE = re.compile(r"^op\[\d+\] (?P<op>[A-Z0-9_]+)\((?P<attrs>.*?)\) ?(?P<operands>.*?) -> "
                      r"(?P<results>\S*) <- ?(?P<sources>.*)$")


def op_changes(before: str, after: str, tolerant=frozenset()) -> dict[str, tuple[str, str]]:
    """What differs between two op lines, field by field: the op, each
    attribute (but the ``tolerant`` ones, compared in their band), the
    operands, results and sources; empty when either is not an op line."""
    parts = []
    for line in (before, after):
        match = _OP_LINE.match(line)
        if not match:
            return {}
        fields = {"op": match["op"], "operands": match["operands"], "results": match["results"],
                  "sources": match["sources"]}
        fields.update((f"{name}", value) for name, value in _TOKEN.findall(match["attrs"]))
        parts.append(fields)
    b, a = parts
    return {name: (b.get(name, NO_ATTRIBUTE), a.get(name, NO_ATTRIBUTE)) for name in dict.fromkeys([*b, *a])
            if name not in tolerant and b.get(name) != a.get(name)}
