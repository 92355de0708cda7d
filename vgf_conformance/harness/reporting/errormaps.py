"""Error maps: *where* in an output the lowered program differs from its references.

A numerics failure names one worst element; a map shows the pattern: a
right-hand column points at a RESIZE border, a frame at a padding mode, a
checkerboard at a rounding rule, a shifted copy at an offset.

One PNG per output and group of :data:`CHANNELS_PER_MAP` channels. Each row
is one (batch element, channel) image; the columns are the float model's
output, the lowered program's, and per oracle (:data:`ORACLES`) the signed
error ``lowered - reference`` in LSB of the output, on a diverging colour
scale (red: the lowered program is higher, blue: lower) whose range is
stated in the column's title and colour bar, the same for every row of the
column. So a 2x4x12x16 output is one picture of 8 rows. The worst element
of each error column is circled. An output larger than a panel shows is
pooled, each block keeping its most extreme error (a one-pixel error stays).

Maps are drawn only for cases that need them (a numerics failure, an
expected divergence, a numerics drift against the golden): matplotlib
(Agg backend) is imported on the first map, never by a passing run.
:func:`write_case_maps` writes them into ``<case artifacts>/error_maps/``;
:func:`write_maps` draws any set of tensors (the divergences' reproductions,
the explorer's findings).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np
import torch

#: Where a case's maps go, inside its artifacts directory.
MAP_DIR = "error_maps"
#: Channels per PNG (an RGBA image is one map).
CHANNELS_PER_MAP = 4
#: The smallest half-range of an error scale: an error below 1 LSB stays pale
#: instead of being stretched over the whole scale.
MIN_ERROR_RANGE = 1.0
#: Panel height bounds (inches) and the resolution of the PNGs.
_PANEL_MIN, _PANEL_MAX, _DPI = 0.9, 2.4, 72
#: Tiles smaller than this (pixels) are enlarged by an integer factor.
_MIN_TILE = 8
#: Margins (inches): row labels, right, titles, colour bars; the gap between columns.
_LEFT, _RIGHT, _TOP, _BOTTOM, _GAP = 0.75, 0.2, 1.15, 0.7, 0.25


@dataclasses.dataclass(frozen=True)
class ErrorMap:
    """One PNG: output ``output``, channels ``channels[0]..channels[1]`` (inclusive)."""

    file: str  # relative to the directory it was written to
    output: int
    channels: tuple[int, int]
    shape: tuple[int, ...]
    #: Per oracle: the half-range of its colour scale and the max |error|, in LSB.
    ranges: dict

    def to_dict(self) -> dict:
        return {"file": self.file, "output": self.output, "channels": list(self.channels),
                "shape": list(self.shape), "ranges": self.ranges}


def as_nchw(t: torch.Tensor) -> np.ndarray:
    """Any output as (N, C, H, W): a 1-D tensor is one row, leading dims beyond 4 fold into N."""
    a = t.detach().to(torch.float64).cpu().numpy()
    while a.ndim < 4:
        a = a[None] if a.ndim >= 2 else a.reshape((1,) * (4 - a.ndim) + a.shape)
    if a.ndim > 4:
        a = a.reshape((-1, *a.shape[-3:]))
    return a


def write_maps(directory: Path, stem: str, title: str, float_reference: torch.Tensor,
               lowered: torch.Tensor, references: dict[str, torch.Tensor], unit: float,
               output: int = 0, notes: dict[str, str] | None = None) -> list[ErrorMap]:
    """Draw the maps of one output: ``references`` maps an oracle name to its
    reference tensor (same shape as ``lowered``); errors are ``(lowered -
    reference) / unit``. ``notes`` adds a line per oracle under its column's
    title (e.g. its bound). Returns the maps, files named ``<stem>-c<first>-<last>.png``."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # the Agg backend, no pyplot state
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    for name, reference in references.items():
        if tuple(reference.shape) != tuple(lowered.shape):
            raise ValueError(f"write_maps: reference {name!r} has shape {tuple(reference.shape)}, "
                             f"the lowered output {tuple(lowered.shape)}")
    if not unit > 0:
        raise ValueError(f"write_maps: unit must be a positive LSB size, got {unit!r}")
    directory.mkdir(parents=True, exist_ok=True)
    low = as_nchw(lowered)
    ref = as_nchw(float_reference)
    errors = {name: (low - as_nchw(r)) / unit for name, r in references.items()}
    n, c, h, w = low.shape
    maps = []
    for c0 in range(0, c, CHANNELS_PER_MAP):
        c1 = min(c, c0 + CHANNELS_PER_MAP) - 1
        rows = [(b, ch) for b in range(n) for ch in range(c0, c1 + 1)]
        group = (slice(None), slice(c0, c1 + 1))
        value_norm = Normalize(*_value_range(ref[group], low[group]))
        ranges = {}
        columns = [("float model", ref, "gray", value_norm, None),
                   ("lowered program", low, "gray", value_norm, None)]
        for name, err in errors.items():
            worst = float(np.abs(err[group]).max()) if err[group].size else 0.0
            half = max(MIN_ERROR_RANGE, _nice(worst))
            ranges[name] = {"range_lsb": half, "max_lsb": round(worst, 3)}
            label = f"error vs {name.removeprefix('vs_')} (LSB)\nrange ±{half:g}, max {worst:.3g}"
            if notes and notes.get(name):
                label += f"\n{notes[name]}"
            columns.append((label, err, "RdBu_r", Normalize(-half, half), name))

        panel_h = min(_PANEL_MAX, max(_PANEL_MIN, 10.0 / len(rows)))
        panel_w = min(2.5 * _PANEL_MAX, max(_PANEL_MIN, panel_h * w / h))
        # Large outputs are pooled to what a panel shows, keeping each block's
        # most extreme element (a one-pixel error stays visible).
        factor = max(1, math.ceil(max(h / (panel_h * _DPI), w / (panel_w * _DPI))))
        # A fixed layout, in inches (matplotlib's layout engines take most of a map's time).
        # Tiny outputs (a 1x1 pixel) are enlarged so the gaps between rows stay thin.
        zoom = 1 if factor > 1 else max(1, math.ceil(_MIN_TILE / min(h, w)))
        column_h = _column_height(rows, h, w, factor, zoom, panel_w)
        width = _LEFT + len(columns) * panel_w + (len(columns) - 1) * _GAP + _RIGHT
        height = _TOP + column_h + _BOTTOM
        fig = Figure(figsize=(width, height), dpi=_DPI)
        fig.text(0.5, 1 - 0.08 / height, f"{title}\noutput {output} {'x'.join(map(str, lowered.shape))}, "
                 f"channels {c0}-{c1} of {c}; 1 LSB = {unit:.6g}"
                 + (f"; pooled {factor}x{factor} (most extreme element per block)" if factor > 1 else ""),
                 ha="center", va="top", fontsize=9)
        for j, (label, data, cmap, norm, name) in enumerate(columns):
            left = (_LEFT + j * (panel_w + _GAP)) / width
            ax = fig.add_axes((left, _BOTTOM / height, panel_w / width, column_h / height))
            mosaic, centers, step = _mosaic([_zoom(_pool(data[b, ch], factor, extreme=name is not None), zoom)
                                             for b, ch in rows])
            colours = colormaps[cmap].with_extremes(bad="white")
            image = ax.imshow(mosaic, cmap=colours, norm=norm, interpolation="nearest", aspect="auto")
            ax.set_xticks([])
            ax.set_yticks(centers if j == 0 else [], [f"b{b} c{ch}" for b, ch in rows] if j == 0 else [],
                          fontsize=8)
            ax.tick_params(length=0)
            for spine in ax.spines.values():
                spine.set_visible(False)
            ax.set_title(label, fontsize=7)
            if name is not None:
                for i, (b, ch) in enumerate(rows):
                    tile = _pool(data[b, ch], factor)
                    if tile.size:
                        y, x = np.unravel_index(int(np.abs(tile).argmax()), tile.shape)
                        if abs(tile[y, x]) >= MIN_ERROR_RANGE / 2:
                            ax.plot(x * zoom + (zoom - 1) / 2, y * zoom + (zoom - 1) / 2 + i * step, marker="o", markersize=7, markerfacecolor="none",
                                    markeredgecolor="black", markeredgewidth=0.8)
            bar = fig.add_axes((left, 0.3 / height, panel_w / width, 0.12 / height))
            fig.colorbar(image, cax=bar, orientation="horizontal")
            bar.tick_params(labelsize=6)
        file = f"{stem}-c{c0}-{c1}.png"
        FigureCanvasAgg(fig).print_png(directory / file)
        maps.append(ErrorMap(file, output, (c0, c1), tuple(lowered.shape), ranges))
    return maps


