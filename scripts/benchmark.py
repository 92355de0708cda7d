"""Benchmark of the conformance suite (a script, not a test): every speed target
of the suite, measured, as a Markdown table (target, measured, pass/fail).

1. the full matrix's wall time with ``-n auto`` (every tier; skipped with
   ``--quick``), and the quick tier's (``-m quick``);
2. each stage's seconds per case (mean, max, total) and each tier's seconds,
   from the run's report (``report.json``: ``run.seconds`` per case,
   ``run.tiers``);
3. that every case was exported exactly once (one artifacts directory per
   case in one shared ``--vgf-artifacts`` root, where a second export of a
   case would fail because the export never overwrites, and no case's tests
   on two workers);
4. the harness's overhead: the same cases run by the suite on one worker,
   its export tier (``run.tiers``: the case's run minus its numerics and
   golden, and the export and delegation tests) against calling
   ``export_model`` directly; and whole processes (interpreter, imports,
   collection) beside it;
5. peak memory: the resident-set high-water mark of each xdist worker and of
   the largest child process it waited for (``run.memory``, from
   ``getrusage``);
6. with ``--shards 2,4``: shards of the quick tier (``-m quick --vgf-shard
   I/N``; ``--shards-of full``: of the full matrix, as the nightly shards it)
   run one after the other, each with ``-n auto`` as a CI machine would:
   their predicted seconds (vgf_conformance/durations.json) and measured wall
   and test seconds, and the spread between the longest and shortest.

Usage: .venv/bin/python scripts/benchmark.py [--quick] [--shards 2,4] [--shards-of quick|full]
       [--overhead-cases N] [--out DIR] [--vulkan-batch N] [--workers N]
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
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))
PYTHON = sys.executable

#: The targets of the suite (issue "Speed at scale").
FULL_WALL_S = 600.0
QUICK_WALL_S = 60.0
EXPORT_MEAN_S = 1.2
OVERHEAD_PCT = 5.0
MEMORY_MIB = 2048.0
SHARD_SPREAD = 0.10


class Run:
    """One pytest run of the suite: wall seconds, its report, its output.
    ``start=False`` only starts it (:meth:`wait` ends it): runs side by side."""

    def __init__(self, out: Path, extra: list[str], start: bool = True) -> None:
        self.report_dir, self.artifacts = out / "report", out / "artifacts"
        self.cmd = [PYTHON, "-m", "pytest", "vgf_conformance", "-q", "-p", "no:cacheprovider",
                    "--vgf-report", str(self.report_dir), "--vgf-artifacts", str(self.artifacts), *extra]
        out.mkdir(parents=True, exist_ok=True)
        self.log = out / "pytest.log"
        self.start = time.perf_counter()
        with self.log.open("w") as log:  # a file, not a pipe: runs side by side never block on output
            self.proc = subprocess.Popen(self.cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
        if start:
            self.wait()

    def wait(self) -> "Run":
        self.proc.wait()
        self.wall = time.perf_counter() - self.start
        stdout = self.stdout = self.log.read_text()
        summary = [line for line in stdout.splitlines() if " passed" in line or " failed" in line]
        print(f"$ {' '.join(self.cmd[2:])}\n  exit {self.proc.returncode} in {self.wall:.1f} s: "
              f"{summary[-1] if summary else stdout[-1000:]}")
        self.report = json.loads((self.report_dir / "report.json").read_text())
        self.run = self.report.get("run") or {}
        return self

    def tier_seconds(self, *tiers: str) -> float:
        return sum(entry["seconds"] for tier, entry in self.run.get("tiers", {}).items() if tier in tiers)


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


def tier_table(run: Run) -> str:
    tiers = run.run.get("tiers", {})
    total = sum(t["seconds"] for t in tiers.values()) or 1.0
    rows = ["| tier | tests | seconds (all workers) | share |", "|---|---|---|---|"]
    rows += [f"| {tier} | {t['tests']} | {t['seconds']:.1f} | {t['seconds'] / total:.0%} |"
             for tier, t in sorted(tiers.items(), key=lambda kv: -kv[1]["seconds"])]
    workers = run.run.get("workers", {})
    if workers:
        rows += ["", "| worker | tests | seconds in tests | last test ended at |", "|---|---|---|---|"]
        rows += [f"| {w} | {e['tests']} | {e['seconds']:.1f} | {e['last_end']:.1f} s |" for w, e in workers.items()]
    return "\n".join(rows)


def exported_once(run: Run) -> tuple[bool, str]:
    ids = [c["id"] for c in run.report["cases"]]
    dirs = {p.name for p in run.artifacts.iterdir() if p.is_dir() and not p.name.startswith("_")}
    programs = {p.parent.name for p in run.artifacts.glob("*/program.pte")}
    refused = [c["id"] for c in run.report["cases"] if "FileExistsError" in (c.get("error") or "")]
    split = "exported more than once" in run.stdout
    ok = set(ids) == dirs and not refused and not split
    return ok, (f"{len(ids)} cases, {len(dirs)} artifact directories, {len(programs)} programs; "
                f"second exports refused: {len(refused)}; cases on two workers: {'yes' if split else 'none'}")


def peak_memory(runs: list[Run]) -> tuple[float, float, str]:
    worker = child = 0.0
    for run in runs:
        for peak in run.run.get("memory", {}).values():
            worker, child = max(worker, peak["rss_mib"]), max(child, peak["children_rss_mib"])
    return worker, child, f"worker {worker:.0f} MiB, largest child process {child:.0f} MiB"


BARE = """
import sys, time, json, tempfile
from pathlib import Path
from vgf_conformance.cases import CASES
from vgf_export import export_model
from vgf_conformance.harness.execution.runner import tune_gc
from vgf_conformance.speed_patches import enable
enable()  # as the suite's exports do
tune_gc()  # as the suite's processes do after collection: like for like
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


