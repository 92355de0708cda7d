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

#: Recorded seconds (durations.json: both workers' seconds together) the
#: quick tier may take to reach the stack's lines and branches: its wall time
#: on 2 cores is about 18 s of start-up plus half its recorded seconds (50 s
#: for 63.6 s, scripts/benchmark_loop.py), so 80 s keeps it within 60 s.
STACK_BUDGET = 80.0
#: The share of the full matrix's stack lines and branches the quick tier reaches at least (issue 45).
STACK_SHARE = 0.98
#: How the recorded reach is refreshed (the nightly does).
REFRESH = ("pytest -n auto vgf_conformance --vgf-stack-coverage DIR, then python -m vgf_conformance "
           "stack-coverage DIR --record")


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
         keep: Iterable[str] = (), weight: Callable[[str], float] = lambda name: 1.0,
         optional: Callable[[str], bool] = lambda name: False, budget: float | None = None) -> list[str]:
    """The cases to add to ``keep`` so that every element is covered, at the
    least recorded time a greedy weighted set cover finds (each step: the
    most new ``weight`` per second; ties: the case id). Elements that are
    ``optional`` (the stack's lines and branches) are covered only while the
    tier's seconds stay within ``budget``; the others always are."""
    chosen = [c for c in keep if c in by_case]
    covered = set().union(*(by_case[c] for c in chosen))
    wanted = set().union(*by_case.values())
    spent = sum(seconds(c) for c in chosen)
    added: list[str] = []

    def gain(case_id: str) -> float:
        return sum(weight(name) for name in by_case[case_id] - covered)

    while covered != wanted:
        required = {name for name in wanted - covered if not optional(name)}
        candidates = [c for c in by_case if c not in chosen and c not in added
                      and (by_case[c] & required if required else
                           budget is None or spent + seconds(c) <= budget) and gain(c) > 0]
        if not candidates:
            break
        best = max(candidates, key=lambda c: (gain(c) / max(seconds(c), 0.01), c))
        added.append(best)
        covered |= by_case[best]
        spent += seconds(best)
    # Drop an added case the others cover (the slowest first).
    for case_id in sorted(added, key=seconds, reverse=True):
        rest = [c for c in chosen + added if c != case_id]
        if set().union(*(by_case[c] for c in rest)) >= covered:
            added.remove(case_id)
    return sorted(added)


def is_stack(name: str) -> bool:
    """A stack group's set-cover element (a recorded group of lines and branches), not a feature."""
    from vgf_conformance.harness.schedule.stack_reach import ELEMENT

    return name.startswith(ELEMENT)


def _recorded_reach():
    from vgf_conformance.harness.schedule import stack_reach

    try:
        return stack_reach.load()
    except ValueError as error:
        print(f"stack reach: {error}")
        return None


def describe_reach(reach, tier: Iterable[str], seconds: Callable[[str], float], limit: int = 20) -> str:
    """How much of the full matrix's stack lines and branches ``tier``
    reaches, and the heaviest groups it leaves out, each with the cases
    that reach it (cheapest first) and its lines."""
    tier = set(tier)
    reached = reach.reached_by(tier)
    share = reached / reach.total
    left = reach.left_out(tier)
    lines = [f"stack: the tier reaches {reached} of the {reach.total} lines and branches the full "
             f"matrix reaches ({share:.1%}; recorded on {', '.join(f'{k} {v}' for k, v in reach.stack.items())}); "
             f"{len(left)} groups left out, {sum(g.weight for g in left)} lines and branches"]
    for group in left[:limit]:
        cases = sorted(group.cases, key=lambda c: (seconds(c), c))
        others = f" (or one of {len(cases) - 1} others)" if len(cases) > 1 else ""
        where = ", ".join(group.lines[:3]) + (" ..." if len(group.lines) > 3 else "")
        lines.append(f"  {group.line_count} lines, {group.arcs} branches: {cases[0]} ({seconds(cases[0]):.1f} s)"
                     f"{others}: {where or 'branches only'}")
    if len(left) > limit:
        lines.append(f"  ... {len(left) - limit} more groups (--left-out N)")
    return "\n".join(lines)


def stack_shortfall(reach, table: Iterable[str], quick: Iterable[str], seconds: Callable[[str], float],
                    budget: float = STACK_BUDGET) -> str | None:
    """Why the quick tier does not hold the recorded stack reach, or None.
    It must reach :data:`STACK_SHARE` of it, and every group a case within
    ``budget`` would add (named: mark it quick); a recorded case the table
    no longer has means the record is stale. Reads the recorded figures
    only: no coverage run."""
    table, quick = set(table), set(quick)
    stale = sorted(reach.cases - table)
    if stale:
        return (f"the recorded stack coverage names {len(stale)} case(s) the table no longer has "
                f"({', '.join(stale[:3])}): refresh it ({REFRESH})")
    elements = reach.elements()
    add = pick({c: elements.get(c, frozenset()) for c in table}, seconds, quick, weight=reach.weight,
               optional=lambda name: True, budget=budget)
    share = reach.reached_by(quick) / reach.total
    if share >= STACK_SHARE and not add:
        return None
    marks = f"; mark quick: {', '.join(add)} (python -m vgf_conformance coverage --pick)" if add else ""
    return (f"the quick tier reaches {share:.1%} of the stack lines and branches the full matrix reaches "
            f"(at least {STACK_SHARE:.0%}){marks}\n{describe_reach(reach, quick, seconds)}")


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
    parser.add_argument("--budget", type=float, default=STACK_BUDGET,
                        help=f"recorded seconds the tier may take to reach the stack's lines and branches "
                             f"(default {STACK_BUDGET:g}); the features are covered whatever they cost")
    parser.add_argument("--left-out", type=int, default=20, help="how many left-out stack groups to print")
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
    reach = _recorded_reach()
    if reach is not None:
        print(describe_reach(reach, quick, seconds, args.left_out))
        elements = reach.elements()
        by_case = {c: by_case.get(c, frozenset()) | elements.get(c, frozenset()) for c in CASES}
    if args.pick or args.from_scratch:
        keep = [] if args.from_scratch else quick
        added = pick(by_case, seconds, keep, weight=lambda name: reach.weight(name) if is_stack(name) else 1.0,
                     optional=is_stack, budget=args.budget)
        tier = sorted(set(keep) | set(added))
        print(f"{'a covering tier' if args.from_scratch else 'add to the quick tier'}: {len(added)} cases, "
              f"{sum(map(seconds, added)):.1f} s; the tier then {len(tier)} cases, {sum(map(seconds, tier)):.1f} s")
        before = set().union(*(by_case[c] for c in keep))
        for case_id in added:
            new = by_case[case_id] - before
            stack = sum(reach.weight(name) for name in new if is_stack(name)) if reach else 0
            print(f"  {case_id} ({seconds(case_id):.1f} s): "
                  f"{', '.join(sorted(name for name in new if not is_stack(name))) or 'no new feature'}"
                  f"{f'; {stack} stack lines and branches' if stack else ''}")
        if reach is not None:
            print(describe_reach(reach, tier, seconds, args.left_out))
    if args.json:
        args.json.write_text(json.dumps({"features": {k: sorted(v) for k, v in everything.items()},
                                         "quick": quick}, indent=1, sort_keys=True) + "\n")
    return 1 if missing else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("coverage", "vgf_conformance.harness.coverage")
