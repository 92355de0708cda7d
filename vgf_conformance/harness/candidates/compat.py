"""Candidates and the compatibility matrix.

A *candidate* is a named pin set, ``candidates/NAME.txt``, that overrides any
part of the stack on top of ``requirements.lock``. ``scripts/candidate.sh
NAME`` installs it in an environment outside the repository and runs the
suite against the current goldens in report mode; this module is the part of
that script that is better written in Python:

- ``pins``: the candidate's requirements (its own lines, then every line of
  the lock that names a package the candidate does not);
- ``preflight``: in the candidate's environment, whether the stack can run
  here at all (each native tool starts, the Python packages import:
  :mod:`vgf_conformance.harness.candidates.preflight`);
- ``finding``: when the candidate does not install or cannot run, a
  ``report.json`` with no cases and a ``candidate`` record saying why (the
  lines of pip's or the tool's error that matter, never a bare stack trace);
- ``stamp``: after a run, the ``candidate`` record added to its report;
- ``stack-changes``: what the candidate changed in the stack's lowering code
  and how much of it the run reached
  (:mod:`vgf_conformance.harness.candidates.stack_changes`).

Every candidate report thus has a top-level ``candidate`` object
(:class:`CandidateRecord`). ``python -m vgf_conformance report compat`` reads the
reports and a baseline report of the pinned stack (same scope) and writes
``docs/compatibility.md``: one row per candidate (:func:`render_matrix`).

Standard library only: the matrix is made on machines without the stack
(``stack-changes`` reads coverage data, with coverage.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex

from collections import Counter
from pathlib import Path

from vgf_conformance.harness.candidates import stack_changes
from vgf_conformance.harness.candidates.preflight import installed_versions, preflight
from vgf_conformance.text import DEFAULT_FLOW

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """A package name as the registry compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of a requirements file (comments and blanks dropped)."""
    lines = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            if line.startswith("-"):
                raise ValueError(f"candidate pins: options are not supported in a pin set, got {line!r}")
            if not _NAME.match(line):
                raise ValueError(f"candidate pins: not a requirement: {line!r}")
            lines.append(line)
    return lines


def merge_pins(candidate: str, lock: str) -> list[str]:
    """The candidate's requirement lines, then the lock's lines for every
    package the candidate does not name."""
    own = requirement_lines(candidate)
    if not own:
        raise ValueError("candidate pins: the pin set names no package")
    names = {normalize(_NAME.match(line).group(1)) for line in own}
    return own + [line for line in requirement_lines(lock) if normalize(_NAME.match(line).group(1)) not in names]


# --- the candidate record ---------------------------------------------------

@dataclasses.dataclass
class CandidateRecord:
    """The ``candidate`` object of a candidate's ``report.json``.

    ``name``: the pin set's name; ``pins``: its own requirement lines;
    ``installs``: pip installed the set; ``runs``: the stack runs here (the
    preflight passed and the suite completed); ``reason``: why not, in a few
    lines; ``versions``: the stack's installed versions; ``scope``: the
    pytest arguments of the run (empty: the whole suite).
    """

    name: str
    pins: list
    installs: bool
    runs: bool
    reason: str | None = None
    versions: dict = dataclasses.field(default_factory=dict)
    scope: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> "CandidateRecord":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"candidate record: unknown fields {unknown}; the schema has {sorted(known)}")
        return cls(**data)


def pip_failure_reason(log: str) -> str:
    """What a failed ``pip install`` says, in the lines that matter: the
    conflict (``The conflict is caused by:``) or the ``ERROR:`` lines."""
    lines = log.splitlines()
    conflict = []
    for i, line in enumerate(lines):
        if line.strip().startswith("The conflict is caused by"):
            for follow in lines[i + 1:]:
                if not follow.startswith(" ") or not follow.strip():
                    break
                conflict.append(follow.strip())
    if conflict:
        return "pip cannot resolve the pin set: " + "; ".join(dict.fromkeys(conflict))
    kept = [line.strip() for line in lines if line.startswith("ERROR:")]
    kept = kept or [line.strip() for line in lines if line.strip()][-5:]
    return "pip could not install the pin set: " + "; ".join(dict.fromkeys(kept))


def write_finding(directory: Path, record: CandidateRecord) -> None:
    """A candidate report with no cases: the record says why it did not run."""
    directory.mkdir(parents=True, exist_ok=True)
    report = {"candidate": dataclasses.asdict(record), "cases": [], "workarounds": []}
    (directory / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    state = "does not install" if not record.installs else "installs but cannot run here"
    (directory / "report.md").write_text(
        f"# Candidate {record.name}\n\nThe candidate {state}.\n\n{record.reason}\n\n"
        f"Pins: {', '.join(record.pins)}\n")


def stamp(directory: Path, record: CandidateRecord) -> None:
    """Add the candidate record to the report a run wrote."""
    path = directory / "report.json"
    report = json.loads(path.read_text())
    report["candidate"] = dataclasses.asdict(record)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")


def _record_from_args(args, installs: bool, runs: bool, reason: str | None, versions: dict) -> CandidateRecord:
    pins = requirement_lines(Path(args.pins).read_text()) if args.pins else []
    return CandidateRecord(name=args.name, pins=pins, installs=installs, runs=runs, reason=reason,
                           versions=versions, scope=shlex.join(args.scope))


# --- the matrix -------------------------------------------------------------

def _yes_no(flag: bool) -> str:
    return "yes" if flag else "**no**"


def _in_default_flow(report: dict | None) -> dict | None:
    """The report restricted to the runs of the default flow (what the
    matrix's columns count)."""
    if report is None:
        return None
    return {**report, "cases": [c for c in report.get("cases") or [] if c.get("flow", DEFAULT_FLOW) == DEFAULT_FLOW]}


def flows_cell(report: dict) -> str:
    """What the runs of the other flows did: per flow, its runs by outcome."""
    by_flow: dict[str, Counter] = {}
    for case in report.get("cases") or []:
        flow = case.get("flow", DEFAULT_FLOW)
        if flow != DEFAULT_FLOW:
            by_flow.setdefault(flow, Counter())[case.get("outcome", "?")] += 1
    return "; ".join(f"{flow}: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
                     for flow, outcomes in sorted(by_flow.items())) or "none run"


def matrix_row(baseline: dict | None, report: dict, name: str) -> dict:
    """One row of the matrix: the candidate's report, compared with the
    baseline report where numerics and warnings need one. Its columns count
    the default flow's runs; ``flows`` says what the other flows' did."""
    from vgf_conformance.harness.reporting.diff import diff_reports

    flows = flows_cell(report)
    report, baseline = _in_default_flow(report), _in_default_flow(baseline)
    record = report.get("candidate") or {}
    cases = report.get("cases") or []
    row = {"candidate": record.get("name") or name, "scope": record.get("scope", "?"),
           "cases": len(cases), "versions": record.get("versions") or {}, "pins": record.get("pins") or [],
           "flows": flows}
    installs = record.get("installs", bool(cases))
    runs = record.get("runs", bool(cases))
    row["installs"] = _yes_no(installs) + ("" if installs else f": {record.get('reason')}")
    if not installs or not runs or not cases:
        row["exports"] = "**no**: " + (record.get("reason") or "no case ran") if installs else "-"
        for column in ("goldens", "numerics", "vulkan", "workarounds", "warnings"):
            row[column] = "-"
        return row
    failing = Counter(c.get("stage") or "?" for c in cases
                      if (c.get("tests") or {}).get("test_export") in ("failed", "error"))
    n_fail = sum(failing.values())
    row["exports"] = (f"yes ({len(cases)}/{len(cases)})" if not n_fail else
                      f"**no**: {n_fail} of {len(cases)} fail (" +
                      ", ".join(f"{n} at {s}" for s, n in failing.most_common()) + ")")
    changed = [c for c in cases if c.get("golden_changed")]
    sections = Counter(s for c in changed for s in c["golden_changed"])
    row["goldens"] = (f"{len(cases) - len(changed)} unchanged / {len(changed)} changed" +
                      (" (" + ", ".join(f"{s} {n}" for s, n in sorted(sections.items(), key=lambda kv: (-kv[1], kv[0])))
                       + ")" if sections else ""))
    if baseline is None:
        row["numerics"] = "no baseline"
        new_warnings = sorted({w for c in cases for w in c.get("warnings") or []})
    else:
        delta = diff_reports(baseline, report)
        worse = [c for c in delta.cases if c.numerics_worse]
        better = [c for c in delta.cases if c.numerics_better]
        parts = []
        if worse:
            top = max((n for c in worse for n in c.numerics_worse), key=lambda n: n.new)
            parts.append(f"{len(worse)} worse (worst {top.new:g} LSB, was {top.old:g}: {top.case} {top.where})")
        if better:
            top = max((n for c in better for n in c.numerics_better), key=lambda n: n.old - n.new)
            parts.append(f"{len(better)} better (most {top.old:g} -> {top.new:g} LSB: {top.case} {top.where})")
        row["numerics"] = "; ".join(parts) or f"same ({len(delta.common)} cases compared)"
        new_warnings = delta.new_warnings
    vulkan = Counter((c.get("tests") or {}).get("test_vulkan", "not run") for c in cases)
    ran = vulkan["passed"] + vulkan["failed"] + vulkan["error"]
    row["vulkan"] = (("not run (skipped)" if vulkan["skipped"] else "not run") if not ran else
                     f"yes ({vulkan['passed']}/{ran})" if vulkan["passed"] == ran else
                     f"**no**: {vulkan['failed'] + vulkan['error']} of {ran} differ or fail")
    ledger = report.get("workarounds") or []
    if not ledger:
        row["workarounds"] = "not probed in this scope"
    else:
        unneeded = [w["name"] for w in ledger if not w["needed"]]
        row["workarounds"] = (f"all {len(ledger)}" if not unneeded else
                              f"{len(ledger) - len(unneeded)} of {len(ledger)}; not needed: " + ", ".join(unneeded))
    row["warnings"] = (f"{len(new_warnings)}: " + "; ".join(w.replace("|", "/")[:160] for w in new_warnings[:3]) +
                       (" ..." if len(new_warnings) > 3 else "")) if new_warnings else "none"
    return row


MATRIX_COLUMNS = (
    ("candidate", "candidate"), ("installs", "installs"), ("exports", "every case exports"),
    ("goldens", "goldens unchanged / changed (sections)"), ("numerics", "numerics worse / better"),
    ("vulkan", "Vulkan bit-exact"), ("workarounds", "workarounds still needed"), ("warnings", "new warnings"),
    ("flows", "other flows (runs by outcome)"),
)


def render_matrix(baseline: dict | None, reports: list[tuple[str, dict]], baseline_name: str = "") -> str:
    """``docs/compatibility.md``: one row per candidate report."""
    rows = [matrix_row(baseline, report, name) for name, report in reports]
    command = " ".join(["python -m vgf_conformance report compat"] + ([f"--baseline reports/{baseline_name}"]
                                                                   if baseline_name else [])
                       + [f"reports/{name}" for name, _ in reports])
    lines = ["# Compatibility matrix", "",
             f"Generated by `{command}` from the candidate reports "
             "(`scripts/candidate.sh NAME`, `reports/NAME/report.json`); do not edit by hand. "
             "Each candidate is a pin set in `candidates/` on top of `requirements.lock`, run against "
             "the goldens of the pinned stack (ExecuTorch 1.5.1, ML SDK 0.11.0, tosa-tools 2026.5.0). "
             "Numerics and warnings are compared with the baseline report"
             + (f" `{baseline_name}`" if baseline_name else "") + " of the pinned stack on the same cases; "
             "numerics count the cases whose worst error (max LSB of any output against any oracle) moved, "
             "by more than the report's rounding. The columns count the default flow's runs; the last says what "
             "the runs of the other flows did (`vgf_conformance/cases/flows.py`). "
             "Findings per candidate: `docs/candidates/NAME.md`.", "",
             "| " + " | ".join(title for _, title in MATRIX_COLUMNS) + " |",
             "|" + "---|" * len(MATRIX_COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[key]).replace("\n", " ") for key, _ in MATRIX_COLUMNS) + " |")
    base_versions = ((baseline or {}).get("candidate") or {}).get("versions") or {}
    lines += ["", "## Scope and versions", "",
              "| candidate | cases run | pytest arguments | stack" + (" (where it differs from the baseline)"
                                                                  if base_versions else "") + " |", "|---|---|---|---|"]
    if base_versions:
        lines.insert(-2, "Baseline: " + ", ".join(f"{k} {v}" for k, v in sorted(base_versions.items()) if v) + ".\n")
    for row in rows:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(row["versions"].items())
                             if v and base_versions.get(k) != v) or (
            "pins (not installed): " + ", ".join(row["pins"]) if row["pins"] and not row["versions"] else "-")
        lines.append(f"| {row['candidate']} | {row['cases']} | `{row['scope'] or '(all)'}` | {versions} |")
    return "\n".join(lines) + "\n"


