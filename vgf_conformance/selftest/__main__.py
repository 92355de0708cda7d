"""``python -m vgf_conformance selftest [--fault NAME ...] [--full] [--out DIR] [-- PYTEST ARGS]``

Runs the quick tier (``--full``: the whole matrix) once without a fault and
once under each fault of :data:`vgf_conformance.selftest.faults.FAULTS`, each
run's report in ``DIR/<fault>/``, and prints a Markdown table: the fault, its
layer, how many cases failed, and which checks failed in them. A fault with
no failing case is not caught (exit 1); so is a run without a fault that
does not pass (the table would mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from vgf_conformance import process
from vgf_conformance.selftest.faults import ENV, FAULTS, get

NOT_PASSING = ("failed", "error", "xpassed")


def caught(report: dict) -> tuple[list[str], Counter]:
    """The cases that failed, and how many of them failed each test."""
    cases, checks = [], Counter()
    for case in report["cases"]:
        bad = [test for test, outcome in (case.get("tests") or {}).items() if outcome in NOT_PASSING]
        if bad:
            cases.append(case["id"])
            checks.update(bad)
    return cases, checks


#: Seconds one run of the suite may take before it is killed (its process group).
RUN_TIMEOUT = 3600


def run(fault: str | None, out: Path, pytest_args: list[str],
        timeout: float = RUN_TIMEOUT) -> tuple[int, dict | None, float]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if fault:
        env[ENV] = fault
    start = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-p", "vgf_conformance.selftest.inject", "-p", "no:cacheprovider",
               "-q", "--no-header", "--vgf-report", str(out), *pytest_args]
    try:
        proc = process.run(command, timeout=timeout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -1, None, time.monotonic() - start  # killed: no verdict
    report_file = out / "report.json"
    report = json.loads(report_file.read_text()) if report_file.is_file() else None
    if report is not None and report.get("partial"):
        report = None  # the run did not end: no verdict from it
    return proc.returncode, report, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance selftest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fault", action="append", choices=sorted(FAULTS), help="only these faults (repeatable)")
    parser.add_argument("--full", action="store_true", help="the full matrix, not the quick tier")
    parser.add_argument("--out", type=Path, help="where each run's report goes (default: a temporary directory)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    parser.add_argument("--timeout", type=float, default=RUN_TIMEOUT,
                        help=f"seconds one run may take before it is killed (default {RUN_TIMEOUT})")
    args = parser.parse_args(argv)
    if any(a.startswith("--snapshot-update") for a in args.pytest_args):
        parser.error("pytest_args: --snapshot-update would write the goldens of a faulted stack into the "
                     "golden directory; the self-test only compares with them")
    if args.timeout <= 0:
        parser.error(f"--timeout: expected a number of seconds above 0, got {args.timeout:g}")
    out = args.out or Path(tempfile.mkdtemp(prefix="vgf-selftest-"))
    pytest_args = ["-n", "auto", "vgf_conformance/test_cases.py", *([] if args.full else ["-m", "quick"]),
                   *args.pytest_args]
    status, report, seconds = run(None, out / "no-fault", pytest_args, args.timeout)
    if status != 0 or report is None:
        print(f"the run without a fault did not pass (exit {status}; report in {out / 'no-fault'}): "
              "fix that first", file=sys.stderr)
        return 2
    print(f"no fault: {len(report['cases'])} cases pass ({seconds:.0f} s); reports in {out}\n")
    print("| fault | layer | what it breaks | cases failed | checks that failed (cases) |")
    print("|---|---|---|---|---|")
    missed = []
    for name in args.fault or FAULTS:
        fault = get(name)
        status, report, seconds = run(name, out / name, pytest_args, args.timeout)
        if report is None:
            cell, checks_cell = f"no report (exit {status})", ""
            missed.append(name)
        else:
            cases, checks = caught(report)
            cell = f"{len(cases)} of {len(report['cases'])}"
            checks_cell = ", ".join(f"{test} ({n})" for test, n in sorted(checks.items())) or "**not caught**"
            if not cases:
                missed.append(name)
        print(f"| {name} | {fault.layer} | {fault.what} | {cell} | {checks_cell} |", flush=True)
    print(f"\n{len(FAULTS if not args.fault else args.fault) - len(missed)} caught"
          + (f"; not caught: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("selftest", "vgf_conformance.selftest")
