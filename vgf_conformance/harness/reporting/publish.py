"""A report's files, written together: ``report.json`` (the records),
``report.md`` and ``report.html`` (each rendered from them), by the plugin at
the end of a run and by ``python -m vgf_conformance.report merge OUT DIR...``,
which merges the reports of several shards into one of the same format.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vgf_conformance.harness.reporting.html import write_html
from vgf_conformance.harness.reporting.records import load_shard, merge_reports, render_markdown
from vgf_conformance.text import atomic_write


def write_report(report: dict, directory: Path, map_sources: tuple[Path, ...] = ()) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / "report.md", render_markdown(report))
    write_html(report, directory, map_sources)  # maps also from map_sources/maps/ (merged shards)
    # Last, and whole: until this rename, report.json says the run is partial.
    atomic_write(directory / "report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance.report")
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="merge shard reports (directories with report.json)")
    merge.add_argument("out", type=Path, help="directory for the merged report.json and report.md")
    merge.add_argument("shards", type=Path, nargs="+",
                       help="shard report directories (report.json, or a killed shard's cases.jsonl)")
    args = parser.parse_args(argv)
    reports, partial = [], {}
    for directory in args.shards:
        try:
            report, missing = load_shard(directory)
        except (ValueError, OSError) as error:
            parser.error(f"shards: {error}")
        reports.append(report)
        if missing is not None:
            partial[str(directory)] = missing
            print(f"partial shard {directory} (no report.json: it was stopped before the end): "
                  f"{len(report['cases'])} cases recorded, {len(missing)} planned cases missing"
                  + (f": {', '.join(missing[:20])}{' ...' if len(missing) > 20 else ''}" if missing else ""))
    merged = merge_reports(reports, partial)
    write_report(merged, args.out, tuple(args.shards))
    print(f"merged {len(args.shards)} reports, {len(merged['cases'])} cases, into {args.out}")
    return 0
