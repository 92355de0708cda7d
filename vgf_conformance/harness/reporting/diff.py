"""What changed between two conformance reports.

``python -m vgf_conformance report diff OLD NEW`` compares two reports (two
nightlies, or a baseline and a candidate; each a report directory or its
``report.json``) case by case: the outcome and each test's, the stage and
error, the golden sections that differ from the goldens, delegation, numerics
(the worst error, max LSB, of each output against each oracle), Vulkan
bit-exactness, and the workaround verdicts; warnings over all the cases in
both (a warning is shown once per process, so which case records it is not
stable). Changes are grouped
across cases the way the report groups golden changes ("12 resize cases:
numerics worse"), then listed per case, as Markdown fit for a pull-request
comment (or ``--json``).

Standard library only, like the report's merge (:mod:`vgf_conformance.harness.reporting.publish`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

from vgf_conformance.goldens.compliance import BANDS
from vgf_conformance.harness.reporting import machine
from vgf_conformance.harness.reporting.records import CaseRecord, WorkaroundVerdict

#: A numerics change smaller than this (LSB) is not one: the report rounds
#: statistics to 6 significant digits, and the tightest bound is 0.01 LSB.
NUMERICS_EPSILON = 0.001
#: Per-case rows in the Markdown rendering (a pull-request comment has a size limit).
MAX_CASE_ROWS = 150


class ReportError(ValueError):
    """A diff argument is not a readable conformance report."""


def load_report(path: Path, what: str = "report") -> dict:
    """A report from a report directory or a ``report.json`` file, checked
    against the schema; a clear :class:`ReportError` otherwise."""
    path = Path(path)
    expected = "a report directory holding report.json, or a report.json file"
    file = path / "report.json" if path.is_dir() else path
    if not file.is_file():
        where = f"{path} has no report.json" if path.is_dir() else f"{path} does not exist"
        raise ReportError(f"{what}: {where} (expected {expected})")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ReportError(f"{what}: {file} is not JSON ({error}); expected {expected}") from None
    if isinstance(data, dict) and data.get("partial"):
        raise ReportError(f"{what}: {file} is the report of a run that did not end ({data['partial']})")
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ReportError(f"{what}: {file} is not a conformance report: it has no 'cases' list "
                          f"(expected the report.json written by --vgf-report or scripts/candidate.sh)")
    try:
        for case in data["cases"]:
            if not isinstance(case, dict) or "id" not in case:
                raise ValueError(f"a case without an id: {str(case)[:80]}")
            CaseRecord.from_dict(case)
        for verdict in data.get("workarounds") or []:
            WorkaroundVerdict.from_dict(verdict)
    except (TypeError, ValueError) as error:
        raise ReportError(f"{what}: {file} is not a conformance report of this schema: {error}") from None
    return data


@dataclasses.dataclass
class NumericsChange:
    """One output's worst error against one oracle, in two reports."""

    case: str
    where: str  # "out0 vs_float"
    old: float
    new: float


