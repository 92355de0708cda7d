"""The conformance report: ``report.json`` and ``report.md``.

``report.json`` has ``cases``, one :class:`CaseRecord` per case run (its
docstring is the schema), and ``workarounds``, one :class:`WorkaroundVerdict`
per ledger entry probed; a candidate's report (``scripts/candidate.sh``) also
has ``candidate`` (:class:`vgf_conformance.harness.candidates.compat.CandidateRecord`: its
pins, versions, whether it installs and runs). The plugin fills the records, :func:`merge_reports`
reads them back (refusing unknown fields, keeping every known one), and
``report.md`` is rendered from them: counts by outcome and by op family, the
changes against the goldens grouped ("12 resize cases: no longer
delegated"), expected CPU fallbacks, tolerance margins, export warnings.

:mod:`vgf_conformance.harness.reporting.publish` writes a report's files
(``python -m vgf_conformance report merge OUT DIR...`` merges the reports of
several shards into one report of the same format).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vgf_conformance.harness.reporting import skips
from vgf_conformance.harness.reporting.machine import line as machine_line
from vgf_conformance.harness.reporting.summary import summarize
from vgf_conformance.text import DEFAULT_FLOW

#: The command that runs the built-in table (README's quick start): the rerun
#: commands of a report that does not record its own.
SUITE_SCRIPT = "scripts/conformance.sh"

OUTCOME_ORDER = ("error", "failed", "xpassed", "xfailed", "skipped", "passed")


def _case_outcome(tests: dict[str, str]) -> str:
    outcomes = set(tests.values())
    for outcome in OUTCOME_ORDER:
        if outcome in outcomes:
            if outcome == "skipped" and outcomes - {"skipped"}:
                continue
            return outcome
    return "passed"


def _fields(cls, data: dict, what: str) -> dict:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{what}: unknown fields {unknown}; the schema ({cls.__name__}) has {sorted(known)}")
    return data


@dataclasses.dataclass
class CaseRecord:
    """One case of ``report.json`` (every field is always present).

    ``id``, ``family``, ``quick``: the case; ``flow``: how it was lowered
    (:mod:`vgf_conformance.cases.flows`; ``id`` is ``<flow>/<case id>`` in
    another flow than the default). ``outcome``: the worst outcome of
    its tests (:data:`OUTCOME_ORDER`); ``tests``: test name -> outcome.
    ``stage``: the last stage reached; ``error`` and ``origin``: its failure
    and where it comes from (``toolchain``, ``case`` or ``harness``, see
    :mod:`vgf_conformance.harness.execution.runner`). ``delegates`` ([{backend, ops}]),
    ``cpu_ops``: the export report; ``stays_on_cpu``: the declared CPU
    fallback. ``numerics``: per output, each comparison's statistics (and
    ``vulkan``); ``tolerances``: per output, the bounds and their sources.
    ``golden_changed``: sections that differ from the golden; ``changes``:
    the same in words that group across cases. ``pte``: what the shipped
    program declares. ``warnings``: the stack's warnings during the export.
    ``golden_diff``: the unified diff of the golden's JSON (capped), when it
    changed. ``error_maps``: PNGs of where the numerics differ, relative to
    ``run.artifacts`` (:mod:`vgf_conformance.harness.reporting.errormaps`), for a case whose
    numerics fail, diverge as expected or drift against the golden.
    ``localization``: for an unexpected failure against fake-quant, the first
    TOSA op that adds more than its bounds to its PT2E source
    (:mod:`vgf_conformance.oracles.localize`).
    ``run``: run-specific data (artifacts path, seconds per stage, Vulkan
    batch): the only part that differs between two runs of the same stack.
    """

    id: str
    family: str = "?"
    flow: str = DEFAULT_FLOW
    quick: bool = False
    outcome: str = "passed"
    tests: dict = dataclasses.field(default_factory=dict)
    stage: str | None = None
    error: str | None = None
    origin: str | None = None
    delegates: list = dataclasses.field(default_factory=list)
    cpu_ops: list = dataclasses.field(default_factory=list)
    stays_on_cpu: str | None = None
    numerics: dict | None = None
    tolerances: list = dataclasses.field(default_factory=list)
    golden_changed: list = dataclasses.field(default_factory=list)
    changes: list = dataclasses.field(default_factory=list)
    pte: dict | None = None
    warnings: list = dataclasses.field(default_factory=list)
    golden_diff: list = dataclasses.field(default_factory=list)
    error_maps: list = dataclasses.field(default_factory=list)
    localization: dict | None = None
    run: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> "CaseRecord":
        return cls(**_fields(cls, data, f"case {data.get('id')!r}"))


@dataclasses.dataclass
class WorkaroundVerdict:
    """One workaround of the ledger, probed on the installed stack: whether it
    is still ``needed``, the ``evidence`` (what changes without it), and where
    it is filed ``upstream``."""

    name: str
    needed: bool
    evidence: list
    upstream: str

    @classmethod
    def from_dict(cls, data: dict) -> "WorkaroundVerdict":
        return cls(**_fields(cls, data, f"workaround {data.get('name')!r}"))


def _report(records, verdicts, run: dict | None = None) -> dict:
    report = {"cases": [dataclasses.asdict(r) for r in sorted(records, key=lambda r: r.id)],
              "workarounds": [dataclasses.asdict(v) for v in sorted(verdicts, key=lambda v: v.name)]}
    if run:
        # Run-specific, like each case's ``run``: ``tiers`` (tier -> tests,
        # seconds summed over workers), ``other_tests`` (node id -> seconds of
        # the tests that are not per case), ``wall_seconds``, ``memory``
        # (worker -> peak RSS of it and of its largest child, MiB), ``workers``
        # (worker -> tests, seconds, when its last test ended).
        report["run"] = run
    return report


def merge_run_times(runs: list[dict]) -> dict:
    """The ``run`` of shard reports together: tier seconds added, the
    longest wall (shards run side by side)."""
    tiers: dict[str, dict] = {}
    for run in runs:
        for tier, entry in run.get("tiers", {}).items():
            total = tiers.setdefault(tier, {"tests": 0, "seconds": 0.0})
            total["tests"] += entry["tests"]
            total["seconds"] = round(total["seconds"] + entry["seconds"], 1)
    return {"tiers": dict(sorted(tiers.items())),
            "other_tests": dict(sorted((k, v) for run in runs for k, v in run.get("other_tests", {}).items())),
            "wall_seconds": max((run.get("wall_seconds", 0.0) for run in runs), default=0.0),
            "memory": {f"shard{i + 1}-{worker}": peak for i, run in enumerate(runs)
                       for worker, peak in run.get("memory", {}).items()},
            "workers": {f"shard{i + 1}-{worker}": entry for i, run in enumerate(runs)
                        for worker, entry in run.get("workers", {}).items()},
            "skips": skips.merge(runs),
            # Shards may land on different CPUs: each one's machine.
            "machines": {f"shard{i + 1}": run["machine"] for i, run in enumerate(runs) if run.get("machine")}}


def build_report(cases: dict[str, dict], workarounds: dict[str, dict] | None = None,
                 run: dict | None = None) -> dict:
    """The report from what the tests recorded: case id -> fields (with
    ``tests``: test name -> outcome), and the workaround verdicts."""
    records = []
    for case_id, fields in cases.items():
        tests = dict(sorted(fields.get("tests", {}).items()))
        records.append(CaseRecord.from_dict({"id": case_id, **fields, "tests": tests,
                                             "outcome": _case_outcome(tests)}))
    return _report(records, [WorkaroundVerdict.from_dict(w) for w in (workarounds or {}).values()], run)


def render_markdown(report: dict) -> str:
    summary = summarize(report)
    cases = summary.cases
    lines = ["# VGF conformance report", "", f"{len(cases)} cases.", ""]
    run = report.get("run") or {}
    machines = run.get("machines") or ({"": run["machine"]} if run.get("machine") else {})
    for name, machine in machines.items():
        lines += [f"Ran on{f' ({name})' if name else ''}: {machine_line(machine)}.", ""]
    skipped = run.get("skips") or []
    if skipped:
        lines += ["## Skipped", "", *[f"- {line}" for line in skips.summary_lines(skipped, strict=True)], ""]
    for name, entry in (run.get("partial_shards") or {}).items():
        missing = entry.get("missing") or []
        lines += [f"**Partial shard** {name}: stopped before it finished; {len(missing)} planned case(s) "
                  f"missing from this report" + (f": {', '.join(missing)}" if missing else "") + ".", ""]
    lines += ["## By outcome", "", "| outcome | cases |", "|---|---|"]
    lines += [f"| {o} | {summary.by_outcome[o]} |" for o in OUTCOME_ORDER if summary.by_outcome[o]]
    lines += ["", "## By op family", "", "| family | " + " | ".join(OUTCOME_ORDER) + " |",
              "|---|" + "---|" * len(OUTCOME_ORDER)]
    for family in summary.families:
        counts = summary.by_family[family]
        lines.append(f"| {family} | " + " | ".join(str(counts[o]) for o in OUTCOME_ORDER) + " |")
    lines += ["", "## Delegation", "", "| delegates | cases |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary.delegations]
    if summary.change_groups:
        lines += ["", "## Changes against the goldens", ""]
        lines += [f"- {n} {family} case{'s' if n > 1 else ''}: {change}"
                  for (family, change), n in summary.change_groups]
    if summary.changed:
        lines += ["", "## Golden sections changed", "", "| case | sections |", "|---|---|"]
        lines += [f"| {c['id']} | {', '.join(c['golden_changed'])} |" for c in summary.changed]
    ledger = report.get("workarounds") or []
    if ledger:
        lines += ["", "## Workarounds", "", "| workaround | still needed | evidence |", "|---|---|---|"]
        for w in ledger:
            evidence = "; ".join(w["evidence"])[:200] or "no probe changed without it"
            lines.append(f"| {w['name']} | {'yes' if w['needed'] else '**no: unnecessary here**'} | {evidence} |")
    if summary.cpu:
        lines += ["", "## CPU fallback, as expected", "", "| case | why |", "|---|---|"]
        lines += [f"| {c['id']} | {c['stays_on_cpu']} |" for c in summary.cpu]
    lines += _margin_lines(summary.margins) + _statistical_lines(cases)
    lines += _warning_lines(summary.warnings) + _time_lines(report.get("run"))
    if summary.localized:
        lines += ["", "## Where numerics diverge", "",
                  "The first TOSA op that adds more than its bounds to its PT2E source "
                  "(`python -m vgf_conformance localize CASE` prints every op).", "",
                  "| case | first op | what it adds |", "|---|---|---|"]
        for c in summary.localized:
            lines.append(f"| {c['id']} | {_first_op(c['localization'])} |")
    if summary.not_passing:
        lines += ["", "## Not passing", "", "| case | outcome | stage | error |", "|---|---|---|---|"]
        for c in summary.not_passing:
            error = (c.get("error") or "").splitlines()[0][:160] if c.get("error") else ""
            lines.append(f"| {c['id']} | {c['outcome']} | {c.get('stage')} | {error} |")
    return "\n".join(lines) + "\n"


def _first_op(localization: dict) -> str:
    """A localization's first op and what it adds, as two table cells."""
    if localization.get("error"):
        return f"not localized | {localization['error'][:160]}"
    first = localization.get("first")
    if not first:
        return "none: every op within its bounds | (a part outside the TOSA graph, or a sum of small steps)"
    return (f"delegate {first['delegate']} op[{first['op_index']}] {first['op']} (from `{first['source']}`) | "
            f"{first['local_lsb']:g} LSB on {first['differing']} of {first['elements']} elements, "
            f"bias {first['local_bias_lsb']:+.3f}")


