"""Commands on conformance reports.

    python -m vgf_conformance report diff OLD NEW [--json] [-o FILE]
        what changed between two reports (directories or report.json files),
        per case and section, grouped; Markdown for a pull-request comment
    python -m vgf_conformance report compat --baseline DIR CANDIDATE_DIR... [-o docs/compatibility.md]
        the compatibility matrix from candidate reports (scripts/candidate.sh)
    python -m vgf_conformance report merge OUT DIR...
        merge shard reports (report.json, or a killed shard's cases.jsonl) into one
    python -m vgf_conformance report gate DIR [--whole-table]
        exit 1 when a case failed, errored or passed against its expected
        failure, when a shard did not end, or (--whole-table) when a case of
        the built-in table is in no shard: the pull request's gate

Exit status: 0, or 2 with a message naming the argument when an input is not
a readable report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vgf_conformance.harness.candidates import compat

from vgf_conformance.harness.reporting import diff


def _write(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["merge"]:  # writes report.html too: its imports only here (diff and compat need none)
        from vgf_conformance.harness.reporting import publish

        return publish.main(argv)
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diff", help="what changed between two reports")
    d.add_argument("old", type=Path, help="the earlier report: a directory holding report.json, or the file")
    d.add_argument("new", type=Path, help="the later report (a candidate's, tonight's)")
    form = d.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="Markdown for a pull-request comment (the default)")
    form.add_argument("--json", action="store_true", help="the diff as JSON")
    d.add_argument("-o", "--out", type=Path, help="write to this file instead of standard output")
    c = sub.add_parser("compat", help="the compatibility matrix from candidate reports")
    c.add_argument("candidates", type=Path, nargs="+", help="candidate report directories (reports/NAME)")
    c.add_argument("--baseline", type=Path, help="a report of the pinned stack on the same cases "
                   "(numerics and warnings are compared with it)")
    c.add_argument("-o", "--out", type=Path, help="write here (e.g. docs/compatibility.md) instead of standard output")
    sub.add_parser("merge", help="merge shard reports: merge OUT DIR...")
    g = sub.add_parser("gate", help="fail when the (merged) report has a failing case or a missing one")
    g.add_argument("report", type=Path, help="a report directory holding report.json")
    g.add_argument("--whole-table", action="store_true", help="every case of the built-in table must be in it")
    args = parser.parse_args(argv)
    if args.command == "gate":
        return _gate(parser, args)
    try:
        if args.command == "diff":
            old = diff.load_report(args.old, "OLD")
            new = diff.load_report(args.new, "NEW")
            delta = diff.diff_reports(old, new, str(args.old), str(args.new))
            text = (json.dumps(diff.to_json(delta), indent=2, sort_keys=True) + "\n" if args.json
                    else diff.render_markdown(delta))
            _write(text, args.out)
            return 0
        baseline = diff.load_report(args.baseline, "--baseline") if args.baseline else None
        reports = [(path.name, diff.load_report(path, f"candidate {path}")) for path in args.candidates]
        _write(compat.render_matrix(baseline, reports, args.baseline.name if args.baseline else ""), args.out)
        return 0
    except diff.ReportError as error:
        parser.exit(2, f"{parser.prog} {args.command}: error: {error}\n")


def _gate(parser, args) -> int:
    from vgf_conformance.harness.reporting.records import gate_problems

    try:
        report = diff.load_report(args.report, "report")
    except diff.ReportError as error:
        parser.exit(2, f"{parser.prog} gate: error: {error}\n")
    table = None
    if args.whole_table:
        from vgf_conformance.cases import CASES

        table = list(CASES)
    problems = gate_problems(report, table)
    for problem in problems:
        print(f"gate: {problem}")
    print(f"gate: {len(report['cases'])} cases, {len(problems)} problem(s): {'FAIL' if problems else 'pass'}")
    return 1 if problems else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("report", "vgf_conformance.report")
