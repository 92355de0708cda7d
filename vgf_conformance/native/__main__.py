"""``python -m vgf_conformance native``: every grid_sample case (and the flow-warp
composites) exported ExecuTorch's own way, run on Vulkan, next to the project's path.

    python -m vgf_conformance native [--cases ID_OR_GLOB ...] [--out DIR] [--doc PATH]

Each case runs in a worker child (:mod:`vgf_conformance.native.worker`) with a
timeout; a case that hangs or crashes it fails alone. Writes
``DIR/results.json`` and ``DIR/results.md``; ``--doc`` also writes the
summarized page (``docs/native-grid-sampler.md``). An existing results
directory is refused unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shlex
import sys
import time
from pathlib import Path

from vgf_conformance.native import default_cases

#: Seconds one case (both paths, three exports and two Vulkan runs) may take.
CASE_TIMEOUT = 600.0


def _select(patterns: list[str] | None) -> list[str]:
    from vgf_conformance.cases import CASES

    if not patterns:
        return default_cases()
    chosen = []
    for pattern in patterns:
        matched = [cid for cid in CASES if fnmatch.fnmatchcase(cid, pattern)]
        if not matched:
            raise SystemExit(f"--cases: {pattern!r} matches no case (python -m vgf_conformance lists them)")
        chosen += [cid for cid in matched if cid not in chosen]
    return chosen


def _render_again(results_dir: Path, doc: Path | None) -> int:
    import json

    from vgf_conformance.native import report

    path = results_dir / "results.json"
    if not path.exists():
        raise SystemExit(f"--from-results: {path} does not exist")
    data = json.loads(path.read_text())
    rows = report.write(results_dir, data["records"], data["meta"])
    if doc is not None:
        doc.write_text(report.render_markdown(rows, data["meta"], full_table=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance native", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", metavar="ID_OR_GLOB",
                        help="case ids or globs (default: the grid_sample family and the flow-warp composites)")
    parser.add_argument("--out", type=Path, default=Path("native-results"), help="results directory")
    parser.add_argument("--doc", type=Path, help="also write the summarized page here")
    parser.add_argument("--glslc", choices=("both", "with", "without"), default="both",
                        help="export the upstream way with glslc on PATH, without, or both (default)")
    parser.add_argument("--project", choices=("golden", "export"), default="golden",
                        help="the project's numbers from each case's golden (default; the suite keeps them "
                             "current) or from a fresh export")
    parser.add_argument("--timeout", type=float, default=CASE_TIMEOUT, help="seconds per case")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing results directory")
    parser.add_argument("--list", action="store_true", help="list the selected cases and exit")
    parser.add_argument("--from-results", type=Path, metavar="DIR",
                        help="render results.md (and --doc) again from DIR/results.json; run nothing")
    args = parser.parse_args(argv)
    if args.from_results is not None:
        return _render_again(args.from_results, args.doc)
    if args.timeout <= 0:
        parser.error(f"--timeout must be positive, got {args.timeout:g}")
    cases = _select(args.cases)
    if args.list:
        print("\n".join(cases))
        return 0
    if (args.out / "results.json").exists() and not args.overwrite:
        parser.error(f"--out: {args.out / 'results.json'} exists; pass --overwrite to replace it")

    from vgf_conformance.explore.worker import DrawChild
    from vgf_conformance.native import report
    from vgf_export.patches import installed_executorch_version

    work = (args.out / "artifacts").resolve()
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    # ExecuTorch's VGF backend calls model-converter from PATH.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    child = DrawChild(args.out / "worker.log", env=env, cwd=repo,
                      command=(sys.executable, "-m", "vgf_conformance.native.worker"))
    shown = ["python", "-m", "vgf_conformance", "native"] + (["--cases", *args.cases] if args.cases else []) + (
        ["--glslc", args.glslc] if args.glslc != "both" else []) + (
        ["--project", args.project] if args.project != "golden" else [])
    meta = {"command": shlex.join(shown), "executorch": installed_executorch_version(), "seconds": 0.0,
            "glslc": args.glslc, "project": args.project, "same_band_lsb": report.SAME_BAND_LSB,
            "complete": False}
    records: list[dict] = []
    started = time.monotonic()
    try:
        child.launch()
        for i, case in enumerate(cases, 1):
            record = child.run({"case": case, "workdir": str(work), "glslc": args.glslc,
                                "project": args.project}, args.timeout)
            record.setdefault("case", case)
            records.append(record)
            row = report.classify(record)
            print(f"[{i}/{len(cases)}] {case}: {row['outcome']}, numerics {row['verdict']}, glslc {row['glslc']}",
                  flush=True)
            # After every case: an interrupted run keeps what it measured.
            meta["seconds"] = round(time.monotonic() - started, 1)
            meta["complete"] = i == len(cases)
            rows = report.write(args.out, records, meta)
    finally:
        child.close()
    seconds = time.monotonic() - started
    if args.doc is not None and records:
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(report.render_markdown(rows, meta, full_table=False))
    summary = report.summarize(rows)
    print(f"{summary['cases']} cases in {seconds:.0f} s: exports {summary['exports']}, converts "
          f"{summary['converts']}, runs {summary['runs']} ({summary['runs_stable']} repeatably), numerics better "
          f"{summary['better']} / same {summary['same']} / worse {summary['worse']}; results: {args.out}/results.md")
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("native", "vgf_conformance.native")
