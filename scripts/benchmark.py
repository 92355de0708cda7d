"""Benchmark of the conformance suite (a script, not a test).

Measures, and prints as Markdown:

1. the suite's wall time with ``-n auto`` (the full matrix, or ``--quick``);
2. each stage's seconds per case (mean, max, total), from the run's report;
3. that every case was exported exactly once (one artifacts directory and one
   ``program.pte`` per case, and the export refuses to overwrite);
4. the harness's overhead: the same cases run by the suite on one worker,
   minus the numerics tier, against calling ``export_model`` directly.

Usage: .venv/bin/python scripts/benchmark.py [--quick] [--overhead-cases N] [--out DIR]
       [--vulkan-batch N]   (1: every case in its own Vulkan runner process)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def run_suite(out: Path, extra: list[str]) -> tuple[float, dict]:
    report_dir, artifacts = out / "report", out / "artifacts"
    cmd = [PYTHON, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
           "--vgf-report", str(report_dir), "--vgf-artifacts", str(artifacts), *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    summary = [l for l in proc.stdout.splitlines() if " passed" in l or " failed" in l]
    print(f"$ {' '.join(cmd[2:])}\n  exit {proc.returncode}: {summary[-1] if summary else proc.stdout[-500:]}")
    return wall, json.loads((report_dir / "report.json").read_text())


def stage_table(report: dict) -> str:
    per_stage: dict[str, list[float]] = defaultdict(list)
    for case in report["cases"]:
        for stage, seconds in case["run"]["seconds"].items():
            per_stage[stage].append(seconds)
    rows = ["| stage | cases | mean s | max s | total s |", "|---|---|---|---|---|"]
    for stage, values in sorted(per_stage.items(), key=lambda kv: -sum(kv[1])):
        rows.append(f"| {stage} | {len(values)} | {statistics.mean(values):.3f} | "
                    f"{max(values):.3f} | {sum(values):.1f} |")
    return "\n".join(rows)


def exported_once(report: dict, artifacts: Path) -> str:
    ids = [c["id"] for c in report["cases"]]
    programs = {p.parent.name for p in artifacts.glob("*/program.pte")}
    missing = [i for i in ids if i not in programs and i]
    dirs = sorted(p.name for p in artifacts.iterdir() if p.is_dir() and not p.name.startswith("_"))
    return (f"{len(ids)} cases in the report, {len(dirs)} artifact directories, "
            f"{len(programs)} programs; duplicates: {len(dirs) - len(set(dirs))}; "
            f"cases without a program (failed before serialize): {len(missing)}")


BARE = """
import sys, time, json, tempfile
from pathlib import Path
from conformance.cases import CASES
from vgf_export import export_model
ids = json.loads(sys.argv[1])
root = Path(tempfile.mkdtemp())
times = {}
for cid in ids:
    case = CASES[cid]
    start = time.perf_counter()
    export_model(case.model(), case.make_inputs(), artifacts_root=root / cid, **case.export_kwargs())
    times[cid] = time.perf_counter() - start
print(json.dumps(times))
"""


def overhead(ids: list[str], out: Path, repeat: int) -> str:
    """Bare exports and the suite, alternately, ``repeat`` times each; the
    fastest of each (export times on a shared machine vary by 15% run to run)."""
    runs = []
    expr = " or ".join(ids)
    for i in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run([PYTHON, "-c", BARE, json.dumps(ids)], cwd=REPO, capture_output=True,
                              text=True, check=True)
        bare_wall = time.perf_counter() - start
        bare_total = sum(json.loads(proc.stdout.strip().splitlines()[-1]).values())
        wall, report = run_suite(out / f"overhead-{i}", ["-n", "0", "-k", expr])
        seconds = lambda key: sum(c["run"]["seconds"].get(key, 0.0) for c in report["cases"])  # noqa: E731
        tiers = seconds("numerics") + seconds("vulkan")
        runs.append((bare_wall, bare_total, wall, tiers, seconds("export_total")))
    bare_wall, bare_total = min(r[0] for r in runs), min(r[1] for r in runs)
    harness, in_suite = min(r[2] - r[3] for r in runs), min(r[4] for r in runs)
    each = ", ".join(f"{100 * ((r[2] - r[3]) / r[0] - 1):+.1f}%" for r in runs)
    return (
        f"{len(ids)} cases, one process each way, fastest of {repeat}.\n"
        f"- bare export_model: {bare_total:.1f} s of exports ({bare_wall:.1f} s wall with imports)\n"
        f"- the same exports inside the suite: {in_suite:.1f} s "
        f"({100 * (in_suite / bare_total - 1):+.1f}%)\n"
        f"- harness (suite wall minus the numerics and Vulkan tiers) over bare wall, both with "
        f"interpreter start and imports: {harness:.1f} s vs {bare_wall:.1f} s = "
        f"{100 * (harness / bare_wall - 1):+.1f}% (each pair: {each})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the quick tier")
    parser.add_argument("--workers", default="auto", help="pytest -n value (default auto)")
    parser.add_argument("--overhead-cases", type=int, default=12,
                        help="cases for the overhead measurement (0: skip it)")
    parser.add_argument("--overhead-repeat", type=int, default=3,
                        help="bare/suite pairs of the overhead measurement (the fastest counts)")
    parser.add_argument("--out", type=Path, default=None, help="keep reports and artifacts here")
    parser.add_argument("--vulkan-batch", type=int, default=None,
                        help="--vgf-vulkan-batch of the suite run (default: the suite's)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="vgf-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    extra = ["-n", args.workers] + (["-m", "quick"] if args.quick else [])
    if args.vulkan_batch is not None:
        extra += ["--vgf-vulkan-batch", str(args.vulkan_batch)]
    wall, report = run_suite(out / "suite", extra)
    outcomes = defaultdict(int)
    for case in report["cases"]:
        outcomes[case["outcome"]] += 1
    batch = f", --vgf-vulkan-batch {args.vulkan_batch}" if args.vulkan_batch is not None else ""
    print(f"\n## Suite: {'quick tier' if args.quick else 'full matrix'}, -n {args.workers}{batch}\n")
    print(f"wall {wall:.1f} s for {len(report['cases'])} cases; outcomes {dict(outcomes)}\n")
    print(stage_table(report))
    print(f"\nexported once: {exported_once(report, out / 'suite' / 'artifacts')}")
    if args.overhead_cases:
        ids = [c["id"] for c in report["cases"] if c["outcome"] == "passed"][: args.overhead_cases]
        print("\n## Harness overhead\n")
        print(overhead(ids, out, args.overhead_repeat))
    print(f"\n(reports and artifacts in {out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