@dataclasses.dataclass
class CaseDiff:
    """What changed in one case (``status``: changed, added, removed)."""

    id: str
    family: str
    status: str = "changed"
    outcome: tuple | None = None
    tests: dict = dataclasses.field(default_factory=dict)  # test -> (old, new)
    failure: tuple | None = None  # (old "stage: error", new)
    goldens_new: list = dataclasses.field(default_factory=list)  # sections that now differ
    goldens_gone: list = dataclasses.field(default_factory=list)  # sections that no longer differ
    golden_words: list = dataclasses.field(default_factory=list)  # new ``changes`` ("no longer delegated")
    delegation: list = dataclasses.field(default_factory=list)
    numerics_worse: list = dataclasses.field(default_factory=list)
    numerics_better: list = dataclasses.field(default_factory=list)
    vulkan: tuple | None = None

    def phrases(self) -> list[str]:
        """The changes in words that group across cases."""
        if self.status != "changed":
            return [f"only in {'NEW' if self.status == 'added' else 'OLD'}"]
        out = []
        if self.outcome:
            out.append(f"outcome {self.outcome[0]} -> {self.outcome[1]}")
        else:
            out += [f"{t.removeprefix('test_')} {a} -> {b}" for t, (a, b) in self.tests.items()]
        if self.failure and not self.outcome:
            out.append("failure changed")
        # The report's own words for golden changes where it has them, else the sections.
        out += [f"goldens: {w}" for w in self.golden_words] or [f"goldens: {s} changed" for s in self.goldens_new]
        out += [f"goldens: {s} matches again" for s in self.goldens_gone]
        if self.delegation:
            out.append("delegation changed")
        if self.numerics_worse:
            out.append("numerics worse")
        if self.numerics_better:
            out.append("numerics better")
        if self.vulkan:
            out.append(f"Vulkan {self.vulkan[0]} -> {self.vulkan[1]}")
        return out

    def details(self) -> list[str]:
        """The changes of this case in full (one Markdown fragment each)."""
        if self.status != "changed":
            return self.phrases()
        out = []
        if self.outcome:
            out.append(f"outcome {self.outcome[0]} -> **{self.outcome[1]}**")
        if self.tests:
            out.append("tests: " + ", ".join(f"{t.removeprefix('test_')} {a} -> {b}" for t, (a, b) in self.tests.items()))
        if self.failure:
            out.append(f"failure: `{self.failure[0] or 'none'}` -> `{self.failure[1] or 'none'}`")
        if self.goldens_new:
            out.append("goldens now differ: " + ", ".join(self.goldens_new)
                       + (f" ({'; '.join(self.golden_words)})" if self.golden_words else ""))
        if self.goldens_gone:
            out.append("goldens match again: " + ", ".join(self.goldens_gone))
        out += self.delegation
        for label, changes in (("worse", self.numerics_worse), ("better", self.numerics_better)):
            if changes:
                out.append(f"numerics {label}: " + ", ".join(f"{n.where} {n.old:g} -> {n.new:g} LSB" for n in changes))
        if self.vulkan:
            out.append(f"Vulkan {self.vulkan[0]} -> {self.vulkan[1]}")
        return out


