"""Golden changes grouped by what changed, ordered by how much it matters.

Each changed golden is compared with the project's own compliance comparison
(:func:`vgf_conformance.goldens.compliance.compare`), so a drift inside its
measured band is no change. Its findings, with indices, hashes, shapes and
numbers abstracted and categorical values kept (``SINGLE_ROUND`` ->
``DOUBLE_ROUND`` stays, ``multiplier=[20344]`` does not), are its **change
signature**; the cases with equal signatures form one group. A group's
severity is its most severe finding's (:data:`SEVERITIES`, most severe
first); groups are ordered by severity, then by size.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter

from vgf_conformance.goldens.compliance import ABSENT, EXACT, NO_ATTRIBUTE, STAT_BANDS, Finding, compare

#: The severities, most severe first: key -> what a reviewer reads.
SEVERITIES = {
    "unreadable": "golden is not JSON",
    "case": "the case itself changed",
    "added/removed": "goldens added or removed",
    "delegation": "delegation and CPU fallbacks",
    "program": "graph, IO quantization, .pte",
    "tosa": "TOSA ops and exact attributes",
    "vgf": "VGF",
    "tolerant": "tolerant fields out of band",
    "numerics worse": "numerics worse",
    "numerics better": "numerics better",
    "schema": "schema only (fields absent before)",
}
#: The severity of an exact change in each section (a section not named here: "program").
SECTION_SEVERITY = {"case": "case", "delegates": "delegation", "cpu_ops": "delegation", "graph": "program",
                    "io_quant_params": "program", "pte": "program", "tosa": "tosa", "grid_sampler": "tosa",
                    "vgf": "vgf", "numerics": "numerics worse"}
#: Statistics for which a larger value is better (the others: a larger magnitude is worse).
HIGHER_IS_BETTER = {"snr_db"}

_INDEX = re.compile(r"\[\d+\]")
_HASH = re.compile(r"\b[0-9a-f]{8,64}\b")
_SHAPE = re.compile(r"\b\d+(?:x\d+)+\b")
_NUMBER = re.compile(r"(?<![A-Za-z_0-9.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_REPEATED = re.compile(r"#(?:,#)+")


def abstract(value) -> str:
    """A value with its numbers, hashes and shapes abstracted, a list by its
    distinct items (its length is a number too); categorical text (op
    names, dtypes, modes, booleans) kept."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)):
        return "#"
    if value == ABSENT:
        return ABSENT
    if isinstance(value, list):  # its length is a number too: the distinct items, sorted
        return "[" + ", ".join(sorted({abstract(item) for item in value})) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {abstract(item)}" for key, item in sorted(value.items())) + "}"
    text = _NUMBER.sub("#", _SHAPE.sub("<shape>", _HASH.sub("<hash>", value)))
    return _REPEATED.sub("#,...", text)


def abstract_path(path: str) -> str:
    return _INDEX.sub("[*]", path)


def _numerics_direction(finding: Finding) -> str | None:
    """"worse" or "better" for a numerics statistic that moved, else None."""
    key = finding.path.rsplit(".", 1)[-1]
    before, after = _statistic(finding.stored), _statistic(finding.new)
    if key not in STAT_BANDS or before is None or after is None:
        return None
    if math.isnan(after) or (math.isnan(before) and not math.isnan(after)):
        return "worse" if math.isnan(after) else "better"
    if key in HIGHER_IS_BETTER:
        return "better" if after > before else "worse"
    return "better" if abs(after) < abs(before) else "worse"


def _statistic(value) -> float | None:
    """A recorded statistic as a number: "inf", "-inf" and "nan" included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return float(value) if value in ("inf", "-inf", "nan") else None


@dataclasses.dataclass(frozen=True, order=True)
class Element:
    """One finding, abstracted: a part of a change signature."""

    section: str
    path: str
    op: str
    field: str
    stored: str
    new: str
    mode: str

    @classmethod
    def of(cls, finding: Finding) -> Element:
        stored, new = abstract(finding.stored), abstract(finding.new)
        if finding.path == finding.section:  # a whole section on one side only
            stored = ABSENT if finding.stored is None else stored
            new = ABSENT if finding.new is None else new
        if finding.section == "numerics":
            direction = _numerics_direction(finding)
            if direction:
                stored, new = "#", direction
        return cls(finding.section, abstract_path(finding.path), finding.op, abstract(finding.field),
                   stored, new, finding.mode)

    @classmethod
    def statistics(cls, direction: str) -> Element:
        """The statistics of a case's numerics that moved, as one element."""
        return cls("numerics", "numerics statistics", "", "", "#", direction, "band")

    @property
    def is_statistic(self) -> bool:
        """A numerics statistic out of its band (which way it moved in ``new``)."""
        return self.section == "numerics" and self.new in ("worse", "better")

    @property
    def is_schema(self) -> bool:
        """A field absent before and present now: the golden's schema grew
        (a field the suite records now), not a change of the stack. A field
        removed is no schema change: what it held is no longer checked."""
        return self.stored == ABSENT and not self.field

    def severity(self) -> str:
        if self.is_schema:
            return "schema"
        if self.section == "numerics" and self.new in ("worse", "better"):
            return f"numerics {self.new}"
        if self.mode != EXACT:
            return "numerics worse" if self.section == "numerics" else "tolerant"
        return SECTION_SEVERITY.get(self.section, "program")

    def words(self) -> str:
        """This change in words."""
        where = " ".join(part for part in (self.path, self.op) if part)
        if self.stored in (ABSENT, NO_ATTRIBUTE) or self.new in (ABSENT, NO_ATTRIBUTE):
            verb = "added" if self.stored in (ABSENT, NO_ATTRIBUTE) else "removed"
            return " ".join(part for part in (where, self.field, verb) if part)
        if self.new in ("worse", "better") and self.section == "numerics":
            return f"{where} {self.new}"
        if self.mode != EXACT:
            return f"{where} {self.field} outside its band ({self.mode})".replace("  ", " ")
        if self.field == "(length)":
            return f"{where} length changed ({_clip(self.new, 90)})"
        name = f"{where} {self.field}".strip()
        if len(self.stored) + len(self.new) <= 60 and self.stored != self.new:
            return f"{name}: {self.stored} -> {self.new}"
        return f"{name} changed"