def overhead(ids: list[str], out: Path, repeat: int) -> tuple[float, str]:
    """Bare exports and the suite (one process, ``-n 0``), alternately,
    ``repeat`` times each; the fastest of each (export times on a shared
    machine vary by 15 % run to run). The target is per case: the suite's
    export tier (the case's run as its first test's setup builds it, minus
    its numerics and golden, plus the export and delegation tests) against
    ``export_model`` alone. Also shown: whole processes, with interpreter
    start, imports and collection, without the report writing at the end."""
    runs = []
    expr = " or ".join(ids)
    for i in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run([PYTHON, "-c", BARE, json.dumps(ids)], cwd=REPO, capture_output=True,
                              text=True, check=True)
        bare_wall = time.perf_counter() - start
        bare_total = sum(json.loads(proc.stdout.strip().splitlines()[-1]).values())
        suite = Run(out / f"overhead-{i}", ["-n", "0", "-k", expr, "--vgf-progress", "0"])
        export_tier = suite.tier_seconds("export", "delegation")
        other_tiers = suite.tier_seconds("numerics", "golden", "pte", "vulkan")
        ends = [w["last_end"] for w in suite.run.get("workers", {}).values()] or [suite.run.get("wall_seconds", 0.0)]
        writing = max(0.0, suite.run.get("wall_seconds", 0.0) - max(ends))  # the report, after the last test
        runs.append((bare_wall, bare_total, suite.wall - other_tiers - writing, export_tier))
    bare_wall, bare_total = min(r[0] for r in runs), min(r[1] for r in runs)
    harness_wall, export_tier = min(r[2] for r in runs), min(r[3] for r in runs)
    pct = 100 * (export_tier / bare_total - 1)
    each = ", ".join(f"{100 * (r[3] / r[1] - 1):+.1f}%" for r in runs)
    return pct, (
        f"{len(ids)} cases, one process each way, fastest of {repeat}.\n"
        f"- bare export_model: {bare_total:.1f} s of exports\n"
        f"- the suite's export tier on the same cases: {export_tier:.1f} s = {pct:+.1f}% (each pair: {each})\n"
        f"- whole processes (interpreter, imports, collection; the suite without its other tiers and "
        f"its report writing): {harness_wall:.1f} s against {bare_wall:.1f} s = "
        f"{100 * (harness_wall / bare_wall - 1):+.1f}%")


