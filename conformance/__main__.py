"""``python -m conformance [--quick] [--family F]``: list the cases.

One line per case: id, family, quick tier, and the expected failure if any.
"""

from __future__ import annotations

import argparse

from conformance.cases import CASES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only the pull-request tier")
    parser.add_argument("--family", help="only this op family (resize, grid_sample, composite)")
    args = parser.parse_args(argv)
    families = sorted({c.family for c in CASES.values()})
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
