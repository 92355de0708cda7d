"""The pull-request tier, chosen by coverage: every lowering feature of the full matrix in ``-m quick``.

``python -m vgf_conformance coverage [--pick | --from-scratch] [--features] [--json FILE]``

A toolchain regression in a feature no quick case has passes every pull
request and shows up a day later in the nightly, without the change that
caused it. The features are read from the goldens
(:mod:`vgf_conformance.goldens.features`); a case's cost is its recorded
seconds (``vgf_conformance/durations.json``).

The command prints the quick tier's coverage: how many of the full matrix's
features it holds, its recorded seconds, and each feature it lacks with the
cases that have it, cheapest first. ``--pick`` adds the cheapest cases that
cover what is missing to the hand-picked tier (a greedy weighted set cover:
each step takes the case with the most new features per second, then drops
any added case the others make redundant); ``--from-scratch`` covers
everything without the hand-picked tier, to compare. A case is marked quick
in its family's ``QUICK`` set.

The rule (tests/test_coverage.py): no feature of the full matrix is missing
from the quick tier; a golden that brings one fails, naming the case to mark.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from vgf_conformance.goldens.features import features


def case_features(case_ids: Iterable[str], golden_dir: Path) -> dict[str, frozenset[str]]:
    """Each case's features, read from its golden (cases without one: none)."""
    found = {}
    for case_id in case_ids:
        path = Path(golden_dir) / f"{case_id}.json"
        if path.is_file():
            found[case_id] = frozenset(features(json.loads(path.read_text())))
    return found


def holders(by_case: Mapping[str, frozenset[str]]) -> dict[str, set[str]]:
    """Each feature, with the cases that have it."""
    result: dict[str, set[str]] = {}
    for case_id, names in by_case.items():
        for name in names:
            result.setdefault(name, set()).add(case_id)
    return result


def uncovered(by_case: Mapping[str, frozenset[str]], quick: Iterable[str]) -> dict[str, set[str]]:
    """The features no case of ``quick`` has, with the cases that have them."""
    covered = set().union(*(by_case.get(c, frozenset()) for c in quick))
    return {name: cases for name, cases in holders(by_case).items() if name not in covered}


def pick(by_case: Mapping[str, frozenset[str]], seconds: Callable[[str], float],
         keep: Iterable[str] = ()) -> list[str]:
    """The cases to add to ``keep`` so that every feature is covered, at the
    least recorded time a greedy set cover finds (ties: the case id)."""
    chosen = [c for c in keep if c in by_case]
    covered = set().union(*(by_case[c] for c in chosen))
    wanted = set().union(*by_case.values())
    added: list[str] = []
    while covered != wanted:
        best = max((c for c in by_case if c not in chosen and c not in added),
                   key=lambda c: (len(by_case[c] - covered) / max(seconds(c), 0.01), c))
        added.append(best)
        covered |= by_case[best]
    # Drop an added case the others cover (the slowest first).
    for case_id in sorted(added, key=seconds, reverse=True):
        rest = [c for c in chosen + added if c != case_id]
        if set().union(*(by_case[c] for c in rest)) >= wanted:
            added.remove(case_id)
    return sorted(added)


def describe_missing(missing: Mapping[str, set[str]], seconds: Callable[[str], float]) -> str:
    """One line per missing feature: the cheapest case to mark quick, and how many others have it."""
    lines = []
    for name, cases in sorted(missing.items()):
        cheapest = sorted(cases, key=lambda c: (seconds(c), c))
        others = f" (or one of {len(cases) - 1} others)" if len(cases) > 1 else ""
        lines.append(f"  {name}: mark {cheapest[0]} quick ({seconds(cheapest[0]):.1f} s){others}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--pick", action="store_true", help="the cheapest cases to add to the quick tier")
    what.add_argument("--from-scratch", action="store_true", help="the cheapest covering tier, ignoring the quick sets")
    parser.add_argument("--features", action="store_true", help="print every feature with its case count")
    parser.add_argument("--json", type=Path, help="also write {feature: [cases]} and the quick tier to this file")
    args = parser.parse_args(argv)
    from vgf_conformance.cases import CASES
    from vgf_conformance.goldens.store import GOLDEN_DIR
    from vgf_conformance.harness.schedule.durations import load

    seconds = load(None).restricted(CASES)
    by_case = case_features(CASES, GOLDEN_DIR)
    quick = sorted(c for c, case in CASES.items() if case.quick)
    everything, missing = holders(by_case), uncovered(by_case, quick)
    if args.features:
        quick_set = set(quick)
        for name, cases in sorted(everything.items()):
            print(f"{'   ' if cases & quick_set else 'MISS'} {len(cases):4d} {name}")
    print(f"full matrix: {len(by_case)} cases with goldens, {len(everything)} features, "
          f"{sum(map(seconds, by_case)):.0f} s recorded")
    print(f"quick tier: {len(quick)} cases, {len(everything) - len(missing)}/{len(everything)} features, "
          f"{sum(map(seconds, quick)):.1f} s recorded")
    if missing:
        print(f"{len(missing)} features no quick case has:\n{describe_missing(missing, seconds)}")
    if args.pick or args.from_scratch:
        keep = [] if args.from_scratch else quick
        added = pick(by_case, seconds, keep)
        tier = sorted(set(keep) | set(added))
        print(f"{'a covering tier' if args.from_scratch else 'add to the quick tier'}: {len(added)} cases, "
              f"{sum(map(seconds, added)):.1f} s; the tier then {len(tier)} cases, {sum(map(seconds, tier)):.1f} s")
        for case_id in added:
            print(f"  {case_id} ({seconds(case_id):.1f} s): "
                  f"{', '.join(sorted(by_case[case_id] - set().union(*(by_case[c] for c in keep))))}")
    if args.json:
        args.json.write_text(json.dumps({"features": {k: sorted(v) for k, v in everything.items()},
                                         "quick": quick}, indent=1, sort_keys=True) + "\n")
    return 1 if missing else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("coverage", "vgf_conformance.harness.coverage")
