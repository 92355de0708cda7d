"""Benchmark of our own loop (a script, not a test): how long a contributor
waits. In one run, on this machine:

1. ``pytest -n WORKERS tests`` (the project's tests, expensive ones deselected
   as CI deselects them);
2. the quick tier (``pytest -n WORKERS vgf_conformance -m quick``);
3. the full matrix (``pytest -n WORKERS vgf_conformance``; ``--no-full`` skips it);
4. with ``--fresh-clone``: ``CI=true bash .ci/run`` in a fresh clone of HEAD,
   setup included (what CI measures).

Each with its wall time and its ten slowest tests (pytest's ``--durations``),
as Markdown. The targets (issue 42): tests <= 170 s, quick tier <= 60 s,
CI <= 10 min on 2 cores.

Usage: .venv/bin/python scripts/benchmark_loop.py [--workers 2] [--no-full] [--fresh-clone]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"tests": 170.0, "quick tier": 60.0, "CI (.ci/run, fresh clone)": 600.0}


def _summary(output: str) -> str:
    """pytest's last line of counts ("615 passed, 3 skipped in 426.1s")."""
    return next((line.strip("= ") for line in reversed(output.splitlines())
                 if re.search(r"\d+ (passed|failed|error)", line) and " in " in line), "")


def _timed(command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, str, int]:
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    return time.monotonic() - started, done.stdout + done.stderr, done.returncode


def _slowest(output: str, count: int = 10) -> list[str]:
    """The ``--durations`` lines pytest printed (seconds, phase, test)."""
    lines = re.findall(r"^(\d+\.\d+)s (call|setup|teardown) +(\S+)$", output, re.M)
    return [f"{float(s):7.1f} s  {phase:8}  {test}" for s, phase, test in lines[:count]]


def _pytest(name: str, workers: int, *args: str) -> dict:
    command = [sys.executable, "-m", "pytest", "-n", str(workers), "-p", "no:cacheprovider", "-q",
               "--durations=10", *args]
    seconds, output, code = _timed(command, REPO)
    return {"name": name, "seconds": seconds, "code": code, "summary": _summary(output), "slowest": _slowest(output)}


def _fresh_clone_ci() -> dict:
    with tempfile.TemporaryDirectory(prefix="vgf-bench-clone-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        seconds, output, code = _timed(["bash", ".ci/run"], clone, {"CI": "true"})
    return {"name": "CI (.ci/run, fresh clone)", "seconds": seconds, "code": code, "summary": _summary(output),
            "slowest": _slowest(output)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="xdist workers (default 2, as CI has)")
    parser.add_argument("--no-full", action="store_true", help="skip the full matrix")
    parser.add_argument("--fresh-clone", action="store_true", help="also time .ci/run in a fresh clone")
    args = parser.parse_args(argv)
    runs = [_pytest("tests", args.workers, "tests"),
            _pytest("quick tier", args.workers, "vgf_conformance", "-m", "quick")]
    if not args.no_full:
        runs.append(_pytest("full matrix", args.workers, "vgf_conformance"))
    if args.fresh_clone:
        runs.append(_fresh_clone_ci())
    print(f"| run ({args.workers} workers) | seconds | target | exit | pytest |")
    print("|---|---|---|---|---|")
    for run in runs:
        target = TARGETS.get(run["name"])
        verdict = "-" if target is None else f"<= {target:g} s: {'met' if run['seconds'] <= target else 'missed'}"
        print(f"| {run['name']} | {run['seconds']:.0f} | {verdict} | {run['code']} | {run['summary']} |")
    for run in runs:
        print(f"\n{run['name']}: the ten slowest\n" + "\n".join(run["slowest"]))
    return 0 if all(run["code"] == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