@dataclasses.dataclass
class ReportDiff:
    """Two reports compared: per case, the workarounds, the stack."""

    old_name: str
    new_name: str
    common: list
    cases: list  # CaseDiff, changed/added/removed, by id
    workarounds: list  # (name, old verdict or None, new verdict or None), verdict: "needed"/"not needed"
    stack: list  # (package, old version, new version)
    new_warnings: list  # warnings of NEW that no case of OLD raised
    gone_warnings: list
    #: Where each ran (machine.line), and the smallest worst-error move counted.
    machines: tuple[str, str] = ("unknown machine", "unknown machine")
    numerics_threshold: float = NUMERICS_EPSILON

    @property
    def changed(self) -> list:
        return [c for c in self.cases if c.status == "changed"]

    def groups(self) -> list[tuple[str, str, int]]:
        """(family, phrase, cases), most cases first."""
        counts = Counter((c.family, p) for c in self.cases for p in c.phrases())
        return [(f, p, n) for (f, p), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _short(text: str, size: int = 200) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= size else text[:size] + "..."


def failure(case: dict) -> str | None:
    if not case.get("error"):
        return None
    return f"{case.get('stage')}: {case['error'].strip().splitlines()[0][:160]}"


def _max_lsb(case: dict) -> dict:
    """(output, comparison) -> max LSB, for every comparison of every output."""
    values = {}
    for i, output in enumerate((case.get("numerics") or {}).get("outputs") or []):
        for what, stats in sorted(output.items()):
            if isinstance(stats, dict) and isinstance(stats.get("max_lsb"), (int, float)):
                values[f"out{i} {what}"] = float(stats["max_lsb"])
    return values


def _vulkan(case: dict) -> str | None:
    vulkan = (case.get("numerics") or {}).get("vulkan")
    if not isinstance(vulkan, dict):
        return None
    if "error" in vulkan:
        return "run failed"
    return "bit-exact" if vulkan.get("bit_exact") else "not bit-exact"


def _delegation(old: dict, new: dict) -> list[str]:
    def shape(case):
        return [(d["backend"], tuple(d.get("ops") or [])) for d in case.get("delegates") or []]

    out = []
    before, after = shape(old), shape(new)
    if before != after:
        if before and not after:
            out.append("no longer delegated")
        elif after and not before:
            out.append("now delegated: " + ", ".join(b for b, _ in after))
        elif [b for b, _ in before] != [b for b, _ in after]:
            out.append(f"delegates {'+'.join(b for b, _ in before)} -> {'+'.join(b for b, _ in after)}")
        else:
            ops_before = Counter(op for _, ops in before for op in ops)
            ops_after = Counter(op for _, ops in after for op in ops)
            gained, lost = sorted((ops_after - ops_before).elements()), sorted((ops_before - ops_after).elements())
            out.append("delegated ops" + (f" +{gained}" if gained else "") + (f" -{lost}" if lost else "")
                       + ("" if gained or lost else " reordered"))
    cpu_before, cpu_after = Counter(old.get("cpu_ops") or []), Counter(new.get("cpu_ops") or [])
    if cpu_before != cpu_after:
        gained, lost = sorted((cpu_after - cpu_before).elements()), sorted((cpu_before - cpu_after).elements())
        out.append("CPU ops" + (f" +{gained}" if gained else "") + (f" -{lost}" if lost else ""))
    return out


def numerics_threshold(old: dict, new: dict) -> float:
    """The smallest move of a worst error (LSB) that is a change: rounding
    noise between runs on the same ISA and thread counts; between runs on
    different machines, the measured band of the largest error
    (``compliance.BANDS["max_lsb"]``), so that machine noise is no change."""
    same = machine.same_computation((old.get("run") or {}).get("machine"), (new.get("run") or {}).get("machine"))
    return NUMERICS_EPSILON if same else max(NUMERICS_EPSILON, BANDS["max_lsb"].limit)


def diff_case(old: dict, new: dict, threshold: float = NUMERICS_EPSILON) -> CaseDiff:
    """The changes of one case between two reports (empty when none); a worst
    error moving by no more than ``threshold`` LSB is no change."""
    change = CaseDiff(id=new["id"], family=new.get("family", "?"))
    if old.get("outcome") != new.get("outcome"):
        change.outcome = (old.get("outcome"), new.get("outcome"))
    old_tests, new_tests = old.get("tests") or {}, new.get("tests") or {}
    change.tests = {t: (old_tests.get(t, "not run"), new_tests.get(t, "not run"))
                    for t in sorted(set(old_tests) | set(new_tests)) if old_tests.get(t) != new_tests.get(t)}
    if failure(old) != failure(new):
        change.failure = (failure(old), failure(new))
    old_sections, new_sections = set(old.get("golden_changed") or []), set(new.get("golden_changed") or [])
    change.goldens_new = sorted(new_sections - old_sections)
    change.goldens_gone = sorted(old_sections - new_sections)
    change.golden_words = [w for w in new.get("changes") or [] if w not in (old.get("changes") or [])]
    change.delegation = _delegation(old, new)
    before, after = _max_lsb(old), _max_lsb(new)
    for where in sorted(set(before) & set(after)):
        numbers = NumericsChange(new["id"], where, before[where], after[where])
        if after[where] > before[where] + threshold:
            change.numerics_worse.append(numbers)
        elif after[where] < before[where] - threshold:
            change.numerics_better.append(numbers)
    if _vulkan(old) != _vulkan(new) and _vulkan(old) and _vulkan(new):
        change.vulkan = (_vulkan(old), _vulkan(new))
    return change


def _verdict(verdict: dict | None) -> str | None:
    return None if verdict is None else ("needed" if verdict["needed"] else "not needed")


def diff_reports(old: dict, new: dict, old_name: str = "OLD", new_name: str = "NEW") -> ReportDiff:
    """Two loaded reports compared (see :func:`load_report`)."""
    old_cases = {c["id"]: c for c in old["cases"]}
    new_cases = {c["id"]: c for c in new["cases"]}
    common = sorted(set(old_cases) & set(new_cases))
    threshold = numerics_threshold(old, new)
    cases = []
    for case_id in sorted(set(old_cases) | set(new_cases)):
        if case_id not in old_cases:
            cases.append(CaseDiff(case_id, new_cases[case_id].get("family", "?"), status="added"))
        elif case_id not in new_cases:
            cases.append(CaseDiff(case_id, old_cases[case_id].get("family", "?"), status="removed"))
        else:
            change = diff_case(old_cases[case_id], new_cases[case_id], threshold)
            if change.phrases():
                cases.append(change)
    old_ledger = {w["name"]: w for w in old.get("workarounds") or []}
    new_ledger = {w["name"]: w for w in new.get("workarounds") or []}
    workarounds = [(name, _verdict(old_ledger.get(name)), _verdict(new_ledger.get(name)))
                   for name in sorted(set(old_ledger) | set(new_ledger))]
    old_versions = (old.get("candidate") or {}).get("versions") or {}
    new_versions = (new.get("candidate") or {}).get("versions") or {}
    if old_versions and new_versions:
        stack = [(p, old_versions.get(p), new_versions.get(p)) for p in sorted(set(old_versions) | set(new_versions))
                 if old_versions.get(p) != new_versions.get(p)]
    else:  # one side does not say its versions (a plain --vgf-report run): show what the other has
        stack = [(p, old_versions.get(p, "?"), new_versions.get(p, "?"))
                 for p in sorted(set(old_versions) | set(new_versions))]
    # Warnings are compared over the cases both reports ran (a wider scope is
    # not "new"), as a set: Python shows a warning once per process, so which
    # case of a run records it depends on how xdist dealt the cases.
    # A warning is the same one when only its line number moved (another release of the file).
    old_all = {_warning_key(w): w for i in common for w in old_cases[i].get("warnings") or []}
    new_all = {_warning_key(w): w for i in common for w in new_cases[i].get("warnings") or []}
    return ReportDiff(old_name, new_name, common, cases, workarounds, stack,
                      sorted(new_all[k] for k in set(new_all) - set(old_all)),
                      sorted(old_all[k] for k in set(old_all) - set(new_all)),
                      (machine.line((old.get("run") or {}).get("machine")),
                       machine.line((new.get("run") or {}).get("machine"))), threshold)


def _warning_key(warning: str) -> str:
    """A warning without the line number of its location ``(path:line)``."""
    return re.sub(r":\d+\)$", ")", warning.strip())


def render_markdown(delta: ReportDiff, max_rows: int = MAX_CASE_ROWS) -> str:
    """The diff as Markdown (a pull-request comment)."""
    changed = delta.changed
    added = [c for c in delta.cases if c.status == "added"]
    removed = [c for c in delta.cases if c.status == "removed"]
    lines = [f"## Conformance report: `{delta.old_name}` -> `{delta.new_name}`", ""]
    if delta.stack:
        lines += ["Stack: " + ", ".join(f"{p} {a or 'absent'} -> {b or 'absent'}" if a != b else f"{p} {a}"
                                        for p, a, b in delta.stack), ""]
    if delta.machines[0] != delta.machines[1]:
        lines += [f"Machines: `{delta.old_name}` ran on {delta.machines[0]}; `{delta.new_name}` on "
                  f"{delta.machines[1]}. Worst errors are compared within "
                  f"{delta.numerics_threshold:g} LSB (the measured cross-machine band).", ""]
    lines.append(f"{len(delta.common)} cases in both: **{len(changed)} changed**, "
                 f"{len(delta.common) - len(changed)} unchanged"
                 + (f"; {len(removed)} only in OLD" if removed else "")
                 + (f"; {len(added)} only in NEW" if added else "") + ".")
    groups = delta.groups()
    if groups:
        lines += ["", "### Summary", ""]
        lines += [f"- {n} {family} case{'s' if n > 1 else ''}: {phrase}" for family, phrase, n in groups]
    if changed:
        lines += ["", "### Per case", "", "| case | what changed |", "|---|---|"]
        for case in changed[:max_rows]:
            lines.append(f"| {case.id} | " + "<br>".join(_short(d, 400) for d in case.details()) + " |")
        if len(changed) > max_rows:
            lines.append(f"| ... | {len(changed) - max_rows} more changed cases (see `--json`) |")
    moved = [(n, a, b) for n, a, b in delta.workarounds if a != b]
    if delta.workarounds:
        lines += ["", "### Workaround verdicts", ""]
        if moved:
            lines += ["| workaround | OLD | NEW |", "|---|---|---|"]
            lines += [f"| {n} | {a or 'not probed'} | {b or 'not probed'} |" for n, a, b in moved]
        else:
            lines.append(f"Unchanged ({len(delta.workarounds)} workarounds).")
    if delta.new_warnings or delta.gone_warnings:
        lines += ["", "### Warnings (over the cases in both)", ""]
        lines += [f"- new: {_short(w, 300)}" for w in delta.new_warnings]
        lines += [f"- gone: {_short(w, 300)}" for w in delta.gone_warnings]
    if added or removed:
        lines += ["", "### Cases in one report only", ""]
        lines += [f"- only in OLD: {', '.join(c.id for c in removed[:50])}" + (" ..." if len(removed) > 50 else "")] if removed else []
        lines += [f"- only in NEW: {', '.join(c.id for c in added[:50])}" + (" ..." if len(added) > 50 else "")] if added else []
    return "\n".join(lines) + "\n"


def to_json(delta: ReportDiff) -> dict:
    return {**dataclasses.asdict(delta), "groups": [
        {"family": f, "change": p, "cases": n} for f, p, n in delta.groups()]}
