"""``python -m vgf_conformance review``: golden changes between two revisions,
grouped by change signature and ordered by severity, on a small git
repository with two revisions made from real goldens; the comparison's
findings are structured and word the same messages as before."""

from __future__ import annotations

import json
import os
import re
import subprocess
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from vgf_conformance import review as review_cli
from vgf_conformance.goldens import compliance
from vgf_conformance.review import grouping, render

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = ROOT / "golden" / "cases"


def _real_goldens(count: int) -> dict[str, dict]:
    """``count`` real goldens with a calibrated RESCALE and a VGF segment."""
    found = {}
    for path in sorted(GOLDENS.glob("*.json")):
        golden = json.loads(path.read_text())
        ops = [op for entry in golden.get("tosa", []) for op in entry.get("ops", [])]
        if any(" RESCALE(" in op and "rounding_mode=SINGLE_ROUND" in op for op in ops) and golden.get("vgf"):
            found[path.stem] = golden
        if len(found) == count:
            return found
    raise AssertionError(f"fewer than {count} goldens with a RESCALE and a VGF segment in {GOLDENS}")


def _scale_multipliers(golden: dict, factor: float) -> dict:
    """Every RESCALE multiplier of ``golden`` times ``factor``."""
    def scale(match):
        values = [min(2**31 - 1, round(int(v) * factor)) for v in match[1].split(",")]
        return f"multiplier=[{','.join(map(str, values))}]"

    golden = json.loads(json.dumps(golden))
    for entry in golden["tosa"]:
        entry["ops"] = [re.sub(r"multiplier=\[([\d,]+)\]", scale, op) if " RESCALE(" in op else op
                        for op in entry["ops"]]
    return golden


def _round_double(golden: dict) -> dict:
    text = json.dumps(golden).replace("rounding_mode=SINGLE_ROUND", "rounding_mode=DOUBLE_ROUND")
    return json.loads(text)


def _with_new_segment_field(golden: dict) -> dict:
    golden = json.loads(json.dumps(golden))
    for entry in golden["vgf"]:
        for segment in entry["segments"]:
            segment["spirv_version"] = "1.6"
    return golden


