"""``python -m vgf_conformance review BASE [HEAD]``: what changed in the goldens, grouped.

BASE and HEAD are git revisions or golden directories; HEAD defaults to the
working tree (untracked goldens included). Every golden that differs is
compared with the suite's own compliance comparison, so a drift inside its
measured band is no change; the cases whose changes have the same signature
form one group, and the groups are ordered by severity: the case itself,
goldens added or removed, delegation, graph/IO/.pte, TOSA, VGF, tolerant
fields out of band, numerics worse then better, schema-only changes.

    python -m vgf_conformance review main              # main against the working tree
    python -m vgf_conformance review 7dc5ca3~1 7dc5ca3
    python -m vgf_conformance review old/golden/cases new/golden/cases --json
    python -m vgf_conformance review main --report reports/run -o review.md

| module | what |
|---|---|
| ``sources.py`` | the goldens of a revision, a directory or the working tree, read with git |
| ``grouping.py`` | change signatures, severities, groups |
| ``render.py`` | Markdown within a character budget, JSON |

Standard library only (and the suite's comparison, itself standard library):
a CI job runs it with the project's wheel installed without its stack.
Exit status: 0 (a change is not an error), 2 with a message naming the
argument when BASE, HEAD or an option names nothing readable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vgf_conformance.review import grouping, render, sources
from vgf_conformance.review.sources import ReviewError


def review(base: str, head: str | None = None, repo: Path | None = None,
           golden_subdir: str = sources.GOLDEN_SUBDIR, report: Path | None = None) -> render.Review:
    """Compare the goldens of ``base`` with those of ``head`` (None: the
    working tree of ``repo``)."""
    need_repo = head is None or not Path(base).is_dir() or not Path(head).is_dir()
    root = sources.repository(repo or Path.cwd()) if need_repo else None
    base_side = sources.resolve(base, "BASE", root, golden_subdir)
    head_side = sources.resolve(head, "HEAD", root, golden_subdir)
    differing = sorted(c for c in set(base_side.ids) | set(head_side.ids)
                       if base_side.ids.get(c) != head_side.ids.get(c))
    stored = base_side.read([c for c in differing if c in base_side.ids])
    new = head_side.read([c for c in differing if c in head_side.ids])
    changes, within_band = [], []
    for case in differing:
        change = grouping.case_change(case, stored.get(case), new.get(case))
        if change is None:
            within_band.append(case)
        else:
            changes.append(change)

    known = base_side.lock is not None and head_side.lock is not None
    return render.Review(
        base=base_side.label, head=head_side.label, groups=grouping.group_changes(changes),
        compared=len(set(base_side.ids) | set(head_side.ids)), within_band=within_band,
        stack=render.stack_delta(base_side.lock, head_side.lock) if known else [], stack_known=known,
        failed=failed_cases(report) if report else [])


def failed_cases(report: Path) -> list[dict]:
    """The cases that failed or errored in a run (``--vgf-report``): their
    goldens were not rewritten, so the goldens alone do not show them."""
    from vgf_conformance.harness.reporting.diff import ReportError, load_report

    try:
        data = load_report(report, "--report")
    except ReportError as error:
        raise ReviewError(str(error)) from None
    return [{"id": c["id"], "family": c.get("family", "?"), "outcome": c.get("outcome"),
             "failure": case_failure(c)}
            for c in data["cases"] if c.get("outcome") in ("failed", "error")]


def case_failure(case: dict) -> str:
    """How a case of a report failed: its stage and error, or the tests that
    failed (a numerics or golden check fails after every stage passed)."""
    from vgf_conformance.harness.reporting.diff import failure as stage_error

    tests = [name for name, outcome in sorted((case.get("tests") or {}).items()) if outcome in ("failed", "error")]
    found = stage_error(case)
    if found:
        return found
    return f"{case.get('outcome', 'failed')}: {', '.join(tests)}" if tests else case.get("outcome", "failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance review", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", metavar="BASE", help="a git revision, a checkout, or a golden directory")
    parser.add_argument("head", metavar="HEAD", nargs="?",
                        help="the same (default: the working tree, untracked goldens included)")
    parser.add_argument("--repo", type=Path, help="the git repository revisions are read from (default: the "
                        "one holding the current directory)")
    parser.add_argument("--golden-dir", default=sources.GOLDEN_SUBDIR,
                        help=f"the golden directory inside the repository (default: {sources.GOLDEN_SUBDIR})")
    parser.add_argument("--report", type=Path, help="a run's report directory: add the cases that failed in it")
    parser.add_argument("--json", action="store_true", help="the review as JSON, for tools")
    parser.add_argument("--budget", type=int, default=render.BUDGET,
                        help=f"the Markdown's size limit in characters (default {render.BUDGET}, under "
                             "GitHub's 65,536 for a comment)")
    parser.add_argument("-o", "--out", type=Path, help="write here instead of standard output")
    args = parser.parse_args(argv)
    if args.budget < 1000:
        parser.error(f"--budget: expected at least 1000 characters, got {args.budget}")
    try:
        result = review(args.base, args.head, args.repo, args.golden_dir, args.report)
    except ReviewError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    text = (json.dumps(render.to_json(result), indent=1, sort_keys=True) + "\n" if args.json
            else render.render_markdown(result, args.budget))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