def shards(counts: list[int], out: Path, workers: str, select: list[str],
           side_by_side: bool, tier: str = "quick") -> list[tuple[str, str, bool]]:
    """The quick tier (``tier="full"``: the whole matrix) as N shards, one
    after the other (each with ``-n workers``, as on its own CI machine), or
    side by side (each with one worker, so that all see the same load of a
    shared machine): predicted and measured."""
    from vgf_conformance.cases import CASES
    from vgf_conformance.harness.schedule import durations

    seconds = durations.load(None).restricted(CASES)
    rows = []
    how = "side by side, one worker each" if side_by_side else f"one after the other, -n {workers} each"
    which = ["-m", "quick"] if tier == "quick" else []
    print(f"\n## Shards of the {tier} {'tier' if tier == 'quick' else 'matrix'} "
          f"({' '.join(which + ['--vgf-shard I/N'])}, {how})\n")
    print("| shards | shard | cases | predicted s | wall s | seconds in tests |\n|---|---|---|---|---|---|")
    for count in counts:
        predicted, walls, busy = [], [], []
        started = [Run(out / f"shards-{tier}-{count}-{index}",
                       ["-n", "1" if side_by_side else workers, *which, "--vgf-shard", f"{index}/{count}",
                        "--vgf-progress", "0", *select], start=not side_by_side)
                   for index in range(1, count + 1)]
        while side_by_side and any(run.proc.poll() is None for run in started):
            time.sleep(0.2)  # each run's wall ends when it does, not when it is waited for
            for run in started:
                if run.proc.poll() is not None and not hasattr(run, "wall"):
                    run.wait()
        for index, run in enumerate(started, 1):
            if not hasattr(run, "wall"):
                run.wait()
            members = [c["id"] for c in run.report["cases"]]
            others = [nodeid.split("@")[0] for nodeid in run.run.get("other_tests", {})]  # the ledger's tests
            predicted.append(sum(seconds(c) for c in members) + sum(seconds(o) for o in others))
            walls.append(run.wall)
            busy.append(sum(t["seconds"] for t in run.run.get("tiers", {}).values()))
            print(f"| {count} | {index} | {len(members)} | {predicted[-1]:.1f} | {walls[-1]:.1f} | {busy[-1]:.1f} |")
        spread = lambda values: (max(values) - min(values)) / max(values)  # noqa: E731
        ok = spread(predicted) <= SHARD_SPREAD and spread(walls) <= SHARD_SPREAD
        rows.append((f"{count} shards within {SHARD_SPREAD:.0%} ({tier}, {how}; predicted / wall / in tests)",
                     f"{spread(predicted):.1%} / {spread(walls):.1%} / {spread(busy):.1%}", ok))
    return rows