def _pool(image: np.ndarray, factor: int, extreme: bool = True) -> np.ndarray:
    """``image`` reduced ``factor`` times per axis: each block to its element of
    largest magnitude (errors), or to its mean (values)."""
    if factor == 1:
        return image
    h, w = image.shape
    padded = np.full((math.ceil(h / factor) * factor, math.ceil(w / factor) * factor), np.nan)
    padded[:h, :w] = image
    blocks = padded.reshape(padded.shape[0] // factor, factor, padded.shape[1] // factor, factor)
    blocks = blocks.transpose(0, 2, 1, 3).reshape(blocks.shape[0], blocks.shape[2], -1)
    if not extreme:
        return np.nanmean(blocks, axis=-1)
    index = np.nanargmax(np.abs(blocks), axis=-1)
    return np.take_along_axis(blocks, index[..., None], axis=-1)[..., 0]


def _zoom(tile: np.ndarray, zoom: int) -> np.ndarray:
    return tile if zoom == 1 else np.repeat(np.repeat(tile, zoom, axis=0), zoom, axis=1)


def _column_height(rows: list, h: int, w: int, factor: int, zoom: int, panel_w: float) -> float:
    """Inches of a column's mosaic at ``panel_w`` inches wide (its gaps as in :func:`_mosaic`)."""
    tile_h, tile_w = math.ceil(h / factor) * zoom, math.ceil(w / factor) * zoom
    return panel_w * (len(rows) * (tile_h + max(1, round(tile_h / 8))) - max(1, round(tile_h / 8))) / tile_w


def _mosaic(tiles: list[np.ndarray]) -> tuple[np.ndarray, list[float], int]:
    """The tiles one under another, a blank (NaN) gap between them: (mosaic, row centres, row step)."""
    h, w = tiles[0].shape
    gap = max(1, round(h / 8))
    step = h + gap
    mosaic = np.full((len(tiles) * step - gap, w), np.nan)
    for i, tile in enumerate(tiles):
        mosaic[i * step:i * step + h] = tile
    return mosaic, [i * step + (h - 1) / 2 for i in range(len(tiles))], step


def _value_range(*arrays: np.ndarray) -> tuple[float, float]:
    values = np.concatenate([a.ravel() for a in arrays])
    if not values.size:
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _nice(x: float) -> float:
    """``x`` rounded up to 1, 2 or 5 times a power of ten (a readable scale end)."""
    if x <= 0 or not math.isfinite(x):
        return MIN_ERROR_RANGE
    power = 10 ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= x - 1e-12)


