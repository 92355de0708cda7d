"""Per-case seconds: what shards are balanced by and the progress line's ETA.

``vgf_conformance/durations.json`` (kept in the repository, refreshed from the
nightly's merged report) maps each case id, and each test that is not per
case (its node id, e.g. ``vgf_conformance/test_workarounds.py::test_...``), to
the seconds it took: the sum of its tests' pytest durations (setup, call,
teardown), where a Vulkan test counts the case's share of its batch's runner
process rather than the whole batch. A unit missing from the file counts as
the median of the known ones (all units equal when none is known).

Shards (``--vgf-shard I/N``) are dealt by greedy longest-processing-time
(:func:`balance`): units sorted by seconds, longest first, each to the shard
with the least seconds so far; ties go to the lower shard and the lower id,
so every shard job computes the same split. pytest-split does the same for
single tests, but it cannot keep a case's tests together (one export per
case), so the 20 lines live here.

Refresh it from one or more reports (shard reports, or the merged one)::

    python -m vgf_conformance durations update REPORT_DIR... [--out FILE]

A unit's stored value changes only when the new measurement is more than
``1 + --tolerance`` times it, or less than its ``1 / (1 + --tolerance)``, and
0.2 s apart (20 % by default; the nightly uses 1.5, beyond the 2x spread
between runner CPUs), so the file only changes when the balance would.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

#: The built-in durations file.
DEFAULT_FILE = Path(__file__).resolve().parents[2] / "durations.json"
_ABOUT = ("Seconds per case (and per test that is not per case), from a full run's report.json: "
          "the balance of --vgf-shard and the ETA of the progress line. "
          "Refresh: python -m vgf_conformance durations update REPORT_DIR...")


class Durations:
    """Known seconds per unit (case id or node id) and the fallback for the others."""

    def __init__(self, seconds: dict[str, float] | None = None) -> None:
        self.seconds = dict(seconds or {})
        self._median = statistics.median(self.seconds.values()) if self.seconds else 1.0

    def __call__(self, unit: str) -> float:
        return self.seconds.get(unit, self._median)

    def restricted(self, units) -> "Durations":
        """The same, with the median over ``units`` that are known (the run's
        own cases), so another table's cases do not skew it."""
        known = {u: self.seconds[u] for u in units if u in self.seconds}
        result = Durations(self.seconds)
        if known:
            result._median = statistics.median(known.values())
        return result


def load(path: Path | str | None) -> Durations:
    """The durations file at ``path`` (the built-in one when None); a
    missing built-in file gives equal weights, a missing given file is an error."""
    target = Path(path) if path is not None else DEFAULT_FILE
    if not target.is_file():
        if path is None:
            return Durations()
        raise ValueError(f"--vgf-durations: no such file: {target}")
    try:
        data = json.loads(target.read_text())
        seconds = {str(k): float(v) for k, v in data["seconds"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"--vgf-durations: {target} is not a durations file "
                         f"({{\"seconds\": {{unit: seconds}}}}): {error}") from None
    return Durations(seconds)


def balance(weights: dict[str, float], count: int, loads: list[float] | None = None
            ) -> tuple[dict[str, int], list[float]]:
    """Greedy longest-processing-time: unit -> bin (0-based) over ``count``
    bins that start at ``loads``; returns the assignment and the final loads."""
    loads = list(loads) if loads is not None else [0.0] * count
    assignment = {}
    for unit in sorted(weights, key=lambda u: (-weights[u], u)):
        target = min(range(count), key=lambda b: (loads[b], b))
        assignment[unit] = target
        loads[target] += weights[unit]
    return assignment, loads


# ---------------------------------------------------------------------------
# From a report
# ---------------------------------------------------------------------------
#: The stages of a case's run that add up to its time, for reports written
#: before ``run.tests_seconds`` (they miss the tests' own calls, e.g. test_pte).
_STAGES = ("export_total", "numerics", "golden", "vulkan")


def case_seconds(record: dict) -> float | None:
    """A report record's seconds (see the module docstring), or None when the
    run did not record its tests' durations."""
    run = record.get("run") or {}
    if run.get("first_on_worker"):
        return None  # its seconds include its worker's warm-up (see the plugin)
    tests = run.get("tests_seconds")
    if not tests:  # a report of an older plugin: the case's stages only
        stages = run.get("seconds") or {}
        known = [stages[k] for k in _STAGES if k in stages]
        return sum(known) if known else None
    total = sum(v for k, v in tests.items() if k != "test_vulkan")
    if "test_vulkan" in tests:
        share = (run.get("seconds") or {}).get("vulkan")
        total += tests["test_vulkan"] if share is None else min(share, tests["test_vulkan"])
    return total


def measured(report: dict) -> dict[str, float]:
    """Unit -> seconds measured in a report (cases, and the other tests)."""
    units = {r["id"]: s for r in report.get("cases", []) if (s := case_seconds(r)) is not None}
    units.update((report.get("run") or {}).get("other_tests") or {})
    return units


def update(stored: dict[str, float], new: dict[str, float], tolerance: float = 0.2,
           floor: float = 0.2) -> dict[str, float]:
    """``stored`` updated with ``new``, keeping a stored value unless the new one
    is more than ``1 + tolerance`` times it or less than ``1 / (1 + tolerance)``
    of it (the same either way, so a value does not ratchet), and ``floor``
    seconds apart. The nightly uses 1.5 (2.5x): beyond the 2x spread between
    runner CPU models, so the file does not flip between nights."""
    result = dict(stored)
    for unit, seconds in new.items():
        old = stored.get(unit)
        ratio = max(seconds, old) / max(min(seconds, old), 1e-9) if old is not None else None
        if old is None or (abs(seconds - old) > floor and ratio > 1 + tolerance):
            result[unit] = round(seconds, 2)
    return result


def write(path: Path, seconds: dict[str, float]) -> None:
    data = {"about": _ABOUT, "seconds": dict(sorted(seconds.items()))}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance durations")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("update", help="refresh the durations file from reports")
    up.add_argument("reports", type=Path, nargs="+", help="report directories (with report.json)")
    up.add_argument("--out", type=Path, default=DEFAULT_FILE, help="the durations file (default: the built-in one)")
    up.add_argument("--tolerance", type=float, default=0.2,
                    help="keep a stored value unless the new one is more than 1+T times it or less than "
                         "1/(1+T) of it (default 0.2)")
    up.add_argument("--drop-missing", action="store_true",
                    help="drop units the reports do not have (after a full run, to forget removed cases)")
    args = parser.parse_args(argv)
    missing = [str(d) for d in args.reports if not (d / "report.json").is_file()]
    if missing:
        parser.error(f"reports must be directories holding report.json; not found in: {missing}")
    new: dict[str, float] = {}
    for directory in args.reports:
        new.update(measured(json.loads((directory / "report.json").read_text())))
    if not new:
        parser.error("the reports record no test durations (run.tests_seconds): were they "
                     "written by this version of the plugin?")
    stored = load(args.out).seconds if args.out.is_file() else {}
    if args.drop_missing:
        stored = {u: s for u, s in stored.items() if u in new}
    result = update(stored, new, args.tolerance)
    changed = sum(1 for u in result if result[u] != stored.get(u))
    write(args.out, result)
    print(f"{args.out}: {len(result)} units, {changed} changed or added "
          f"({len(new)} measured, {sum(new.values()):.0f} s in all)")
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("durations", "vgf_conformance.harness.durations")