def measure_runs(args, out: Path, common: list[str], targets: list) -> None:
    """The quick tier (and the full matrix): every target but the shards."""
    quick = Run(out / "quick", [*common, "-m", "quick"])
    runs = [quick]
    full = None if args.quick else Run(out / "full", common)
    if full is not None:
        runs.append(full)
        targets.append((f"full matrix wall, -n {args.workers} (<= {FULL_WALL_S:.0f} s)",
                        f"{full.wall:.0f} s ({len(full.report['cases'])} cases)", full.wall <= FULL_WALL_S))
    else:
        targets.append((f"full matrix wall (<= {FULL_WALL_S:.0f} s)", "not measured (--quick)", None))
    targets.append((f"quick tier wall, -n {args.workers} (<= {QUICK_WALL_S:.0f} s)",
                    f"{quick.wall:.1f} s ({len(quick.report['cases'])} cases)", quick.wall <= QUICK_WALL_S))
    main_run = full or quick
    exports = [c["run"]["seconds"]["export_total"] for c in main_run.report["cases"]
               if "export_total" in c["run"].get("seconds", {})]
    mean = statistics.mean(exports)
    targets.append((f"export mean per case (<= {EXPORT_MEAN_S} s)",
                    f"{mean:.2f} s (max {max(exports):.2f} s, {'full matrix' if full else 'quick tier'}, "
                    f"under -n {args.workers})", mean <= EXPORT_MEAN_S))
    for run in runs:
        ok, text = exported_once(run)
        targets.append((f"every case exported exactly once ({'full' if run is full else 'quick'})", text, ok))
    worker, child, text = peak_memory(runs)
    targets.append((f"peak memory per worker (<= {MEMORY_MIB:.0f} MiB)", text, max(worker, child) <= MEMORY_MIB))

    for run, name in ((quick, "quick tier"), (full, "full matrix")):
        if run is None:
            continue
        print(f"\n## {name}, -n {args.workers}: {run.wall:.1f} s wall\n")
        print(stage_table(run.report))
        print()
        print(tier_table(run))
    if args.overhead_cases:
        ids = [c["id"] for c in main_run.report["cases"] if c["outcome"] == "passed"][: args.overhead_cases]
        pct, text = overhead(ids, out, args.overhead_repeat)
        print("\n## Harness overhead\n")
        print(text)
        targets.append((f"harness overhead over bare export_model (<= {OVERHEAD_PCT:.0f} %)",
                        f"{pct:+.1f} % ({len(ids)} cases)", pct <= OVERHEAD_PCT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the quick tier (no full matrix)")
    parser.add_argument("--workers", default="auto", help="pytest -n value (default auto)")
    parser.add_argument("--overhead-cases", type=int, default=16,
                        help="cases for the overhead measurement (0: skip it)")
    parser.add_argument("--overhead-repeat", type=int, default=3,
                        help="bare/suite pairs of the overhead measurement (the fastest counts)")
    parser.add_argument("--shards", default="", help="shard counts to measure on the quick tier, e.g. 2,4")
    parser.add_argument("--shards-of", choices=("quick", "full"), default="quick",
                        help="what --shards splits: the quick tier (default) or the full matrix")
    parser.add_argument("--side-by-side", action="store_true",
                        help="run a count's shards at the same time, one worker each (a shared machine)")
    parser.add_argument("--skip-quick", action="store_true",
                        help="no quick-tier run (e.g. only --shards); its targets are not measured")
    parser.add_argument("--out", type=Path, default=None, help="keep reports and artifacts here")
    parser.add_argument("--vulkan-batch", type=int, default=None,
                        help="--vgf-vulkan-batch of the suite runs (default: the suite's)")
    parser.add_argument("-k", dest="select", default=None,
                        help="only cases matching this -k expression (a trial of the script, not the targets)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="vgf-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    common = ["-n", args.workers] + ([] if args.vulkan_batch is None else ["--vgf-vulkan-batch", str(args.vulkan_batch)])
    common += [] if args.select is None else ["-k", args.select]
    targets: list[tuple[str, str, bool | None]] = []

    if not args.skip_quick:
        measure_runs(args, out, common, targets)
    if args.shards:
        targets += shards([int(n) for n in args.shards.split(",")], out, args.workers,
                          [] if args.select is None else ["-k", args.select], args.side_by_side, args.shards_of)

    print("\n## Targets\n")
    print("| target | measured | result |\n|---|---|---|")
    for target, measured, ok in targets:
        print(f"| {target} | {measured} | {'n/a' if ok is None else 'pass' if ok else '**FAIL**'} |")
    print(f"\n(reports and artifacts in {out})")
    return 0 if all(ok is not False for _, _, ok in targets) else 1


if __name__ == "__main__":
    raise SystemExit(main())