# ---------------------------------------------------------------------------
# A case of the suite
# ---------------------------------------------------------------------------
_WRITTEN: dict[str, list[dict]] = {}  # artifacts path -> maps, once per case and process


def case_outputs(case_run) -> tuple[torch.Tensor, list[torch.Tensor], dict[str, list[torch.Tensor]], list[float]]:
    """(float outputs, lowered outputs (dequantized), references per oracle, units) of a
    case whose numerics ran; the lowered outputs are the values of that run."""
    from vgf_conformance.oracles.compare import dequantize
    from vgf_conformance.oracles.lowered import output_quant
    from vgf_conformance.oracles.references import ORACLES, Subject

    case, result, numerics = case_run.case, case_run.result, case_run.numerics
    raw = numerics.program.outputs  # the run the checks compared
    params = output_quant(result.edge_program, result.io_quant_params)
    lowered = [dequantize(q, p) for q, p in zip(raw, params)]
    subject = Subject(case.model().eval(), case.make_inputs(), result.quantized_module)
    with torch.no_grad():
        references = {name: oracle.reference(subject) for name, oracle in ORACLES.items()}
        floats = subject.float_outputs
    return floats, lowered, references, numerics.units


def write_case_maps(case_run) -> list[dict]:
    """The maps of a case whose numerics ran, in ``<artifacts>/error_maps/``
    (drawn once per case): what the report records (``error_maps``, paths
    relative to the artifacts). Never raises: a map that cannot be drawn
    is a record with ``error`` (the harness's failure, not the case's), so
    it never hides the numerics failure it was drawn for."""
    if case_run.numerics is None:
        return []  # the run failed before numerics: nothing to map
    key = str(case_run.artifacts)
    if key in _WRITTEN:
        return _WRITTEN[key]
    started = time.perf_counter()
    try:
        floats, lowered, references, units = case_outputs(case_run)
        maps = []
        for i, (f, low, unit) in enumerate(zip(floats, lowered, units)):
            tolerance = case_run.case.get_tolerance(i)
            notes = {name: _bound_note(tolerance, name, case_run.numerics.comparisons[name][i])
                     for name in references}
            maps += [m.to_dict() | {"file": f"{MAP_DIR}/{m.file}"} for m in write_maps(
                case_run.artifacts / MAP_DIR, f"output{i}", case_run.case.id, f, low,
                {name: refs[i] for name, refs in references.items()}, unit, output=i, notes=notes)]
    except Exception as error:  # noqa: BLE001 - the maps are an aid; the check's own failure stands
        maps = [{"error": f"error maps could not be drawn (a bug of vgf-conformance): "
                          f"{type(error).__name__}: {error}"}]
    _WRITTEN[key] = maps
    # The report's run.seconds: what the maps cost (they are drawn only for cases that need them).
    case_run.seconds["error_maps"] = time.perf_counter() - started
    return maps


