"""A review as Markdown for a pull request (within a character budget) or as JSON.

The Markdown is a header of counts and the stack delta, one table row per
group (severity, cases by family, the change in words), then a
``<details>`` block per group: one case's findings in full and the other
case ids. A pull-request comment holds at most 65,536 characters, so the
rendering keeps to a budget (:data:`BUDGET`): it drops the details of the
least severe groups first, then table rows, and says what it dropped.
"""

from __future__ import annotations

import dataclasses

from vgf_conformance.review.grouping import SEVERITIES, Group

#: The default character budget: under GitHub's 65,536 for a comment body.
BUDGET = 60_000
#: Findings shown in full for a group's example case; the rest are counted.
EXAMPLE_FINDINGS = 40
#: The hidden marker the pull-request job finds its own comment by.
MARKER = "<!-- vgf-conformance golden review -->"


@dataclasses.dataclass
class Review:
    """What ``review`` found between two sides."""

    base: str
    head: str
    groups: list[Group]
    compared: int  # goldens on either side
    within_band: list[str]  # differ byte-wise, every field inside its mode
    stack: list[tuple[str, str | None, str | None]]  # (package, base version, head version)
    stack_known: bool
    failed: list[dict] = dataclasses.field(default_factory=list)  # from --report: {id, family, stage, error}

    @property
    def changed(self) -> int:
        return sum(len(g.changes) for g in self.groups)

    def count(self, kind: str) -> int:
        return sum(len(g.changes) for g in self.groups if g.changes[0].kind == kind)


def lock_versions(text: str | None) -> dict[str, str]:
    """``name==version`` lines of a requirements lock, names normalized."""
    versions = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            versions[name.strip().lower().replace("_", "-")] = version.split(";")[0].strip()
    return versions


def stack_delta(base_lock: str | None, head_lock: str | None) -> list[tuple[str, str | None, str | None]]:
    before, after = lock_versions(base_lock), lock_versions(head_lock)
    return [(name, before.get(name), after.get(name)) for name in sorted(set(before) | set(after))
            if before.get(name) != after.get(name)]


def _families(group: Group) -> str:
    return ", ".join(f"{family} {count}" for family, count in sorted(group.families().items(),
                                                                      key=lambda kv: (-kv[1], kv[0])))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _header(review: Review) -> list[str]:
    lines = [MARKER, f"## Golden review: `{review.base}` -> `{review.head}`", ""]
    counts = [f"{review.count(kind)} {words}" for kind, words in (
        ("changed", "outside their compliance modes"), ("added", "added"), ("removed", "removed"),
        ("unreadable", "not JSON")) if review.count(kind)]
    parts = [f"**{review.changed} goldens changed** in {len(review.groups)} groups: " + ", ".join(counts)
             if review.groups else "**No golden changed**"]
    if review.within_band:
        parts.append(f"{len(review.within_band)} more differ only inside their measured bands (no change)")
    lines.append("; ".join(parts) + f"; {review.compared} goldens in all.")
    lines.append("")
    if not review.stack_known:
        lines.append("Stack: not known (a golden directory has no `requirements.lock`).")
    elif review.stack:
        lines.append("Stack (`requirements.lock`): " + ", ".join(
            f"`{name}` {old or '(none)'} -> {new or '(none)'}" for name, old, new in review.stack) + ".")
    else:
        lines.append("Stack (`requirements.lock`): unchanged.")
    return lines


def _table(review: Review, rows: int) -> list[str]:
    if not review.groups:
        return []
    lines = ["", "| # | severity | cases | change |", "|---|---|---|---|"]
    for index, group in enumerate(review.groups[:rows], 1):
        lines.append(f"| {index} | {SEVERITIES[group.severity]} | {len(group.changes)} ({_families(group)}) "
                     f"| {_cell(group.words())} |")
    if rows < len(review.groups):
        lines.append(f"| | | | {len(review.groups) - rows} more group(s) left out to fit the budget |")
    return lines


def _details(index: int, group: Group) -> list[str]:
    example = group.changes[0]
    lines = ["", f"<details><summary>{index}. {SEVERITIES[group.severity]}: {len(group.changes)} case(s): "
                 f"{_cell(group.words())}</summary>", "", f"Example: `{example.case}`", "", "```"]
    if example.kind == "unreadable":
        lines.append(example.problem)
    elif example.kind != "changed":
        lines.append(f"golden {example.kind}")
    lines += [f.message() for f in example.ordered_findings()[:EXAMPLE_FINDINGS]]
    if len(example.findings) > EXAMPLE_FINDINGS:
        lines.append(f"... and {len(example.findings) - EXAMPLE_FINDINGS} more finding(s)")
    lines.append("```")
    others = group.cases[1:]
    if others:
        lines += ["", f"The other {len(others)}: " + ", ".join(f"`{c}`" for c in others)]
    return lines + ["", "</details>"]


def _failed(review: Review) -> list[str]:
    if not review.failed:
        return []
    lines = ["", f"### {len(review.failed)} case(s) failed in the run", "",
             "A failure is never accepted by `--snapshot-update`: fix it, or declare it an expected failure "
             "with its stage and error, before this lands.", "",
             "| case | family | failure |", "|---|---|---|"]
    lines += [f"| `{c['id']}` | {c['family']} | {_cell(c['failure'])} |" for c in review.failed]
    return lines


def render_markdown(review: Review, budget: int = BUDGET) -> str:
    """The review as Markdown, at most ``budget`` characters."""
    if not review.groups and not review.failed:
        band = (f" ({len(review.within_band)} differ only inside their measured bands)"
                if review.within_band else "")
        return f"No golden changed between `{review.base}` and `{review.head}`{band}.\n"
    details = [_details(i, g) for i, g in enumerate(review.groups, 1)]
    rows = len(review.groups)
    while True:
        note = []
        if len(details) < len(review.groups):
            note = ["", f"_Details of groups {len(details) + 1}-{len(review.groups)} were dropped to fit "
                        f"{budget} characters: `python -m vgf_conformance review` prints them all._"]
        text = "\n".join(_header(review) + _table(review, rows) + _failed(review) + note
                         + [line for block in details for line in block]) + "\n"
        if len(text) <= budget:
            return text
        if details:
            details.pop()
        elif rows > 1:
            rows = max(1, rows // 2)
        else:
            return text[: budget - 80] + "\n\n_(cut at the budget)_\n"


def to_json(review: Review) -> dict:
    return {
        "base": review.base, "head": review.head, "compared": review.compared,
        "changed": review.changed, "within_band": review.within_band,
        "stack": [{"package": n, "base": b, "head": h} for n, b, h in review.stack] if review.stack_known else None,
        "failed": review.failed,
        "groups": [{
            "severity": group.severity, "words": group.words(), "cases": group.cases,
            "families": dict(sorted(group.families().items())),
            "signature": [dataclasses.asdict(e) for e in group.signature if not isinstance(e, str)],
            "kind": group.changes[0].kind,
            "example": {"case": group.changes[0].case, "problem": group.changes[0].problem,
                        "findings": [f.to_dict() for f in group.changes[0].ordered_findings()]},
        } for group in review.groups],
    }
