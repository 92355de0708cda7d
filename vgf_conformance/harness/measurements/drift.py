"""How far goldens drift between machines: the measurement behind the bands.

The same pinned stack exports slightly different numbers on different CPUs
and thread counts: PT2E observers calibrate on float convolutions whose
summation order depends on oneDNN's ISA dispatch and on torch's thread
count, so calibrated scales (RESCALE multipliers, bias codes) and the
rounded numerics statistics move. This module measures it:

``python -m vgf_conformance drift export --out DIR [--shard I/N]``
    exports every case of the table in this process and writes each raw
    golden (exactly as built, no tolerance applied) to ``DIR/<case id>.json``.
    Run it under the environment to measure, e.g.
    ``DNNL_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1`` (``scripts/measure_drift.sh``
    runs every configuration).

``python -m vgf_conformance drift table DIR [DIR ...] [--json FILE] [--md FILE]``
    compares each directory's goldens with the stored ones (``golden/cases``)
    field by field, with the comparison of :mod:`vgf_conformance.goldens.compliance`,
    and prints the worst drift of every tolerant field per configuration: the
    figures each band in ``compliance.BANDS`` must cover (a band is at most
    twice the worst drift seen).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from vgf_conformance.goldens import compliance
from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR, serialize


#: The cases whose goldens move from one machine to another (calibrated
#: values outside the exact fields), from the measurement in
#: docs/portability.md: tests/test_portability.py exports them under other ISA
#: levels and thread counts and checks that they still match their goldens.
SENSITIVE_CASES = [
    "conv-resize-conv-down32-int8io",
    "conv-resize-conv-up2-n2-int8io",
    "model-ifnet-64x96-int8io",
    "model-laplacian-blend-64x96-int8io",
    "model-segmentation-64x96",
    "model-superres-x2-32x48-int8io",
    "model-unet-64x64-int8io",
]


def export(out: Path, shard: tuple[int, int] | None, only: list[str] | None) -> int:
    """Export the table's cases (or ``only``) and write their raw goldens to ``out``."""
    from vgf_conformance.cases import CASES
    from vgf_conformance.harness.execution.runner import run_case

    out.mkdir(parents=True, exist_ok=True)
    ids = [c for c in CASES if not only or c in only]
    if shard is not None:
        ids = ids[shard[0] - 1 :: shard[1]]
    with tempfile.TemporaryDirectory(prefix="vgf-drift-") as tmp:
        for n, case_id in enumerate(ids, 1):
            run = run_case(CASES[case_id], Path(tmp))
            if run.golden is not None:
                (out / f"{case_id}.json").write_text(serialize(run.golden))
            print(f"[{n}/{len(ids)}] {case_id}: {'ok' if run.golden is not None else run.stage}",
                  flush=True)
    return 0


def measure(directories: list[Path], stored_dir: Path = BUILTIN_GOLDEN_DIR) -> dict:
    """Per configuration (directory name): the worst drift of each tolerant
    field against the stored goldens, the cases compared, and every
    difference that the exact fields show (which no band may absorb)."""
    result = {}
    for directory in directories:
        worst: dict[str, dict] = {}
        exact: list[str] = []
        moved: list[str] = []
        compared = 0
        for path in sorted(directory.glob("*.json")):
            stored = stored_dir / path.name
            if not stored.exists():
                continue
            compared += 1
            report = compliance.compare(json.loads(stored.read_text()), json.loads(path.read_text()))
            for field, drift in report.drifts.items():
                if drift.value > worst.get(field, {}).get("drift", -1.0):
                    worst[field] = {"drift": drift.value, "case": path.stem, "where": drift.where}
            exact += [f"{path.stem}: {m}" for m in report.exact_mismatches]
            if report.differing:
                moved.append(path.stem)
        result[directory.name] = {"cases": compared, "worst": dict(sorted(worst.items())),
                                  "exact_mismatches": exact, "cases_that_moved": moved}
    return result


def markdown(measured: dict) -> str:
    fields = sorted({f for config in measured.values() for f in config["worst"]})
    lines = ["| configuration | cases | " + " | ".join(fields) + " | exact mismatches |",
             "|---|---|" + "---|" * len(fields) + "---|"]
    for name, config in measured.items():
        cells = []
        for field in fields:
            entry = config["worst"].get(field)
            cells.append(f"{entry['drift']:.3g}" if entry else "0")
        lines.append(f"| {name} | {config['cases']} | " + " | ".join(cells)
                     + f" | {len(config['exact_mismatches'])} |")
    lines.append("")
    lines.append("| field | band | worst drift | where | ratio |")
    lines.append("|---|---|---|---|---|")
    for field in fields:
        top = max((c["worst"][field] | {"config": n} for n, c in measured.items() if field in c["worst"]),
                  key=lambda e: e["drift"])
        band = compliance.BANDS[field].limit
        ratio = f"{band / top['drift']:.1f}" if top["drift"] else "-"
        lines.append(f"| {field} | {band:.3g} | {top['drift']:.3g} | {top['case']} {top['where']} "
                     f"({top['config']}) | {ratio} |")
    lines.append("")
    for name, config in measured.items():
        lines.append(f"- {name}: {len(config['cases_that_moved'])} case(s) moved: "
                     + (", ".join(config["cases_that_moved"]) or "none"))
        for mismatch in config["exact_mismatches"]:
            lines.append(f"  - exact field differs: {mismatch}")
    return "\n".join(lines) + "\n"


def _shard(text: str) -> tuple[int, int]:
    from vgf_conformance.harness.schedule.plan import parse_shard

    try:
        return parse_shard(text, "--shard")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance drift", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("export", help="write every case's raw golden to --out")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--shard", type=_shard, default=None, help="I/N: every N-th case from the I-th")
    run.add_argument("--case", action="append", default=None, help="only this case id (repeatable)")
    table = sub.add_parser("table", help="the worst drift of every tolerant field per directory")
    table.add_argument("directories", type=Path, nargs="+")
    table.add_argument("--json", type=Path, default=None, help="write the figures as JSON here")
    table.add_argument("--md", type=Path, default=None, help="write the table as Markdown here")
    args = parser.parse_args(argv)
    if args.command == "export":
        print(f"drift export: DNNL_MAX_CPU_ISA={os.environ.get('DNNL_MAX_CPU_ISA', 'default')} "
              f"threads={__import__('torch').get_num_threads()}", flush=True)
        return export(args.out, args.shard, args.case)
    for directory in args.directories:
        if not directory.is_dir():
            parser.error(f"table: {directory} is not a directory of goldens")
    measured = measure(args.directories)
    text = markdown(measured)
    sys.stdout.write(text)
    if args.json:
        args.json.write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("drift", "vgf_conformance.harness.drift")