def _statistical_lines(cases: list[dict]) -> list[str]:
    """Outputs held to statistical bounds (the model tier): per comparison,
    the SNR, 99th-percentile and max error against their bounds."""
    from vgf_conformance.oracles.references import ORACLES

    rows = []
    for case in cases:
        outputs = (case.get("numerics") or {}).get("outputs") or []
        for i, (stats, tolerance) in enumerate(zip(outputs, case.get("tolerances") or [])):
            for what in ORACLES:
                bound, got = tolerance.get(what) or {}, stats.get(what)
                if got and ("p99_lsb" in bound or "min_snr_db" in bound):
                    snr = f"{got['snr_db']} (>= {bound['min_snr_db']:g})" if "min_snr_db" in bound else got["snr_db"]
                    p99 = f"{got['p99_lsb']:g} (<= {bound['p99_lsb']:g})" if "p99_lsb" in bound else f"{got['p99_lsb']:g}"
                    rows.append(f"| {case['id']}#{i} | {what} | {snr} | {p99} | {got['max_lsb']:g} "
                                f"(<= {bound['max_lsb']:g}) | {got['bias_lsb'] + 0.0:+g} |")
    if not rows:
        return []
    return ["", "## Statistical bounds", "",
            "Outputs of deep graphs (the model tier) are held to an SNR floor and a 99th-percentile "
            "error (LSB) with a max cap, each measured per model (vgf_conformance/cases/tolerances.py, "
            "MODEL_BOUNDS); the bound is in parentheses.", "",
            "| case#output | comparison | SNR dB | p99 LSB | max LSB | bias LSB |", "|---|---|---|---|---|---|",
            *rows]


