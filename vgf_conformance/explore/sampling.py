"""Where a lowered RESIZE samples, against where PyTorch samples.

TOSA 1.0 RESIZE (per axis, integer ``scale_n``, ``scale_d``, ``offset``,
``border``) reads output index ``o`` at source position
``(o * scale_d + offset) / scale_n``; bilinear interpolates there (edges
clamped), nearest takes the neighbour rounding half up.

PyTorch (``F.interpolate``, CPU kernels, float32 arithmetic) samples output
``o`` at ``(o + 0.5) / s - 0.5`` (bilinear, align_corners=False, clamped at
0), ``o * (in - 1) / (out - 1)`` (align_corners=True) or
``floor(o / s)`` (nearest), where ``s`` is the given scale factor, or
``out / in`` with ``recompute_scale_factor=True`` or a size.

:func:`compare_axis` states both per axis: the RESIZE's attributes, the
attributes that encode PyTorch's sampling (for a scale s = a/b:
``scale = [2a, 2b]``, offset ``b - a`` for bilinear, ``-a`` for nearest),
and the output indices where the two sample differently.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: Positions closer than this (in input pixels) count as the same.
POSITION_EPSILON = 1e-3


def torch_positions(mode: str, align_corners: bool, in_size: int, out_size: int,
                    scale: float | None) -> list[float]:
    """PyTorch's source position (bilinear, clamped to the image) or index
    (nearest) for each output index; ``scale`` is the factor PyTorch uses
    (None: a size, or recompute_scale_factor=True)."""
    f32 = np.float32
    if mode == "nearest":
        if out_size == in_size:
            return [float(o) for o in range(out_size)]
        ratio = f32(1.0 / scale) if scale else f32(in_size) / f32(out_size)
        return [float(min(int(np.floor(f32(o) * ratio)), in_size - 1)) for o in range(out_size)]
    if align_corners:
        ratio = f32(in_size - 1) / f32(out_size - 1) if out_size > 1 else f32(0)
        positions = [f32(o) * ratio for o in range(out_size)]
    else:
        ratio = f32(1.0 / scale) if scale else f32(in_size) / f32(out_size)
        positions = [max(f32(0), ratio * (f32(o) + f32(0.5)) - f32(0.5)) for o in range(out_size)]
    return [float(min(p, f32(in_size - 1))) for p in positions]


def _stage_position(mode: str, p, n: int, d: int, offset: int, in_size: int):
    """One RESIZE stage: the source position (bilinear) or index (nearest) of
    output position ``p`` (an output index, or a position from the next stage)."""
    if mode == "nearest":
        iy, ry = divmod(int(p) * d + offset, n)  # floor division: the remainder is >= 0
        pick = iy + 1 if 2 * ry >= n else iy
        return min(max(pick, 0), in_size - 1)
    return min(max(Fraction(p) * d / n + Fraction(offset, n), 0), in_size - 1)


def tosa_positions(mode: str, in_size: int, out_size: int, n: int, d: int, offset: int) -> list[float]:
    """The TOSA RESIZE's source position (bilinear, effective: edges clamped)
    or index (nearest) for each output index."""
    return [float(_stage_position(mode, o, n, d, offset, in_size)) for o in range(out_size)]


def chain_positions(mode: str, stages: list[dict], out_size: int) -> list[float]:
    """Positions through RESIZE stages in program order (a split resize):
    each output index mapped back stage by stage (for bilinear, the centre of
    the composed filter)."""
    positions = []
    for o in range(out_size):
        p = o
        for stage in reversed(stages):
            n, d = stage["scale"]
            p = _stage_position(mode, p, n, d, stage["offset"], stage["in"])
        positions.append(float(p))
    return positions


def implied_attributes(mode: str, align_corners: bool, in_size: int, out_size: int,
                       scale: float | None) -> dict | None:
    """The RESIZE attributes (one axis) that sample where PyTorch samples."""
    if mode != "nearest" and align_corners:
        if out_size <= 1 or in_size <= 1:
            return None
        n, d, offset = out_size - 1, in_size - 1, 0
        ratio = Fraction(n, d)
    else:
        ratio = Fraction(scale).limit_denominator(4096) if scale else Fraction(out_size, in_size)
        n, d = 2 * ratio.numerator, 2 * ratio.denominator
        offset = -ratio.numerator if mode == "nearest" else ratio.denominator - ratio.numerator
    border = (out_size - 1) * d - (in_size - 1) * n + offset
    return {"ratio": f"{ratio.numerator}/{ratio.denominator}", "scale": [n, d], "offset": offset, "border": border}


def compare_axis(axis: str, mode: str, align_corners: bool, in_size: int, out_size: int,
                 scale: float | None, tosa) -> dict:
    """One axis: the RESIZE's attributes (``tosa``: {scale: [n, d], offset,
    border}, or a list of such stages with their ``in`` size, for a resize
    split in stages) against PyTorch's sampling."""
    stages = tosa if isinstance(tosa, list) else [dict(tosa, **{"in": in_size})]
    got = chain_positions(mode, stages, out_size)
    want = torch_positions(mode, align_corners, in_size, out_size, scale)
    differ = [o for o, (a, b) in enumerate(zip(got, want)) if abs(a - b) > POSITION_EPSILON]
    ratio = Fraction(1)
    for stage in stages:
        ratio *= Fraction(*stage["scale"])
    entry = {
        "axis": axis, "in": in_size, "out": out_size,
        "tosa": {"scale": stages[0]["scale"], "offset": stages[0]["offset"], "border": stages[0]["border"],
                 "ratio": str(ratio)},
        "pytorch": dict(implied_attributes(mode, align_corners, in_size, out_size, scale) or {},
                        uses=("(in-1)/(out-1)" if align_corners and mode != "nearest"
                              else f"scale factor {scale!r}" if scale else "out/in")),
        "outputs_sampled_elsewhere": len(differ),
    }
    if len(stages) > 1:
        entry["tosa"]["stages"] = [{k: st[k] for k in ("scale", "offset", "border", "in")} for st in stages]
    if differ:
        worst = max(differ, key=lambda o: abs(got[o] - want[o]))
        entry["first"] = {"out": differ[0], "tosa": round(got[differ[0]], 4), "pytorch": round(want[differ[0]], 4)}
        entry["worst"] = {"out": worst, "tosa": round(got[worst], 4), "pytorch": round(want[worst], 4),
                          "pixels": round(abs(got[worst] - want[worst]), 4)}
    return entry


