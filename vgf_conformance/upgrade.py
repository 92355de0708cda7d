"""An upgrade as a pull request: a candidate's goldens, lock and findings on a branch.

The upgrade workflow (``.github/workflows/upgrade.yml``) runs the whole matrix
on a candidate pin set (``candidates/NAME.txt``) with ``--snapshot-update``,
sharded (``scripts/upgrade_shard.sh``), then calls ``scripts/upgrade_pr.sh``,
which is these steps:

    python -m vgf_conformance upgrade collect NAME SHARD_DIR... [--out reports/upgrade]
        every shard's rewritten goldens into golden/cases (each case from the
        shard that ran it), the shard reports merged into one, the goldens
        of cases that left the table removed (only when the run covered the
        whole table), requirements.lock from the candidate's pip freeze
    python -m vgf_conformance upgrade commit NAME --base REV [--report DIR] [--body FILE]
        the branch upgrade/NAME at HEAD with one commit of golden/ and
        requirements.lock, and the pull request's body: the golden review
        of REV against that commit, then the candidate's findings
    python -m vgf_conformance upgrade pr NAME --body FILE
        open the draft pull request from upgrade/NAME, or update its body
        (GITHUB_API_URL, GITHUB_REPOSITORY, GH_TOKEN); never approves, never merges

Each step refuses, naming the argument, what it cannot do safely: a
candidate that did not install or run, shards that overlap, a case whose
golden a shard did not write, a stale golden on a partial run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from vgf_conformance.review import render, review
from vgf_conformance.goldens.stale import stale_goldens
from vgf_conformance.review.sources import GOLDEN_SUBDIR, LOCK_FILE, ReviewError

#: The branch an upgrade's pull request comes from.
BRANCH_PREFIX = "upgrade/"
#: What a shard directory holds besides its report (scripts/upgrade_shard.sh).
SHARD_GOLDENS, SHARD_FREEZE = "goldens", "freeze.txt"
#: Room kept in the pull request's body for the candidate's findings.
FINDINGS_BUDGET = 12_000

class UpgradeError(ValueError):
    """An upgrade step cannot go on safely."""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise UpgradeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


# --- collect ------------------------------------------------------------------
def _shard_report(shard: Path, name: str) -> dict:
    path = shard / "report.json"
    if not path.is_file():
        raise UpgradeError(f"SHARD_DIR: {shard} has no report.json (expected a directory written by "
                           "scripts/upgrade_shard.sh)")
    report = json.loads(path.read_text())
    record = report.get("candidate") or {}
    if record.get("name") not in (None, name):
        raise UpgradeError(f"SHARD_DIR: {shard} ran candidate {record.get('name')!r}, not {name!r}")
    if record and not (record.get("installs") and record.get("runs")):
        raise UpgradeError(f"candidate {name} did not {'install' if not record.get('installs') else 'run'}: "
                           f"{record.get('reason')} (no pull request for it)")
    return report


def collect(name: str, shards: list[Path], repo: Path, out: Path, table: set[str] | None) -> dict:
    """Merge the shards into the checkout at ``repo``; returns what was done.
    ``table``: the case ids of the table (None: do not look for stale goldens)."""
    from vgf_conformance.harness.reporting.publish import write_report
    from vgf_conformance.harness.reporting.records import merge_reports

    golden_dir = repo / GOLDEN_SUBDIR
    reports, owner, copies = [], {}, []
    for shard in shards:  # everything is checked before anything is written
        report = _shard_report(shard, name)
        reports.append(report)
        for case in report["cases"]:
            if case["id"] in owner:
                raise UpgradeError(f"SHARD_DIR: case {case['id']} is in {owner[case['id']]} and {shard}: "
                                   "the shards must be disjoint")
            owner[case["id"]] = shard
            source = shard / SHARD_GOLDENS / f"{case['id']}.json"
            if source.is_file():
                copies.append((source, golden_dir / source.name))
            elif case.get("outcome") == "passed":
                raise UpgradeError(f"SHARD_DIR: {shard} passed case {case['id']} but holds no golden for it")
    stale = []
    if table is not None:
        missing = sorted(table - set(owner))
        stale = stale_goldens(golden_dir, table)
        if stale and missing:
            raise UpgradeError(f"stale goldens ({', '.join(p.stem for p in stale[:5])}) are removed on a full "
                               f"run only; the shards did not run {len(missing)} case(s) of the table "
                               f"({', '.join(missing[:5])})")
    merged = merge_reports(reports)
    merged["candidate"] = next((r["candidate"] for r in reports if r.get("candidate")), None)
    write_report(merged, out, tuple(shards))
    written = []
    for source, target in copies:
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
            written.append(target.stem)
    for path in stale:
        path.unlink()
    removed = [path.stem for path in stale]
    freeze = next((s / SHARD_FREEZE for s in shards if (s / SHARD_FREEZE).is_file()), None)
    if freeze is not None:
        lines = [line.strip().replace("+cpu", "") for line in freeze.read_text().splitlines()
                 if "==" in line and not line.startswith(("-e", "#"))]  # pip freeze's own order
        old = (repo / LOCK_FILE).read_text().splitlines() if (repo / LOCK_FILE).is_file() else []
        header = [line for line in old if line.startswith("#")]  # the lock's own comments, kept
        (repo / LOCK_FILE).write_text("\n".join(header + lines) + "\n")
    return {"written": written, "removed": removed, "cases": len(owner), "lock": freeze is not None}


# --- commit and body -------------------------------------------------------------
def findings(report: dict | None, baseline: dict | None = None) -> str:
    """The candidate's findings for the pull request's body: its pins and
    versions, the workarounds it no longer needs, its warnings (new ones
    against ``baseline`` when given), the expected failures that now pass
    (the cases that fail are the review's, from the same report)."""
    if report is None:
        return ""
    record = report.get("candidate") or {}
    lines = ["", f"## Candidate {record.get('name', '?')}", ""]
    if record.get("pins"):
        lines.append("Pins: " + ", ".join(f"`{p}`" for p in record["pins"]))
    if record.get("versions"):
        lines.append("Installed: " + ", ".join(f"`{k}` {v}" for k, v in sorted(record["versions"].items())))
    unneeded = [w["name"] for w in report.get("workarounds") or [] if not w.get("needed")]
    lines += ["", "**Workarounds no longer needed**: " + (", ".join(f"`{w}`" for w in unneeded) or "none")]
    warnings = sorted({w for c in report["cases"] for w in c.get("warnings") or []})
    if baseline is not None:
        before = {w for c in baseline["cases"] for w in c.get("warnings") or []}
        warnings, title = [w for w in warnings if w not in before], "New warnings"
    else:
        title = "Warnings (no baseline report to tell the new ones)"
    lines += ["", f"**{title}**: {len(warnings)}"] + [f"- {w[:300]}" for w in warnings[:20]]
    xpassed = [c["id"] for c in report["cases"] if c.get("outcome") == "xpassed"]
    if xpassed:
        lines += ["", f"**Expected failures that now pass** (their expectation can go): {len(xpassed)}"]
        lines += [f"- `{case}`" for case in xpassed[:30]]
    text = "\n".join(lines) + "\n"
    return text if len(text) <= FINDINGS_BUDGET else text[: FINDINGS_BUDGET - 60] + "\n\n_(findings cut)_\n"


def commit(name: str, repo: Path, base: str, report_dir: Path | None, baseline: Path | None) -> tuple[str, str]:
    """The branch ``upgrade/NAME`` at HEAD with one commit of the goldens and
    the lock; returns (commit id, pull-request body)."""
    branch = BRANCH_PREFIX + name
    base = _git(repo, "rev-parse", "--verify", f"{base}^{{commit}}")  # before HEAD moves
    _git(repo, "checkout", "-q", "-B", branch)
    _git(repo, "add", "-A", "--", GOLDEN_SUBDIR, LOCK_FILE)
    if not _git(repo, "status", "--porcelain", "--", GOLDEN_SUBDIR, LOCK_FILE):
        raise UpgradeError(f"candidate {name} changes no golden and not the lock: nothing to propose")
    _git(repo, "commit", "-q", "-m", f"upgrade: {name}\n\nGoldens and requirements.lock as the candidate pin "
         f"set candidates/{name}.txt produces them (python -m vgf_conformance upgrade).")
    head = _git(repo, "rev-parse", "HEAD")
    report = json.loads((report_dir / "report.json").read_text()) if report_dir else None
    base_report = json.loads((baseline / "report.json").read_text()) if baseline else None
    extra = findings(report, base_report)
    result = review(base, head, repo=repo, report=report_dir)
    body = render.render_markdown(result, render.BUDGET - len(extra)) + extra
    body += ("\n_A draft opened by the upgrade workflow: review it, run what the repository requires, "
             "and merge it by hand; it is never approved or merged automatically._\n")
    return head, body


# --- the pull request ---------------------------------------------------------------
def open_or_update(name: str, body: str, base_branch: str, api: str, repository: str, token: str) -> str:
    """Open a draft pull request from upgrade/NAME, or update its body."""
    owner = repository.split("/", 1)[0]
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28"}

    def call(method: str, path: str, data: dict | None = None):
        request = urllib.request.Request(f"{api}/repos/{repository}{path}", method=method, headers=headers,
                                         data=json.dumps(data).encode() if data is not None else None)
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    branch = BRANCH_PREFIX + name
    existing = call("GET", f"/pulls?state=open&head={owner}:{branch}")
    if existing:
        updated = call("PATCH", f"/pulls/{existing[0]['number']}", {"body": body})
        return f"updated {updated['html_url']}"
    created = call("POST", "/pulls", {"title": f"Upgrade: {name}", "head": branch, "base": base_branch,
                                      "body": body, "draft": True})
    return f"opened {created['html_url']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance upgrade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    c = sub.add_parser("collect", help="merge the shards' goldens, reports and lock into the checkout")
    c.add_argument("name", help="the candidate (candidates/NAME.txt)")
    c.add_argument("shards", type=Path, nargs="+", help="shard directories (scripts/upgrade_shard.sh)")
    c.add_argument("--out", type=Path, default=Path("reports/upgrade"), help="the merged report's directory")
    c.add_argument("--no-stale", action="store_true", help="do not look for goldens of cases that left the table")
    m = sub.add_parser("commit", help="the branch upgrade/NAME, its commit and the pull request's body")
    m.add_argument("name")
    m.add_argument("--base", required=True, help="the revision the pull request goes into (e.g. origin/main)")
    m.add_argument("--report", type=Path, help="the merged report (collect --out)")
    m.add_argument("--baseline", type=Path, help="a report of the pinned stack (new warnings against it)")
    m.add_argument("--body", type=Path, default=Path("reports/upgrade/pr-body.md"), help="where the body goes")
    p = sub.add_parser("pr", help="open or update the draft pull request")
    p.add_argument("name")
    p.add_argument("--body", type=Path, required=True)
    p.add_argument("--base-branch", default="main")
    args = parser.parse_args(argv)
    repo = Path.cwd()
    try:
        if args.step == "collect":
            table = None
            if not args.no_stale:
                from vgf_conformance.cases import CASES

                table = set(CASES)
            done = collect(args.name, args.shards, repo, args.out, table)
            print(f"upgrade {args.name}: {done['cases']} cases run, {len(done['written'])} goldens rewritten, "
                  f"{len(done['removed'])} stale removed{', lock rewritten' if done['lock'] else ''}")
        elif args.step == "commit":
            head, body = commit(args.name, repo, args.base, args.report, args.baseline)
            args.body.parent.mkdir(parents=True, exist_ok=True)
            args.body.write_text(body)
            print(f"upgrade {args.name}: {BRANCH_PREFIX}{args.name} at {head[:10]}; body in {args.body}")
        else:
            missing = [v for v in ("GITHUB_API_URL", "GITHUB_REPOSITORY", "GH_TOKEN") if not os.environ.get(v)]
            if missing:
                parser.error(f"pr: the environment lacks {', '.join(missing)}")
            print(open_or_update(args.name, args.body.read_text(), args.base_branch, os.environ["GITHUB_API_URL"],
                                 os.environ["GITHUB_REPOSITORY"], os.environ["GH_TOKEN"]))
    except (UpgradeError, ReviewError) as error:
        print(f"{parser.prog} {args.step}: error: {error}", file=sys.stderr)
        return 2
    return 0
