"""The report: merging shard reports, grouping changes, and shard selection."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vgf_conformance.goldens import describe_changes, serialize
from vgf_conformance.harness.reporting.publish import main
from vgf_conformance.harness.reporting.records import build_report, merge_reports, render_markdown
from vgf_conformance.harness.plugin import options
from tests.helpers import collected_suite

REPO = Path(__file__).resolve().parent.parent


def _case(case_id, family="resize", outcome="passed", changes=()):
    return {"id": case_id, "family": family, "tests": {"test_export": outcome},
            "changes": list(changes), "golden_changed": ["tosa"] if changes else [],
            "delegates": [{"backend": "VgfBackend", "ops": ["aten.upsample_bilinear2d.vec"]}],
            "cpu_ops": [], "stage": "run"}


def test_outcome_aggregation_and_markdown_groups():
    cases = {
        "a": _case("a", changes=["no longer delegated"]),
        "b": _case("b", changes=["no longer delegated", "tosa changed"]),
        "c": {**_case("c", family="grid_sample"), "tests": {"test_export": "passed", "test_golden": "failed"}},
        "d": {**_case("d"), "tests": {"test_export": "xfailed", "test_golden": "xfailed"}},
    }
    report = build_report(cases, {"resize-split": {"name": "resize-split", "needed": False,
                                                   "evidence": [], "upstream": "x"}})
    outcomes = {c["id"]: c["outcome"] for c in report["cases"]}
    assert outcomes == {"a": "passed", "b": "passed", "c": "failed", "d": "xfailed"}
    markdown = render_markdown(report)
    assert markdown.startswith("# VGF conformance report")
    assert "| passed | 2 |" in markdown and "| failed | 1 |" in markdown
    assert "- 2 resize cases: no longer delegated" in markdown
    assert "- 1 resize case: tosa changed" in markdown
    assert "unnecessary here" in markdown


def test_report_md_and_html_lay_out_one_summary():
    """report.md and report.html count nothing of their own: every aggregate
    either shows (outcomes, families, delegation shapes, change groups,
    cases not passing) is the one harness/reporting/summary.py computed."""
    from vgf_conformance.harness.reporting.html import render_html
    from vgf_conformance.harness.reporting.summary import summarize

    cpu_ops = {**_case("e"), "cpu_ops": ["aten.gather"], "tests": {"test_export": "failed"}}
    on_cpu = {**_case("f", family="grid_sample"), "delegates": [], "stays_on_cpu": "declared"}
    report = build_report({"a": _case("a", changes=["no longer delegated"]), "e": cpu_ops, "f": on_cpu,
                           "c": {**_case("c", family="grid_sample"), "warnings": ["DeprecationWarning: x"]}})
    summary = summarize(report)
    assert summary.delegations == [("VgfBackend", 2), ("VgfBackend (+CPU ops)", 1), ("none", 1)]
    assert summary.by_outcome == {"passed": 3, "failed": 1} and summary.families == ["grid_sample", "resize"]
    assert [c["id"] for c in summary.not_passing] == ["e"] and [c["id"] for c in summary.cpu] == ["f"]
    markdown, html = render_markdown(report), render_html(report)
    for shape, n in summary.delegations:
        assert f"| {shape} | {n} |" in markdown
        assert f"<tr><td>{shape}</td><td class=\"num\">{n}</td></tr>" in html
    for (family, change), n in summary.change_groups:
        assert f"- {n} {family} case: {change}" in markdown and f"<li>{n} {family} case: {change}</li>" in html
    assert "| 1 | DeprecationWarning: x |" in markdown and "DeprecationWarning: x" in html


def test_merge_keeps_the_format_and_refuses_overlap(tmp_path):
    verdict = {"name": "resize-split", "needed": True, "evidence": ["x"], "upstream": "u"}
    one = build_report({"a": _case("a")}, {"resize-split": verdict})
    two = build_report({"b": _case("b", family="grid_sample")})
    merged = merge_reports([one, two])
    assert [c["id"] for c in merged["cases"]] == ["a", "b"]
    assert merged["workarounds"] == one["workarounds"] and len(one["workarounds"]) == 1
    assert set(merged) == set(one)
    with pytest.raises(ValueError, match="case a is in more than one shard"):
        merge_reports([one, one])
    for name, report in (("s1", one), ("s2", two)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(report))
    assert main(["merge", str(tmp_path / "out"), str(tmp_path / "s1"), str(tmp_path / "s2")]) == 0
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == merged
    assert "2 cases." in (tmp_path / "out" / "report.md").read_text()


def test_describe_changes_groups_well():
    stored = {"delegates": [{"backend": "VgfBackend", "ops": ["aten.upsample_bilinear2d.vec"]}],
              "cpu_ops": [], "tosa": [1], "numerics": {"outputs": [{"vs_float": {"max_lsb": 0.8}}]}}
    now_cpu = {**stored, "delegates": [], "cpu_ops": ["aten.upsample_bilinear2d.vec"], "tosa": [],
               "numerics": {"outputs": [{"vs_float": {"max_lsb": 2.0}}]}}
    assert describe_changes(serialize(stored), now_cpu) == [
        "no longer delegated", "tosa changed", "numerics vs float worse by more than 0.5 LSB"]
    assert describe_changes(serialize(stored), stored) == []
    assert describe_changes(serialize(stored), None, "lower") == ["now fails at lower (exported on the baseline)"]
    assert describe_changes(None, stored) == ["new case (no golden)"]


def _collected(pytester, *args):
    return {n[n.index("[") + 1:n.rindex("]")] for n in collected_suite(pytester, *args) if "[" in n}


def test_shards_are_disjoint_cover_everything_and_keep_cases_whole(pytester):
    everything = _collected(pytester)
    first = _collected(pytester, "--vgf-shard", "1/2")
    second = _collected(pytester, "--vgf-shard", "2/2")
    assert first and second and not first & second
    assert first | second == everything
    with pytest.raises(pytest.UsageError, match="--vgf-shard must be I/N"):
        options.check(pytester.parseconfig("-p", "vgf_conformance", "--vgf-shard", "0/2"))


def test_export_warnings_are_deduplicated_without_machine_paths():
    import warnings

    from vgf_conformance.harness.execution.runner import _distinct_warnings

    def warning(message, filename):
        return warnings.WarningMessage(ResourceWarning(message), ResourceWarning, filename, 400)

    caught = [warning(f"unclosed file <name='/tmp/{d}/output_tag0.tosa.vgf'>",
                      f"/home/{d}/.venv/lib/python3.11/site-packages/executorch/vgf/backend.py")
              for d in ("a1", "b2")]
    assert _distinct_warnings(caught) == [
        "ResourceWarning: unclosed file <name='output_tag0.tosa.vgf'> (executorch/vgf/backend.py:400)"]


def test_the_report_is_written_without_torch(tmp_path):
    """The xdist controller writes the report at the end of a run and runs no
    case: importing torch there (seconds) would only lengthen every run."""
    from vgf_conformance.cases import CASES

    case = CASES["resize-bilinear-ac0-up2-int8io"]
    tolerance = case.get_tolerance(0)
    stats = {"max_lsb": 3.0, "p99_lsb": 1.0, "bias_lsb": 0.1, "mean_lsb": 0.5, "snr_db": 40.0}
    record = {**_case(case.id), "tests": {"test_export": "passed", "test_numerics_vs_float": "failed"},
              "numerics": {"outputs": [{"unit": 1 / 127, **{name: stats for name in tolerance.bounds}}]},
              "tolerances": [tolerance.to_dict() | {"sources": tolerance.sources}]}
    (tmp_path / "record.json").write_text(json.dumps({case.id: record}))
    script = f"""
import json, sys
from pathlib import Path
from vgf_conformance.harness.plugin.recording import CaseReport
from vgf_conformance.harness.reporting.publish import write_report
from vgf_conformance.harness.reporting.records import build_report
out = Path({str(tmp_path)!r})
write_report(build_report(json.loads((out / "record.json").read_text()), {{}}), out)
heavy = sorted(m for m in ("torch", "executorch", "vgf_export") if m in sys.modules)
assert not heavy, heavy
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Tolerance margins" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "report.html").is_file()