def _clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 3] + "..."


@dataclasses.dataclass
class CaseChange:
    """One golden that changed between the two sides."""

    case: str
    family: str
    kind: str  # "changed", "added", "removed", "unreadable"
    findings: list[Finding]
    elements: frozenset = frozenset()
    #: Set for "unreadable": why the golden could not be parsed.
    problem: str = ""

    def ordered_findings(self) -> list[Finding]:
        """The findings, most severe first (in the comparison's order within a severity)."""
        order = list(SEVERITIES)
        return sorted(self.findings, key=lambda f: order.index(Element.of(f).severity()))

    @property
    def numerics(self) -> str | None:
        """"worse" when any statistic of the case moved the wrong way out of
        its band, "better" when all that moved improved, None when none did."""
        moved = {e.new for e in self.elements if e.is_statistic}
        return "worse" if "worse" in moved else ("better" if moved else None)

    @property
    def signature(self) -> tuple:
        """What the case's change is. The statistics that moved are a
        consequence of the others (one rounding change moves different
        statistics in every case), so they enter only a change that has
        nothing else, as one direction; a group words how many moved which way."""
        if self.kind != "changed":
            return (self.kind,)
        cause = sorted(e for e in self.elements if not e.is_statistic)
        return tuple(cause) if cause else (Element.statistics(self.numerics),)


@dataclasses.dataclass
class Group:
    """The cases whose changes have one signature."""

    signature: tuple
    severity: str
    changes: list[CaseChange]

    @property
    def cases(self) -> list[str]:
        return [c.case for c in self.changes]

    def families(self) -> Counter:
        return Counter(c.family for c in self.changes)

    def words(self, limit: int = 3) -> str:
        kind = self.changes[0].kind
        if kind == "added":
            return "golden added (a new case)"
        if kind == "removed":
            return "golden removed (the case left the table)"
        if kind == "unreadable":
            return "the golden is not JSON (a merge conflict?)"
        ordered = sorted(self.signature, key=lambda e: (list(SEVERITIES).index(e.severity()), e))
        phrases = list(dict.fromkeys(e.words() for e in ordered))
        more = f" (+{len(phrases) - limit} more)" if len(phrases) > limit else ""
        moved = Counter(c.numerics for c in self.changes if c.numerics)
        numerics = ("; numerics " + ", ".join(f"{way} in {moved[way]}" for way in ("worse", "better") if moved[way])
                    if moved and not all(e.is_statistic for e in self.signature) else "")
        return "; ".join(phrases[:limit]) + more + numerics


def _family(*goldens) -> str:
    for golden in goldens:
        case = golden.get("case") if isinstance(golden, dict) else None
        if isinstance(case, dict) and isinstance(case.get("family"), str):
            return case["family"]
    return "?"


def _parse(text: str | None):
    if text is None:
        return None, ""
    try:
        return json.loads(text), ""
    except ValueError as error:
        return None, f"not JSON ({error})"


def case_change(case: str, stored_text: str | None, new_text: str | None) -> CaseChange | None:
    """What changed in one golden (None: nothing outside the compliance modes)."""
    stored, stored_problem = _parse(stored_text)
    new, new_problem = _parse(new_text)
    if stored_problem or new_problem:
        side = "HEAD" if new_problem else "BASE"
        return CaseChange(case, _family(new, stored), "unreadable", [],
                          problem=f"{side}: {new_problem or stored_problem}")
    if stored is None:
        return CaseChange(case, _family(new), "added", [])
    if new is None:
        return CaseChange(case, _family(stored), "removed", [])
    findings = compare(stored, new).findings
    if not findings:
        return None
    return CaseChange(case, _family(new, stored), "changed", findings, frozenset(map(Element.of, findings)))


def group_changes(changes: list[CaseChange]) -> list[Group]:
    """Groups of equal signatures, most severe first, then the largest."""
    order = list(SEVERITIES)
    by_signature: dict[tuple, list[CaseChange]] = {}
    for change in sorted(changes, key=lambda c: c.case):
        by_signature.setdefault(change.signature, []).append(change)
    groups = []
    for signature, members in by_signature.items():
        kind = members[0].kind
        if kind == "changed":
            severity = min((e.severity() for e in signature), key=order.index)
        else:
            severity = "unreadable" if kind == "unreadable" else "added/removed"
        groups.append(Group(signature, severity, members))
    return sorted(groups, key=lambda g: (order.index(g.severity), -len(g.changes), g.cases[0]))
