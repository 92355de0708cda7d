"""``python -m vgf_conformance [--quick] [--family F] [--families]``: list the cases.

One line per case: id, family, quick tier, and the expected failure if any.
"""

from __future__ import annotations

import argparse

from vgf_conformance.cases import BUILTIN_FAMILIES, CASES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance", description=__doc__)
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


if __name__ == "__main__":
    raise SystemExit(main())