def _margin_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["", "## Tolerance margins", "",
             "Each bound's worst observed max error (LSB) over the outputs it decides, and the share "
             "of the bound it uses. A bound far above what is observed cannot catch a regression of "
             "that size.", "",
             "| bound from | comparison | bound | outputs | worst | case | use |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['source']} | {r['comparison']} | {r['bound']:g} | {r['outputs']} | {r['worst']:g} | "
              f"{r['case']} | {r['use']:.0%} |" for r in rows]
    return lines


def _warning_lines(seen: list[tuple[str, int]]) -> list[str]:
    if not seen:
        return []
    lines = ["", "## Warnings raised during export", "",
             "Deprecations of today are the next upgrade's failures.", "",
             "| cases | warning |", "|---|---|"]
    lines += [f"| {n} | {w.replace('|', '/')[:300]} |" for w, n in seen]
    return lines


def _time_lines(run: dict | None) -> list[str]:
    if not run or not run.get("tiers"):
        return []
    tiers = run["tiers"]
    total = sum(t["seconds"] for t in tiers.values())
    return ["", "## Time", "",
            f"Seconds per tier, summed over workers ({total:.0f} s in all, {run.get('wall_seconds', 0):.0f} s "
            "wall): " + ", ".join(f"{tier} {t['seconds']:.0f} s ({t['tests']} tests)"
                                  for tier, t in sorted(tiers.items(), key=lambda kv: -kv[1]["seconds"])) + "."]


