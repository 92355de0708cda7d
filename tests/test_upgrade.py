"""The upgrade flow (``python -m vgf_conformance upgrade``) on a local git
repository: shards collected into the checkout, the branch upgrade/NAME with
one commit, the pull request's body, and the draft opened then updated
through a local stand-in for GitHub's API; each refusal names its cause."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from vgf_conformance import upgrade

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def _goldens(count: int) -> dict[str, str]:
    found = {}
    for path in sorted((ROOT / "golden" / "cases").glob("*.json")):
        if "rounding_mode=SINGLE_ROUND" in path.read_text():
            found[path.stem] = path.read_text()
        if len(found) == count:
            return found
    raise AssertionError("not enough goldens with a RESCALE")


def _shard(directory: Path, cases: list[dict], goldens: dict[str, str], candidate: dict | None,
           workarounds=(), freeze: str | None = None) -> Path:
    (directory / upgrade.SHARD_GOLDENS).mkdir(parents=True)
    report = {"cases": cases, "workarounds": list(workarounds)}
    if candidate:
        report["candidate"] = candidate
    (directory / "report.json").write_text(json.dumps(report))
    for case, text in goldens.items():
        (directory / upgrade.SHARD_GOLDENS / f"{case}.json").write_text(text)
    if freeze:
        (directory / upgrade.SHARD_FREEZE).write_text(freeze)
    return directory


CANDIDATE = {"name": "cand", "pins": ["executorch==1.6.0"], "installs": True, "runs": True, "reason": None,
             "versions": {"executorch": "1.6.0"}, "scope": "--snapshot-update"}


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A repository with four goldens (d's case has left the table) and a
    lock; two shards of candidate ``cand``: a and c rewritten with DOUBLE_ROUND,
    b failed (its golden not rewritten), a pip freeze that moves ExecuTorch."""
    monkeypatch.setattr(os, "environ", {**os.environ, **GIT_ENV})
    repo = tmp_path / "repo"
    (repo / "golden" / "cases").mkdir(parents=True)
    real = _goldens(4)
    ids = dict(zip("abcd", real))
    for case, text in real.items():
        (repo / "golden" / "cases" / f"{case}.json").write_text(text)
    (repo / "requirements.lock").write_text("executorch==1.5.1\ntorch==2.13.0\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    double = {k: real[ids[k]].replace("SINGLE_ROUND", "DOUBLE_ROUND") for k in "ac"}
    shards = [
        _shard(tmp_path / "s1", [{"id": ids["a"], "outcome": "passed"},
                                 {"id": ids["b"], "outcome": "failed", "stage": "lower",
                                  "error": "RuntimeError: the candidate broke it"}],
               {ids["a"]: double["a"], ids["b"]: real[ids["b"]]}, CANDIDATE,
               [{"name": "bilinear-scale-factor", "needed": False, "evidence": [], "upstream": ""}],
               "executorch==1.6.0\ntorch==2.13.0+cpu\n-e git+https://example.invalid/x#egg=x\n"),
        _shard(tmp_path / "s2", [{"id": ids["c"], "outcome": "passed"}], {ids["c"]: double["c"]}, CANDIDATE),
    ]
    return repo, shards, ids, {ids["a"], ids["b"], ids["c"]}


def test_collect_commit_and_body(checkout, tmp_path):
    repo, shards, ids, table = checkout
    done = upgrade.collect("cand", shards, repo, tmp_path / "merged", table)
    assert sorted(done["written"]) == sorted([ids["a"], ids["c"]]) and done["removed"] == [ids["d"]]
    lock = (repo / "requirements.lock").read_text()
    assert "executorch==1.6.0\ntorch==2.13.0\n" in lock and "-e " not in lock
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert len(merged["cases"]) == 3 and merged["candidate"]["name"] == "cand"
    base = _git(repo, "rev-parse", "HEAD")
    head, body = upgrade.commit("cand", repo, base, tmp_path / "merged", None)
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "upgrade/cand"
    assert _git(repo, "rev-parse", "HEAD~1") == base
    changed = _git(repo, "diff", "--name-status", base, head).splitlines()
    assert sorted(changed) == sorted([f"M\tgolden/cases/{ids['a']}.json", f"M\tgolden/cases/{ids['c']}.json",
                                      f"D\tgolden/cases/{ids['d']}.json", "M\trequirements.lock"])
    assert "`executorch` 1.5.1 -> 1.6.0" in body
    assert "RESCALE rounding_mode: SINGLE_ROUND -> DOUBLE_ROUND" in body
    assert "golden removed" in body
    assert "**Workarounds no longer needed**: `bilinear-scale-factor`" in body
    assert "1 case(s) failed in the run" in body and "the candidate broke it" in body
    assert len(body) <= 65_536 and "never approved or merged automatically" in body


def test_refusals_name_their_cause(checkout, tmp_path):
    repo, shards, ids, table = checkout
    with pytest.raises(upgrade.UpgradeError, match="must be disjoint"):
        upgrade.collect("cand", [shards[0], shards[0]], repo, tmp_path / "m1", table)
    with pytest.raises(upgrade.UpgradeError, match="on a full run only; the shards did not run 1 case"):
        upgrade.collect("cand", shards[:1], repo, tmp_path / "m2", table)
    assert (repo / "golden" / "cases" / f"{ids['d']}.json").is_file()  # nothing removed on refusal
    with pytest.raises(upgrade.UpgradeError, match="ran candidate 'cand', not 'other'"):
        upgrade.collect("other", shards, repo, tmp_path / "m3", table)
    broken = _shard(tmp_path / "s3", [], {}, {**CANDIDATE, "installs": False,
                                             "reason": "pip cannot resolve the pin set"})
    with pytest.raises(upgrade.UpgradeError, match="did not install: pip cannot resolve"):
        upgrade.collect("cand", [broken], repo, tmp_path / "m4", table)
    with pytest.raises(upgrade.UpgradeError, match="changes no golden"):
        upgrade.commit("cand", repo, "HEAD", None, None)


class _GitHub(http.server.BaseHTTPRequestHandler):
    """GitHub's pulls API as far as ``upgrade pr`` uses it, in memory."""

    pulls: list[dict] = []
    calls: list[tuple[str, str, dict | None]] = []

    def _reply(self, data) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _body(self):
        size = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(size)) if size else None

    def do_GET(self):  # noqa: N802 - http.server's name
        self.calls.append(("GET", self.path, None))
        self._reply([p for p in self.pulls if p["head"] == "upgrade/cand"])

    def do_POST(self):  # noqa: N802
        data = self._body()
        self.calls.append(("POST", self.path, data))
        self.pulls.append({**data, "number": 7, "html_url": "http://127.0.0.1/pull/7"})
        self._reply(self.pulls[-1])

    def do_PATCH(self):  # noqa: N802
        data = self._body()
        self.calls.append(("PATCH", self.path, data))
        self.pulls[0].update(data)
        self._reply(self.pulls[0])

    def log_message(self, *args):
        pass


def test_the_draft_is_opened_once_then_updated():
    server = http.server.HTTPServer(("127.0.0.1", 0), _GitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = f"http://127.0.0.1:{server.server_port}"
    try:
        first = upgrade.open_or_update("cand", "body one", "main", api, "team/repo", "token")
        second = upgrade.open_or_update("cand", "body two", "main", api, "team/repo", "token")
    finally:
        server.shutdown()
    assert first.startswith("opened") and second.startswith("updated")
    methods = [(m, p) for m, p, _ in _GitHub.calls]
    assert methods == [("GET", "/repos/team/repo/pulls?state=open&head=team:upgrade/cand"),
                       ("POST", "/repos/team/repo/pulls"),
                       ("GET", "/repos/team/repo/pulls?state=open&head=team:upgrade/cand"),
                       ("PATCH", "/repos/team/repo/pulls/7")]
    created = _GitHub.calls[1][2]
    assert created["draft"] is True and created["base"] == "main" and created["head"] == "upgrade/cand"
    assert _GitHub.pulls[0]["body"] == "body two"
    assert not any("merge" in p or "review" in p for _, p, _ in _GitHub.calls)
