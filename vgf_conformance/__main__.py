"""``python -m vgf_conformance [VERB] [ARGS]``: the suite's commands, one entry point.

Verbs (``python -m vgf_conformance VERB --help`` for each):

  cases         list the cases: id, family, quick tier, expected failure (the default verb)
  review        what changed in the goldens between two revisions, grouped (a PR comment)
  upgrade       a candidate's goldens, lock and findings as a pull request (collect, commit, pr)
  report        diff two reports, the compatibility matrix, merge shard reports
  explore       search resize and grid_sample parameters for new divergences
  draw          rerun one explorer draw in this process
  native        the native upstream grid-sampler flow against the production export
  selftest      inject each fault into the stack and print what catches it
  localize      name the TOSA op a case's numerics divergence starts at
  coverage      the quick tier's lowering features, and the tier coverage picks
  slack         each numeric bound against the worst it was measured to need
  stack-coverage  the stack lines and branches a run's exports reached (--vgf-stack-coverage), its blind spots
  model-bounds  measure the model tier's bounds over input seeds
  drift         export goldens under other ISAs and thread counts, tabulate the drift
  durations     refresh the recorded per-case durations from reports
  stale         the goldens whose case left the table
  html          render report.html again from a report.json
  errormaps     render a case's error maps
  vulkan        rerun a saved Vulkan scenario by hand
  candidate     the steps of scripts/candidate.sh written in Python (pins, preflight, findings)

The older per-module commands (``python -m vgf_conformance slack``,
...) still work for a release and say which verb replaces them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: verb -> the module whose ``main(argv)`` runs it.
VERBS = {
    "review": "vgf_conformance.review",
    "upgrade": "vgf_conformance.upgrade",
    "report": "vgf_conformance.report",
    "explore": "vgf_conformance.explore.__main__",
    "draw": "vgf_conformance.explore.draw",
    "native": "vgf_conformance.native.__main__",
    "selftest": "vgf_conformance.selftest.__main__",
    "coverage": "vgf_conformance.harness.schedule.coverage",
    "slack": "vgf_conformance.harness.measurements.slack",
    "stack-coverage": "vgf_conformance.harness.measurements.stack_coverage",
    "model-bounds": "vgf_conformance.harness.measurements.model_bounds",
    "drift": "vgf_conformance.harness.measurements.drift",
    "durations": "vgf_conformance.harness.schedule.durations",
    "stale": "vgf_conformance.goldens.stale",
    "html": "vgf_conformance.harness.reporting.html",
    "errormaps": "vgf_conformance.harness.reporting.errormaps",
    "vulkan": "vgf_conformance.oracles.vulkan.__main__",
    "candidate": "vgf_conformance.harness.candidates.compat",
}


def cases(argv: list[str]) -> int:
    """List the cases: one line each, id, family, quick tier, expected failure."""
    from vgf_conformance.cases import BUILTIN_FAMILIES, CASES

    parser = argparse.ArgumentParser(prog="python -m vgf_conformance cases", description=cases.__doc__)
    parser.add_argument("--quick", action="store_true", help="only the pull-request tier")
    families = [f.name for f in BUILTIN_FAMILIES]
    parser.add_argument("--family", help=f"only this op family ({', '.join(families)})")
    parser.add_argument("--families", action="store_true", help="list the op families, not the cases")
    args = parser.parse_args(argv)
    if args.families:
        for family in BUILTIN_FAMILIES:
            count = sum(c.family == family.name for c in CASES.values())
            print(f"{family.name:12s} {count:4d} cases, {len(family.quick):3d} quick  {family.summary}")
        return 0
    if args.family and args.family not in families:
        parser.error(f"--family must be one of {families}, got {args.family!r}")
    shown = 0
    for case in CASES.values():
        if (args.quick and not case.quick) or (args.family and case.family != args.family):
            continue
        expect = f"  xfail[{case.expect.stage}]: {case.expect.reason}" if case.expect else ""
        print(f"{case.id:60s} {case.family:12s}{' quick' if case.quick else '      '}{expect}")
        shown += 1
    print(f"{shown} of {len(CASES)} cases")
    return 0


def localize(argv: list[str]) -> int:
    """Name the first TOSA op of a case's lowered program that adds more than
    a rounding step (or a bias) to its PT2E source; exit 1 when one does."""
    import json
    import tempfile
    from pathlib import Path

    from vgf_conformance.cases import CASES
    from vgf_conformance.oracles.localize import localize as localize_case
    from vgf_conformance.selftest.faults import FAULTS

    parser = argparse.ArgumentParser(prog="python -m vgf_conformance localize", description=localize.__doc__)
    parser.add_argument("case", help="a case id (python -m vgf_conformance cases lists them)")
    parser.add_argument("--fault", choices=sorted(FAULTS), help="inject this self-test fault first")
    parser.add_argument("--json", type=Path, help="also write the comparison to this file")
    args = parser.parse_args(argv)
    if args.case not in CASES:
        parser.error(f"case: unknown case {args.case!r} (python -m vgf_conformance cases lists them)")
    undo = FAULTS[args.fault].apply() if args.fault else None
    try:
        with tempfile.TemporaryDirectory(prefix="vgf-localize-") as root:
            found = localize_case(CASES[args.case], Path(root) / "artifacts")
    finally:
        if undo:
            undo()
    print(found.describe())
    if args.json:
        args.json.write_text(json.dumps(found.to_dict(), indent=1, sort_keys=True) + "\n")
    return 0 if found.first is None else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        return cases(argv)  # python -m vgf_conformance [--quick ...]: the listing, as before verbs
    verb, rest = argv[0], argv[1:]
    if verb in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    if verb == "cases":
        return cases(rest)
    if verb == "localize":
        return localize(rest)
    if verb not in VERBS:
        print(f"python -m vgf_conformance: unknown verb {verb!r}; one of: cases, localize, "
              f"{', '.join(VERBS)} (--help says what each does)", file=sys.stderr)
        return 2
    return importlib.import_module(VERBS[verb]).main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