def load_shard(directory: Path) -> tuple[dict, list[str] | None]:
    """A shard's report: its ``report.json``; or, for a shard killed before it
    wrote one (its ``report.json`` still says "partial"), the report of the cases it logged as it went
    (:mod:`vgf_conformance.harness.reporting.case_log`) and the planned cases it did not
    finish (None for a complete shard)."""
    from vgf_conformance.harness.reporting import case_log

    if (directory / case_log.REPORT).is_file():
        report = json.loads((directory / case_log.REPORT).read_text())
        if not case_log.is_partial(report):
            return report, None
    if not (directory / case_log.CASES).is_file():
        raise ValueError(f"{directory} holds neither report.json nor {case_log.CASES}: not a shard's report directory")
    records, missing = case_log.read(directory)
    return build_report(records), missing


def merge_reports(reports: list[dict], partial: dict[str, list[str]] | None = None) -> dict:
    """One report from the reports of disjoint shards; ``partial``: shard ->
    the cases it planned and did not finish (a killed shard)."""
    cases: dict[str, CaseRecord] = {}
    workarounds: dict[str, WorkaroundVerdict] = {}
    for report in reports:
        for case in map(CaseRecord.from_dict, report["cases"]):
            if case.id in cases:
                raise ValueError(f"case {case.id} is in more than one shard's report")
            cases[case.id] = case
        for verdict in map(WorkaroundVerdict.from_dict, report.get("workarounds", [])):
            workarounds[verdict.name] = verdict
    runs = [report["run"] for report in reports if report.get("run")]
    run = merge_run_times(runs) if runs else {}
    if partial:
        run["partial_shards"] = {name: {"missing": missing} for name, missing in partial.items()}
    return _report(cases.values(), workarounds.values(), run or None)


#: The outcomes that fail a gate.
FAILING = ("error", "failed", "xpassed")


def gate_problems(report: dict, table_ids=None) -> list[str]:
    """Why a (merged) report fails the gate: cases that failed, errored or
    passed against their expected failure, shards that did not end, and,
    given ``table_ids``, cases of the table that no shard ran."""
    problems = []
    for case in report.get("cases", []):
        if case.get("outcome") in FAILING:
            error = f" at {case.get('stage')}: {str(case['error']).splitlines()[0][:160]}" if case.get("error") else ""
            problems.append(f"{case['id']}: {case.get('outcome')}{error}")
    for shard, missing in ((report.get("run") or {}).get("partial_shards") or {}).items():
        problems.append(f"shard {shard} did not end: {len(missing['missing'])} planned case(s) missing")
    if table_ids is not None:
        missing = sorted(set(table_ids) - {c["id"] for c in report.get("cases", [])})
        if missing:
            problems.append(f"{len(missing)} case(s) of the table in no shard: {', '.join(missing[:10])}")
    return problems


if __name__ == "__main__":  # the old name of the merge command, kept for a release
    import runpy
    import sys

    print("python -m vgf_conformance report is deprecated: use python -m vgf_conformance report merge",
          file=sys.stderr)
    sys.argv[0] = "vgf_conformance.report"
    runpy.run_module("vgf_conformance.report", run_name="__main__")