# --- command line -----------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance candidate",
                                     description="the parts of scripts/candidate.sh written in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    pins = sub.add_parser("pins", help="print the candidate's requirements on top of the lock")
    pins.add_argument("pins", type=Path)
    pins.add_argument("lock", type=Path)
    for command in ("preflight", "finding", "stamp"):
        p = sub.add_parser(command)
        p.add_argument("out", type=Path, help="the candidate's report directory")
        p.add_argument("--name", required=True)
        p.add_argument("--pins", required=command == "finding", type=Path,
                       help="the candidate's pin set (none: the baseline, requirements.lock as it is)")
        p.add_argument("--scope", nargs=argparse.REMAINDER, default=[])
        if command == "finding":
            p.add_argument("--pip-log", type=Path, help="the failed pip install's log")
            p.add_argument("--reason", help="the reason, when there is no pip log")
            p.add_argument("--installs", action="store_true", help="the pin set installed")
    changes = sub.add_parser("stack-changes", help="what the candidate changed in the stack's lowering code, "
                             "and how much of it the run reached")
    stack_changes.add_arguments(changes)
    args = parser.parse_args(argv)
    if args.command == "stack-changes":
        return stack_changes.command(args, changes)
    for path in [getattr(args, "pins", None), getattr(args, "lock", None)]:
        if path is not None and not path.is_file():
            parser.error(f"{path}: no such file (expected a requirements file)")
    if args.command == "pins":
        try:
            print("\n".join(merge_pins(args.pins.read_text(), args.lock.read_text())))
        except ValueError as error:
            parser.error(f"{args.pins}: {error}")
        return 0
    if args.command == "preflight":
        reasons = preflight()
        if not reasons:
            return 0
        write_finding(args.out, _record_from_args(args, True, False, "; ".join(reasons), installed_versions()))
        print(f"candidate {args.name}: installs but cannot run here: " + "; ".join(reasons))
        return 3
    if args.command == "finding":
        if args.pip_log is not None:
            reason = pip_failure_reason(args.pip_log.read_text(errors="replace"))
        elif args.reason:
            reason = args.reason
        else:
            parser.error("finding needs --pip-log or --reason")
        versions = installed_versions() if args.installs else {}
        write_finding(args.out, _record_from_args(args, args.installs, False, reason, versions))
        print(f"candidate {args.name}: {reason}")
        return 0
    if not (args.out / "report.json").is_file():
        parser.error(f"{args.out}: no report.json to stamp (did the run write --vgf-report {args.out}?)")
    stamp(args.out, _record_from_args(args, True, True, None, installed_versions()))
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("candidate", "vgf_conformance.harness.compat")