def _write(directory: Path, goldens: dict[str, dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob("*.json"):
        path.unlink()
    for case, golden in goldens.items():
        (directory / f"{case}.json").write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture(scope="module")
def two_revisions(tmp_path_factory):
    """A repository whose second commit holds, over nine real goldens: the
    rounding mode changed in two, multipliers 1% and 3% off in two (one
    change: tolerant, out of band), a 5e-8 relative multiplier drift in one
    (inside its band: no change), a new field on every VGF segment (schema),
    one golden removed, one added, and a case's own parameters changed in
    one; and a lock that moves ExecuTorch."""
    repo = tmp_path_factory.mktemp("review-repo")
    _git(repo, "init", "-q", "-b", "main")
    real = _real_goldens(9)
    ids = list(real)
    golden_dir = repo / "golden" / "cases"
    base = {case: real[case] for case in ids[:8]}
    base[ids[4]] = _with_new_segment_field(base[ids[4]])  # this case had the field already
    _write(golden_dir, base)
    (repo / "requirements.lock").write_text("executorch==1.5.1\ntorch==2.13.0\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    head = {case: _with_new_segment_field(golden) for case, golden in base.items()}
    head[ids[0]] = _round_double(head[ids[0]])
    head[ids[1]] = _round_double(head[ids[1]])
    # the same rounding change moves different statistics, one each way
    head[ids[0]]["numerics"]["outputs"][0]["vs_float"]["max_lsb"] += 1.0
    head[ids[1]]["numerics"]["outputs"][0]["vs_float"]["snr_db"] += 5.0
    head[ids[2]] = _scale_multipliers(head[ids[2]], 1.01)
    head[ids[3]] = _scale_multipliers(head[ids[3]], 1.03)
    head[ids[4]] = _scale_multipliers(base[ids[4]], 1 + 5e-8)
    head[ids[5]]["case"]["inputs"][0]["kind"] = "changed-by-the-test"
    del head[ids[6]]
    head[ids[8]] = _with_new_segment_field(real[ids[8]])
    _write(golden_dir, head)
    (repo / "requirements.lock").write_text("executorch==1.6.0\ntorch==2.13.0\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "head")
    return repo, ids


def grouping_problems(result: render.Review, ids: list[str]) -> list[str]:
    """What is wrong with the review of ``two_revisions`` (empty: nothing)."""
    problems = []
    by_case = {case: group for group in result.groups for case in group.cases}
    if by_case.get(ids[0]) is None or by_case.get(ids[0]) is not by_case.get(ids[1]):
        problems.append("the two rounding-mode changes are not one group (statistics moved differently)")
    elif "numerics worse in 1, better in 1" not in by_case[ids[0]].words():
        problems.append(f"the rounding group does not count its numerics: {by_case[ids[0]].words()}")
    if by_case.get(ids[2]) is None or by_case.get(ids[2]) is not by_case.get(ids[3]):
        problems.append("multipliers off by 1% and by 3% are not one group (numbers must be abstracted)")
    if ids[4] in by_case or result.within_band != [ids[4]]:
        problems.append(f"the in-band drift is reported as a change ({result.within_band})")
    schema = [g for g in result.groups if g.severity == "schema"]
    if len(schema) != 1 or set(schema[0].cases) != {ids[7]}:
        problems.append(f"schema-only group: {[g.cases for g in schema]}, expected [[{ids[7]}]]")
    severities = [g.severity for g in result.groups]
    expected = ["case", "added/removed", "added/removed", "tosa", "tolerant", "schema"]
    if severities != expected:
        problems.append(f"severities in order {severities}, expected {expected}")
    return problems


def test_review_groups_equal_changes_and_orders_them_by_severity(two_revisions):
    repo, ids = two_revisions
    result = review_cli.review("main~1", "main", repo=repo)
    assert grouping_problems(result, ids) == []
    assert result.stack == [("executorch", "1.5.1", "1.6.0")]
    words = {g.severity: g.words() for g in result.groups}
    assert words["tosa"].startswith("tosa[*].ops[*] RESCALE rounding_mode: SINGLE_ROUND -> DOUBLE_ROUND"), words
    assert "vgf[*].segments[*].spirv_version added" in words["schema"]


def test_grouping_by_raw_values_fails_the_check(two_revisions, monkeypatch):
    """The fault the abstraction exists for: with values kept raw, the two
    multiplier changes (1% and 3%) fall into two groups."""
    repo, ids = two_revisions
    monkeypatch.setattr(grouping, "abstract", lambda value: json.dumps(value, sort_keys=True))
    problems = grouping_problems(review_cli.review("main~1", "main", repo=repo), ids)
    assert any("multipliers off by 1% and by 3%" in p for p in problems), problems


def test_statistics_in_the_signature_fail_the_check(two_revisions, monkeypatch):
    """The fault the folding exists for: with every statistic that moved in
    the signature, one rounding change splits into a group per pattern of
    statistics (202 goldens in 78 groups on a real run, instead of 3)."""
    repo, ids = two_revisions
    monkeypatch.setattr(grouping.CaseChange, "signature",
                        property(lambda c: (c.kind,) if c.kind != "changed" else tuple(sorted(c.elements))))
    problems = grouping_problems(review_cli.review("main~1", "main", repo=repo), ids)
    assert any("rounding-mode changes are not one group" in p for p in problems), problems


def test_severity_by_section_alone_fails_the_check(two_revisions, monkeypatch):
    """The fault the ordering exists for: a severity that ignores modes and
    added fields puts the tolerant and schema groups among the exact ones."""
    repo, ids = two_revisions
    monkeypatch.setattr(grouping.Element, "severity", lambda e: grouping.SECTION_SEVERITY.get(e.section, "program"))
    assert grouping_problems(review_cli.review("main~1", "main", repo=repo), ids)


def test_markdown_has_counts_stack_table_and_details(two_revisions, capsys):
    repo, ids = two_revisions
    assert review_cli.main(["main~1", "main", "--repo", str(repo)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(render.MARKER)
    assert "**8 goldens changed** in 6 groups" in text
    assert "1 more differ only inside their measured bands" in text
    assert "`executorch` 1.5.1 -> 1.6.0" in text
    assert text.count("<details>") == 6 and text.count("| ") > 6
    assert "rounding_mode: stored SINGLE_ROUND, new DOUBLE_ROUND (exact)" in text


def test_the_budget_drops_details_first_and_says_so(two_revisions):
    repo, _ = two_revisions
    result = review_cli.review("main~1", "main", repo=repo)
    full = render.render_markdown(result, budget=10**6)
    budget = len(full) - 200
    cut = render.render_markdown(result, budget=budget)
    assert len(cut) <= budget
    assert "were dropped to fit" in cut and cut.count("<details>") < full.count("<details>")
    assert cut.count("\n| ") == full.count("\n| ")  # every table row kept while details can go
    tiny = render.render_markdown(result, budget=1000)
    assert len(tiny) <= 1000 and "<details>" not in tiny


def test_no_golden_change_is_one_line(two_revisions, capsys):
    repo, _ = two_revisions
    assert review_cli.main(["main", "main", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("No golden changed between")


def test_a_bad_revision_is_refused_naming_the_argument(two_revisions, capsys):
    repo, _ = two_revisions
    with pytest.raises(SystemExit) as exit_:
        review_cli.main(["no-such-revision", "--repo", str(repo)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "BASE: 'no-such-revision' is neither a directory nor a revision" in err
    with pytest.raises(SystemExit):
        review_cli.main(["main", "main~5", "--repo", str(repo)])
    assert "HEAD: 'main~5'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        review_cli.main(["main", "--budget", "10", "--repo", str(repo)])
    assert "--budget: expected at least 1000" in capsys.readouterr().err


def test_head_defaults_to_the_working_tree_untracked_goldens_included(two_revisions, tmp_path):
    repo, ids = two_revisions
    work = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    untracked = json.loads((work / "golden" / "cases" / f"{ids[0]}.json").read_text())
    (work / "golden" / "cases" / "brand-new-case.json").write_text(json.dumps(untracked))
    result = review_cli.review("HEAD", repo=work)
    assert result.head == "working tree"
    assert [g.cases for g in result.groups] == [["brand-new-case"]] and result.groups[0].severity == "added/removed"


def test_directories_compare_without_git(two_revisions, tmp_path):
    repo, ids = two_revisions
    old, new = tmp_path / "old", tmp_path / "new"
    _write(old, {ids[0]: json.loads((GOLDENS / f"{ids[0]}.json").read_text())})
    _write(new, {ids[0]: _round_double(json.loads((GOLDENS / f"{ids[0]}.json").read_text()))})
    result = review_cli.review(str(old), str(new), repo=tmp_path)
    assert [g.severity for g in result.groups] == ["tosa"] and not result.stack_known
    (new / f"{ids[0]}.json").write_text("<<<<<<< HEAD\n{}\n")
    assert [g.severity for g in review_cli.review(str(old), str(new)).groups] == ["unreadable"]


def test_json_and_failed_cases_of_a_run(two_revisions, tmp_path, capsys):
    repo, ids = two_revisions
    report = tmp_path / "run"
    report.mkdir()
    (report / "report.json").write_text(json.dumps({"cases": [
        {"id": ids[0], "family": "resize", "outcome": "passed"},
        {"id": "resize-x", "family": "resize", "outcome": "failed", "stage": "lower",
         "error": "ValueError: scale_y_d >= 16 * scale_y_n\nmore"}]}))
    assert review_cli.main(["main~1", "main", "--repo", str(repo), "--json", "--report", str(report)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["failed"] == [{"id": "resize-x", "family": "resize", "outcome": "failed",
                               "failure": "lower: ValueError: scale_y_d >= 16 * scale_y_n"}]
    assert [g["severity"] for g in data["groups"]][0] == "case"
    tosa = next(g for g in data["groups"] if g["severity"] == "tosa")
    assert {"section": "tosa", "op": "RESCALE", "field": "rounding_mode", "stored": "SINGLE_ROUND",
            "new": "DOUBLE_ROUND", "mode": "exact"}.items() <= tosa["example"]["findings"][0].items()
    with pytest.raises(SystemExit):
        review_cli.main(["main~1", "main", "--repo", str(repo), "--report", str(tmp_path / "none")])
    assert "--report:" in capsys.readouterr().err


def test_findings_are_structured_and_word_the_messages():
    stored = _real_goldens(1)
    case, golden = next(iter(stored.items()))
    verdict = compliance.compare(golden, _scale_multipliers(_round_double(golden), 1.01))
    rounding = [f for f in verdict.findings if f.field == "rounding_mode"]
    assert rounding and rounding[0].section == "tosa" and rounding[0].op == "RESCALE"
    assert rounding[0].message() == (f"{rounding[0].path} RESCALE rounding_mode: stored SINGLE_ROUND, "
                                     "new DOUBLE_ROUND (exact)")
    drifted = [f for f in verdict.findings if f.mode == "rescale_scale"]
    assert drifted and drifted[0].drift > compliance.BANDS["rescale_scale"].limit
    assert verdict.messages() == [f.message() for f in verdict.findings if f.mode == "exact"] + \
        [f.message() for f in verdict.findings if f.mode != "exact"]


def test_review_runs_from_the_wheel_alone(two_revisions, tmp_path):
    """The pull-request job installs the project's wheel without its
    dependencies: built here, unpacked, and run by an interpreter that sees
    no site-packages at all (no torch, ExecuTorch, numpy or syrupy)."""
    repo, _ = two_revisions
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("vgf_conformance", "vgf_export"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    unpacked = tmp_path / "wheel"
    zipfile.ZipFile(next((tmp_path / "dist").glob("vgf_conformance-*.whl"))).extractall(unpacked)
    script = (f"import sys; sys.path.insert(0, {str(unpacked)!r})\n"
              "from vgf_conformance.__main__ import main\n"
              "raise SystemExit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-S", "-c", script, "review", "main~1", "main", "--repo", str(repo)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "goldens changed" in done.stdout
    blocked = subprocess.run([sys.executable, "-S", "-c", "import numpy"], capture_output=True, timeout=60)
    assert blocked.returncode != 0, "the interpreter still sees site-packages: the check proves nothing"