def _bound_note(tolerance, name: str, comparison) -> str:
    """The oracle's bound for this output and whether the comparison keeps it."""
    bound = tolerance.bounds.get(name)
    if bound is None:
        return ""
    return f"{'FAILS' if bound.problems(comparison) else 'within'} bound {bound.max_lsb:g}"


def maps_of(artifacts: str | Path | None, relative_to: Path) -> list[str]:
    """The maps a case drew into its ``artifacts`` (as the explorer's draws
    do), as paths relative to ``relative_to``; [] when there are none."""
    if not artifacts:
        return []
    directory = Path(artifacts) / MAP_DIR
    try:
        return [str(p.resolve().relative_to(relative_to.resolve())) for p in sorted(directory.glob("*.png"))]
    except ValueError:  # not below relative_to: absolute paths
        return [str(p) for p in sorted(directory.glob("*.png"))]


def main(argv: list[str] | None = None) -> int:
    """``python -m vgf_conformance errormaps CASE_ID... --out DIR``: export
    each case of the table, run its numerics and write its maps as
    ``DIR/<case id>-output<i>-c<first>-<last>.png`` (the maps of docs/divergences/)."""
    import argparse
    import shutil
    import tempfile

    from vgf_conformance.cases import CASES
    from vgf_conformance.harness.execution.runner import run_case

    parser = argparse.ArgumentParser(prog="python -m vgf_conformance errormaps", description=main.__doc__)
    parser.add_argument("cases", nargs="+", help="case ids of the table")
    parser.add_argument("--out", type=Path, required=True, help="directory for the PNGs")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"cases must be ids of the table (python -m vgf_conformance lists them); unknown: {unknown}")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vgf-errormaps-") as work:
        for case_id in args.cases:
            run = run_case(CASES[case_id], Path(work))
            if run.numerics is None:
                print(f"{case_id}: no numerics ({run.failure.describe() if run.failure else 'not run'})")
                continue
            for entry in write_case_maps(run):
                if "error" in entry:
                    print(f"{case_id}: {entry['error']}")
                    return 1
                target = args.out / f"{case_id}-{Path(entry['file']).name}"
                shutil.copyfile(run.artifacts / entry["file"], target)
                worst = ", ".join(f"{k} {v['max_lsb']:g}" for k, v in entry["ranges"].items())
                print(f"{target}: max LSB {worst}")
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("errormaps", "vgf_conformance.harness.errormaps")