def describe_axis(entry: dict) -> str:
    """One line: the RESIZE's attributes, PyTorch's, and where they sample apart."""
    t, p = entry["tosa"], entry["pytorch"]
    if t.get("stages"):
        parts = " then ".join(f"scale={st['scale']} offset={st['offset']} border={st['border']}"
                              for st in t["stages"])
        text = f"{entry['axis']} {entry['in']}->{entry['out']}: {len(t['stages'])} RESIZE stages {parts} (ratio {t['ratio']})"
    else:
        text = (f"{entry['axis']} {entry['in']}->{entry['out']}: RESIZE scale={t['scale']} offset={t['offset']} "
                f"border={t['border']} (ratio {t['ratio']})")
    if p.get("scale"):
        text += (f"; PyTorch ({p['uses']}) implies scale={p['scale']} offset={p['offset']} "
                 f"border={p['border']} (ratio {p['ratio']})")
    if entry["outputs_sampled_elsewhere"]:
        w = entry["worst"]
        text += (f"; {entry['outputs_sampled_elsewhere']} of {entry['out']} outputs sampled elsewhere, "
                 f"worst at {entry['axis'].lower()}={w['out']}: TOSA {w['tosa']} vs PyTorch {w['pytorch']} "
                 f"({w['pixels']} px)")
    else:
        text += "; same sampling positions"
    return text
