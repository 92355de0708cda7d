"""Where the export time goes: profile ``export_model`` on cases of the table.

Exports each case in one process, the way ``vgf_conformance.harness.execution.runner.run_case``
does (``case.model()``, ``case.make_inputs()``, ``case.export_kwargs()``), after
one warm-up export so that imports and one-time costs show up apart. Prints

1. a table per case of ``ExportResult.stage_seconds`` (export, quantize,
   partition, lower, convert, serialize) and the total, as medians over
   ``--repeats`` exports of the case (and the min/max of the total);
2. the top functions by cumulative and by own time (cProfile), over the
   profiled exports (the warm-up is profiled apart, see ``--profile-warmup``);
   or, with ``--breakdown``, the wall seconds spent in named toolchain
   functions (torch.export, run_decompositions, the Arm TOSA pass pipeline,
   model-converter, to_executorch, fx recompiles, ...) without the profiler.

Or, with ``--report DIR``, where a whole run's time went, from its report
(``report.json`` of ``--vgf-report``): seconds per tier (summed over workers),
per stage of the cases' runs, per op family, the slowest cases and tests
that are not per case, and when each worker finished (the tail of the run).

Usage: .venv/bin/python scripts/profile_export.py --report DIR [--top N]
       .venv/bin/python scripts/profile_export.py [CASE_ID ...] [--repeats N]
       [--top N] [--prof out.prof] [--no-profile] [--json out.json]
       [--warmup CASE_ID] [--profile-warmup] [--sort cumulative,tottime]
       [--disable-patch NAME ...]   (e.g. to measure what one patch of
                                     vgf_export.patches saves)
       [--breakdown]   (wall seconds in named toolchain functions, no profiler)

The timings are wall seconds on a shared machine: compare medians over
repeats, and run the script with ``--no-profile`` for stage timings without
the profiler's overhead (cProfile roughly doubles Python-heavy stages). The
``cpu`` column (this process's CPU seconds plus its waited-for children's, i.e.
model-converter) is less disturbed by other load than wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

#: A handful of diverse cases: a bilinear resize, a nearest resize, a split
#: downscale, grid_sample with an int16 grid (RGBA and RGB), a composite flow
#: warp, conv-resize-conv, and a PT2E-off (float) export.
DEFAULT_CASES = (
    "resize-bilinear-ac0-up2-int8io",
    "resize-nearest-down3-int8io",
    "resize-bilinear-ac0-down32-int8io",
    "grid-rgba-bilinear-zeros-ac0-identity-int8io",
    "grid-rgb-bilinear-border-ac0-rotation-int8io",
    "flow-warp-rgb-border-int8io",
    "conv-resize-conv-up2-int8io",
    "resize-bilinear-ac0-up2-fp",
)
STAGE_COLUMNS = ("export", "quantize", "partition", "lower", "convert", "serialize")


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def export_case(case, root: Path, tag: str):
    """Export ``case`` as run_case does; returns (ExportResult, wall seconds,
    CPU seconds)."""
    from vgf_export import export_model

    inputs = case.make_inputs()
    kwargs = case.export_kwargs()
    start, cpu = time.perf_counter(), _cpu_seconds()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = export_model(case.model(), inputs, artifacts_root=root / tag, **kwargs)
    return result, time.perf_counter() - start, _cpu_seconds() - cpu


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


#: --breakdown: toolchain functions timed (inclusive wall seconds, no profiler),
#: as (label, module, attribute path). Nested labels overlap (the Arm TOSA
#: pipeline and model-converter run inside "to_edge_transform_and_lower").
BREAKDOWN = (
    ("torch.export.export", "torch.export", "export"),
    ("quantize (prepare, calibrate, convert)",
     "executorch.backends.arm.quantizer.arm_quantizer", "TOSAQuantizer._quantize_with_submodules"),
    ("to_edge_transform_and_lower", "vgf_export.export", "to_edge_transform_and_lower"),
    ("  run_decompositions", "torch.export.exported_program", "ExportedProgram.run_decompositions"),
    ("  _generate_edge_program", "executorch.exir.program._program", "_generate_edge_program"),
    ("  VGF partition", "vgf_export.partitioner", "VgfPartitionerWrapper.partition"),
    ("  VGF preprocess", "executorch.backends.arm.vgf.backend", "VgfBackend.preprocess"),
    ("    Arm TOSA pass pipeline", "executorch.backends.arm._passes.arm_pass_manager",
     "ArmPassManager.transform_to_backend_pipeline"),
    ("    model-converter (child process)", "executorch.backends.arm.vgf.backend", "vgf_compile"),
    ("EdgeProgramManager.to_backend (VGF, grid sampler)", "executorch.exir.program._program",
     "EdgeProgramManager.to_backend"),
    ("to_executorch (serialize)", "executorch.exir.program._program", "EdgeProgramManager.to_executorch"),
    ("fx GraphModule.recompile", "torch.fx.graph_module", "GraphModule.recompile"),
)


def install_breakdown(spent: dict[str, list[float]]) -> None:
    """Wrap the BREAKDOWN functions with timers adding to ``spent[label]``
    ([wall seconds, calls, CPU seconds]); recursive calls count once."""
    import functools
    import importlib

    for label, module_name, path in BREAKDOWN:
        owner = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        raw = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        is_static = isinstance(raw, staticmethod)
        real = raw.__func__ if is_static else raw
        spent[label] = [0.0, 0, 0.0]
        depth = [0]

        def timed(*args, __real=real, __label=label, __depth=depth, **kwargs):
            if __depth[0]:
                return __real(*args, **kwargs)
            __depth[0] += 1
            start, cpu = time.perf_counter(), _cpu_seconds()
            try:
                return __real(*args, **kwargs)
            finally:
                __depth[0] -= 1
                counter = spent[__label]
                counter[0] += time.perf_counter() - start
                counter[1] += 1
                counter[2] += _cpu_seconds() - cpu

        functools.update_wrapper(timed, real)
        setattr(owner, name, staticmethod(timed) if is_static else timed)


def stage_table(rows: dict[str, list[dict[str, float]]]) -> str:
    """Median seconds per stage per case; ``rows[case]`` is one dict a repeat."""
    header = ["case", "n", *STAGE_COLUMNS, "other", "total", "cpu", "total min", "total max"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = (*STAGE_COLUMNS, "other", "total", "cpu")
    columns: dict[str, list[float]] = {c: [] for c in shown}
    for case_id, repeats in rows.items():
        medians = {}
        for column in shown:
            values = [r[column] for r in repeats if column in r]
            medians[column] = statistics.median(values) if values else None
            if medians[column] is not None:
                columns[column].append(medians[column])
        totals = [r["total"] for r in repeats]
        lines.append("| " + " | ".join(
            [case_id, str(len(repeats)), *(_fmt(medians[c]) for c in shown),
             _fmt(min(totals)), _fmt(max(totals))]) + " |")
    lines.append("| **median over cases** | | " + " | ".join(
        _fmt(statistics.median(columns[c])) if columns[c] else "" for c in shown)
        + " | | |")
    lines.append("| **sum over cases** | | " + " | ".join(
        _fmt(sum(columns[c])) if columns[c] else "" for c in shown) + " | | |")
    return "\n".join(lines)


def top_functions(profile: cProfile.Profile, sort: str, top: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.strip_dirs().sort_stats(sort).print_stats(top)
    return out.getvalue()


def report_profile(directory: Path, top: int) -> str:
    """Where a run's time went, from its report.json (see the module docstring)."""
    report = json.loads((directory / "report.json").read_text())
    run = report.get("run") or {}
    lines = [f"# where the time went: {directory / 'report.json'} ({len(report['cases'])} cases, "
             f"{run.get('wall_seconds', 0):.0f} s wall)", ""]
    tiers = run.get("tiers") or {}
    total = sum(t["seconds"] for t in tiers.values()) or 1.0
    lines += ["## per tier (seconds summed over workers)", "", "| tier | tests | seconds | share |", "|---|---|---|---|"]
    lines += [f"| {tier} | {t['tests']} | {t['seconds']:.1f} | {t['seconds'] / total:.0%} |"
              for tier, t in sorted(tiers.items(), key=lambda kv: -kv[1]["seconds"])]
    stages: dict[str, list[float]] = {}
    families: dict[str, list[float]] = {}
    per_case = []
    for case in report["cases"]:
        seconds = case["run"].get("seconds") or {}
        for stage, value in seconds.items():
            stages.setdefault(stage, []).append(value)
        spent = sum((case["run"].get("tests_seconds") or {}).values()) or sum(
            seconds.get(k, 0.0) for k in ("export_total", "numerics", "golden", "vulkan"))
        families.setdefault(f"{case['family']}{' (quick)' if case.get('quick') else ''}", []).append(spent)
        per_case.append((spent, case["id"], case["run"].get("tests_seconds") or seconds))
    lines += ["", "## per stage of the cases' runs", "", "| stage | cases | mean s | max s | total s |",
              "|---|---|---|---|---|"]
    lines += [f"| {stage} | {len(v)} | {statistics.mean(v):.3f} | {max(v):.2f} | {sum(v):.1f} |"
              for stage, v in sorted(stages.items(), key=lambda kv: -sum(kv[1]))]
    lines += ["", "## per op family (seconds of the cases' tests)", "", "| family | cases | mean s | total s |",
              "|---|---|---|---|"]
    lines += [f"| {family} | {len(v)} | {statistics.mean(v):.2f} | {sum(v):.1f} |"
              for family, v in sorted(families.items(), key=lambda kv: -sum(kv[1]))]
    lines += ["", f"## the {top} slowest cases", "", "| case | seconds | where |", "|---|---|---|"]
    for spent, case_id, parts in sorted(per_case, reverse=True)[:top]:
        where = ", ".join(f"{k.removeprefix('test_')} {v:.1f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:4])
        lines.append(f"| {case_id} | {spent:.1f} | {where} |")
    others = run.get("other_tests") or {}
    if others:
        lines += ["", "## tests that are not per case", "", "| test | seconds |", "|---|---|"]
        lines += [f"| {nodeid} | {seconds:.1f} |" for nodeid, seconds in sorted(others.items(), key=lambda kv: -kv[1])]
    workers = run.get("workers") or {}
    if workers:
        lines += ["", "## workers (a worker that ends early waited for the others)", "",
                  "| worker | tests | seconds in tests | last test ended at |", "|---|---|---|---|"]
        lines += [f"| {w} | {e['tests']} | {e['seconds']:.1f} | {e['last_end']:.1f} s |" for w, e in workers.items()]
    memory = run.get("memory") or {}
    if memory:
        lines += ["", "peak memory: " + ", ".join(
            f"{w} {m['rss_mib']:.0f} MiB (child {m['children_rss_mib']:.0f} MiB)" for w, m in memory.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help=f"case ids (default: {', '.join(DEFAULT_CASES)})")
    parser.add_argument("--report", type=Path, default=None, metavar="DIR",
                        help="instead: where a run's time went, from DIR/report.json (--vgf-report DIR)")
    parser.add_argument("--repeats", type=int, default=1, help="exports of each case (default 1)")
    parser.add_argument("--warmup", default=None,
                        help="case id of the warm-up export (default: the first case)")
    parser.add_argument("--top", type=int, default=30, help="functions listed per ordering")
    parser.add_argument("--sort", default="cumulative,tottime",
                        help="pstats orderings to print, comma separated")
    parser.add_argument("--prof", type=Path, default=None, help="write the profile (.prof) here")
    parser.add_argument("--no-profile", action="store_true", help="timings only, no cProfile")
    parser.add_argument("--profile-warmup", action="store_true",
                        help="also print the warm-up's own top functions")
    parser.add_argument("--json", type=Path, default=None, help="write the per-repeat timings here")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time named toolchain functions (no profiler; implies --no-profile)")
    parser.add_argument("--no-speed-patches", action="store_true",
                        help="export without the suite's speed patches (vgf_conformance/speed_patches.py), "
                             "as vgf_export alone does; by default they are on, as in the suite's runs")
    parser.add_argument("--disable-patch", action="append", default=[], metavar="NAME",
                        help="keep this patch of vgf_export.patches off (repeatable)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write artifacts here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.report is not None:
        if not (args.report / "report.json").is_file():
            parser.error(f"--report: no report.json in {args.report}")
        print(report_profile(args.report, args.top if args.top != 30 else 10))
        return 0

    os.environ.setdefault("PYTHONHASHSEED", "0")
    start = time.perf_counter()
    import torch  # noqa: F401

    from vgf_conformance.cases import CASES
    import vgf_export  # noqa: F401

    import_seconds = time.perf_counter() - start
    from vgf_export import patches

    if not args.no_speed_patches:  # as the suite's case runner exports
        from vgf_conformance import speed_patches

        speed_patches.enable()
    for name in args.disable_patch:
        patches.disable_patch(name)
    ids = args.cases or list(DEFAULT_CASES)
    unknown = [i for i in ids if i not in CASES]
    if unknown:
        parser.error(f"unknown case ids: {unknown}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="profile_export_"))

    print(f"# export profile: {len(ids)} cases x {args.repeats} repeats, "
          f"pid {os.getpid()}, artifacts in {root}\n")
    print(f"imports (torch, vgf_conformance.cases, vgf_export): {import_seconds:.2f} s")

    warm_id = args.warmup or ids[0]
    warm_profile = cProfile.Profile() if args.profile_warmup else None
    if warm_profile:
        warm_profile.enable()
    warm, warm_wall, warm_cpu = export_case(CASES[warm_id], root, "_warmup")
    if warm_profile:
        warm_profile.disable()
    print(f"patches: {', '.join(patches.applied_patches())}"
          + (f" (disabled: {', '.join(args.disable_patch)})" if args.disable_patch else ""))
    print(f"warm-up export ({warm_id}): {warm_wall:.2f} s wall, {warm_cpu:.2f} s cpu, stages "
          + ", ".join(f"{k} {v:.2f}" for k, v in warm.stage_seconds.items()))

    breakdown: dict[str, list[float]] = {}
    per_case_breakdown: dict[str, list[dict[str, float]]] = {i: [] for i in ids}
    if args.breakdown:
        args.no_profile = True
        install_breakdown(breakdown)
    profile = None if args.no_profile else cProfile.Profile()
    rows: dict[str, list[dict[str, float]]] = {i: [] for i in ids}
    for repeat in range(args.repeats):
        for case_id in ids:
            for counter in breakdown.values():
                counter[:] = [0.0, 0, 0.0]
            if profile:
                profile.enable()
            try:
                result, wall, cpu = export_case(CASES[case_id], root, f"{case_id}.{repeat}")
            finally:
                if profile:
                    profile.disable()
            row = dict(result.stage_seconds)
            row["total"], row["cpu"] = wall, cpu
            row["other"] = wall - sum(result.stage_seconds.values())
            rows[case_id].append(row)
            if breakdown:
                per_case_breakdown[case_id].append(
                    {label: seconds for label, (seconds, _, _) in breakdown.items()}
                    | {f"{label} calls": calls for label, (_, calls, _) in breakdown.items()}
                    | {f"{label} cpu": cpu for label, (_, _, cpu) in breakdown.items()})

    print("\n## seconds per stage (median over repeats"
          + (", under cProfile" if profile else "") + ")\n")
    print(stage_table(rows))
    if breakdown:
        print("\n## where the time goes (inclusive seconds a case: median over repeats, "
              "then median and sum over cases; cpu includes waited-for children)\n")
        print("| function | calls a case | median wall s | sum wall s | median cpu s | sum cpu s |\n"
              "|---|---|---|---|---|---|")

        def column(key: str) -> list[float]:
            return [statistics.median(r[key] for r in reps) for reps in per_case_breakdown.values()]

        for label in breakdown:
            wall, calls, cpu = column(label), column(f"{label} calls"), column(f"{label} cpu")
            print(f"| {label} | {min(calls):g}-{max(calls):g} | {statistics.median(wall):.3f} | "
                  f"{sum(wall):.3f} | {statistics.median(cpu):.3f} | {sum(cpu):.3f} |")
    if args.json:
        args.json.write_text(json.dumps({
            "warmup": {warm_id: warm.stage_seconds | {"total": warm_wall, "cpu": warm_cpu}},
            "patches": patches.applied_patches(), "disabled": args.disable_patch,
            "cases": rows, "breakdown": per_case_breakdown}, indent=1))

    if warm_profile:
        print("\n## warm-up: top functions by cumulative time\n")
        print(top_functions(warm_profile, "cumulative", args.top))
    if profile:
        for sort in args.sort.split(","):
            print(f"\n## top {args.top} functions by {sort} time (all profiled exports)\n")
            print(top_functions(profile, sort.strip(), args.top))
        if args.prof:
            profile.dump_stats(str(args.prof))
            print(f"profile written to {args.prof}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
