"""``python -m vgf_conformance report diff``: what changed between two reports.

Small synthetic reports, each change of one kind at a time, so each check is
shown to see the change it exists for (and to stay quiet without it); bad
input (a missing file, a file that is not a report) fails with a message that
names the argument.
"""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vgf_conformance.harness.reporting import diff
from vgf_conformance.harness.reporting.records import build_report
from vgf_conformance.report import main

REPO = Path(__file__).resolve().parent.parent


def _case(family="resize", max_lsb=1.0, warnings=(), sections=(), tests=None, vulkan=True):
    tests = tests or {"test_export": "passed", "test_golden": "failed" if sections else "passed",
                      "test_vulkan": "passed"}
    return {"family": family, "tests": tests, "stage": "run",
            "delegates": [{"backend": "VgfBackend", "ops": ["aten.upsample_bilinear2d.vec"]}],
            "cpu_ops": [], "golden_changed": list(sections), "warnings": list(warnings),
            "numerics": {"outputs": [{"vs_float": {"max_lsb": max_lsb, "mean_lsb": 0.2},
                                      "vs_fake_quant": {"max_lsb": 0.0}}],
                         "vulkan": {"bit_exact": vulkan, "tensors": {}}}}


def _report(**cases):
    return build_report({k.replace("_", "-"): v for k, v in cases.items()},
                        {"resize-split": {"name": "resize-split", "needed": True, "evidence": ["x"], "upstream": "u"}})


def _base():
    return _report(up2=_case(), down2=_case(), grid_a=_case(family="grid_sample"))


def _only(delta):
    """The single changed case of a diff."""
    assert len(delta.cases) == 1, [c.id for c in delta.cases]
    return delta.cases[0]


def test_identical_reports_have_no_changes():
    delta = diff.diff_reports(_base(), _base())
    assert delta.cases == [] and len(delta.common) == 3 and delta.new_warnings == []
    assert "**0 changed**, 3 unchanged" in diff.render_markdown(delta)


def test_each_kind_of_change_is_seen():
    base = _base()
    # numerics: worse and better beyond the epsilon, not within it
    new = copy.deepcopy(base)
    new["cases"][2]["numerics"]["outputs"][0]["vs_float"]["max_lsb"] = 34.0  # up2
    assert [(n.where, n.old, n.new) for n in _only(diff.diff_reports(base, new)).numerics_worse] == \
        [("out0 vs_float", 1.0, 34.0)]
    new["cases"][2]["numerics"]["outputs"][0]["vs_float"]["max_lsb"] = 0.5
    assert _only(diff.diff_reports(base, new)).numerics_better[0].new == 0.5
    new["cases"][2]["numerics"]["outputs"][0]["vs_float"]["max_lsb"] = 1.0 + diff.NUMERICS_EPSILON / 2
    assert diff.diff_reports(base, new).cases == []
    # goldens: a section that now differs, and the outcome it brings
    new = copy.deepcopy(base)
    new["cases"][0]["golden_changed"] = ["tosa", "vgf"]
    new["cases"][0]["tests"]["test_golden"] = "failed"
    new["cases"][0]["outcome"] = "failed"
    case = _only(diff.diff_reports(base, new))
    assert case.goldens_new == ["tosa", "vgf"] and case.outcome == ("passed", "failed")
    assert case.tests == {"test_golden": ("passed", "failed")}
    assert case.phrases()[1:] == ["goldens: tosa changed", "goldens: vgf changed"]
    new["cases"][0]["changes"] = ["RESIZE attributes changed", "vgf changed"]  # the report's own words
    assert _only(diff.diff_reports(base, new)).phrases()[1:] == ["goldens: RESIZE attributes changed",
                                                                  "goldens: vgf changed"]
    # delegation: no longer delegated, CPU ops
    new = copy.deepcopy(base)
    new["cases"][0]["delegates"] = []
    new["cases"][0]["cpu_ops"] = ["aten.upsample_bilinear2d.vec"]
    assert _only(diff.diff_reports(base, new)).delegation == [
        "no longer delegated", "CPU ops +['aten.upsample_bilinear2d.vec']"]
    # a test whose outcome moves while the case's does not (a tier skipped)
    new = copy.deepcopy(base)
    new["cases"][0]["tests"]["test_vulkan"] = "skipped"
    assert _only(diff.diff_reports(base, new)).phrases() == ["vulkan passed -> skipped"]
    # Vulkan, warnings
    new = copy.deepcopy(base)
    new["cases"][0]["numerics"]["vulkan"]["bit_exact"] = False
    assert _only(diff.diff_reports(base, new)).vulkan == ("bit-exact", "not bit-exact")
    # warnings: new over the report; one that moves to another case (Python
    # shows it once per process, wherever xdist dealt the cases) is no change
    new = copy.deepcopy(base)
    new["cases"][1]["warnings"] = ["DeprecationWarning: x is going away"]
    delta = diff.diff_reports(base, new)
    assert delta.new_warnings == ["DeprecationWarning: x is going away"] and delta.cases == []
    assert "- new: DeprecationWarning: x is going away" in diff.render_markdown(delta)
    moved = copy.deepcopy(new)
    moved["cases"][1]["warnings"], moved["cases"][2]["warnings"] = [], new["cases"][1]["warnings"]
    delta = diff.diff_reports(new, moved)
    assert delta.new_warnings == delta.gone_warnings == delta.cases == []
    located = copy.deepcopy(base)
    located["cases"][1]["warnings"] = ["ResourceWarning: unclosed file (executorch/backends/arm/vgf/backend.py:400)"]
    relocated = copy.deepcopy(located)
    relocated["cases"][1]["warnings"] = ["ResourceWarning: unclosed file (executorch/backends/arm/vgf/backend.py:392)"]
    assert diff.diff_reports(located, relocated).new_warnings == []  # the same warning, another line
    # a failure that changes while the outcome stays failed
    old, new = copy.deepcopy(base), copy.deepcopy(base)
    for report, error in ((old, "KeyError 'val'"), (new, "RuntimeError: invalid partition")):
        report["cases"][0].update(outcome="failed", stage="lower", error=error)
    assert _only(diff.diff_reports(old, new)).phrases() == ["failure changed"]


def test_workarounds_stack_and_cases_in_one_report():
    base = _base()
    new = copy.deepcopy(base)
    new["workarounds"][0]["needed"] = False
    new["candidate"] = {"versions": {"executorch": "1.4.1"}}
    base["candidate"] = {"versions": {"executorch": "1.5.1"}}
    new["cases"].append({**new["cases"][0], "id": "extra"})
    del new["cases"][1]
    delta = diff.diff_reports(base, new)
    assert delta.workarounds == [("resize-split", "needed", "not needed")]
    assert delta.stack == [("executorch", "1.5.1", "1.4.1")]
    assert {(c.id, c.status) for c in delta.cases} == {("extra", "added"), ("grid-a", "removed")}
    markdown = diff.render_markdown(delta)
    assert "Stack: executorch 1.5.1 -> 1.4.1" in markdown
    del base["candidate"]  # a plain --vgf-report run does not say its versions
    assert diff.diff_reports(base, new).stack == [("executorch", "?", "1.4.1")]
    assert "| resize-split | needed | not needed |" in markdown
    assert "only in NEW: extra" in markdown and "only in OLD: grid-a" in markdown


def test_markdown_groups_like_the_candidate_summary(tmp_path):
    base = _base()
    new = copy.deepcopy(base)
    for case in new["cases"]:
        if case["family"] == "resize":
            case["golden_changed"] = ["tosa"]
            case["numerics"]["outputs"][0]["vs_float"]["max_lsb"] = 40.0
    markdown = diff.render_markdown(diff.diff_reports(base, new, "nightly-1", "nightly-2"))
    assert markdown.startswith("## Conformance report: `nightly-1` -> `nightly-2`")
    assert "- 2 resize cases: goldens: tosa changed" in markdown
    assert "- 2 resize cases: numerics worse" in markdown
    assert "| down2 | goldens now differ: tosa<br>numerics worse: out0 vs_float 1 -> 40 LSB |" in markdown
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps(new))
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b.json"), "-o", str(tmp_path / "d.md")]) == 0
    assert "- 2 resize cases: numerics worse" in (tmp_path / "d.md").read_text()
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b.json"), "--json", "-o", str(tmp_path / "d.json")]) == 0
    data = json.loads((tmp_path / "d.json").read_text())
    assert {"family": "resize", "change": "numerics worse", "cases": 2} in data["groups"]


@pytest.mark.parametrize("content, expected", [
    (None, r"OLD: .*missing does not exist \(expected a report directory holding report.json, or a report.json file\)"),
    ("{not json", r"OLD: .*bad.json is not JSON"),
    ('{"results": []}', r"OLD: .*bad.json is not a conformance report: it has no 'cases' list"),
    ('{"cases": [{"id": "a", "colour": 1}]}', r"OLD: .*not a conformance report of this schema: .*unknown fields \['colour'\]"),
    ('{"cases": [3]}', r"OLD: .*a case without an id"),
])
def test_bad_input_is_named(tmp_path, capsys, content, expected):
    path = tmp_path / ("missing" if content is None else "bad.json")
    if content is not None:
        path.write_text(content)
    good = tmp_path / "good"
    good.mkdir()
    (good / "report.json").write_text(json.dumps(_base()))
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", str(path), str(good)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m vgf_conformance report diff: error: ")
    assert re.search(expected, err), err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit):
        main(["diff", str(good), str(empty)])
    assert f"NEW: {empty} has no report.json" in capsys.readouterr().err


def test_the_command_line_runs_as_a_module(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps(_base()))
    done = subprocess.run([sys.executable, "-m", "vgf_conformance", "report", "diff", str(tmp_path / "a"), str(tmp_path / "a")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "3 cases in both: **0 changed**" in done.stdout


def test_diff_and_compat_need_only_the_standard_library():
    """The nightly's diff and matrix jobs run without the stack: importing the
    commands with site-packages off (-S) must work."""
    done = subprocess.run([sys.executable, "-S", "-c", "import vgf_conformance.report"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_merge_is_forwarded_to_the_harness_command(monkeypatch):
    seen = []
    monkeypatch.setattr("vgf_conformance.harness.reporting.publish.main", lambda argv: seen.append(argv) or 0)
    assert main(["merge", "out", "shard-1", "shard-2"]) == 0
    assert seen == [["merge", "out", "shard-1", "shard-2"]]


def _on(report: dict, isa: str, threads: int) -> dict:
    report = copy.deepcopy(report)
    report["run"] = {"machine": {"cpu": f"a CPU with {isa}", "cores": 2, "onednn_isa": isa,
                                 "torch_threads": {"gw0": threads, "gw1": threads}, "workers": 2}}
    return report


def test_a_diff_between_machines_counts_no_machine_noise_as_a_change():
    """Runs on different ISAs or thread counts: a worst error moving within the
    measured cross-machine band (compliance.BANDS) is no change, and the
    diff says where each ran; on the same machine the same move is one."""
    from vgf_conformance.goldens.compliance import BANDS

    band = max(diff.NUMERICS_EPSILON, BANDS["max_lsb"].limit)  # 0 measured: the rounding epsilon
    old = _on(_base(), "AVX512_CORE", 2)
    noisy = copy.deepcopy(old)
    noisy["cases"][2]["numerics"]["outputs"][0]["vs_float"]["max_lsb"] += band / 2
    elsewhere = _on(noisy, "AVX2", 1)
    delta = diff.diff_reports(old, elsewhere)
    assert delta.cases == [] and delta.numerics_threshold == band
    text = diff.render_markdown(delta)
    assert "a CPU with AVX512_CORE" in text and "a CPU with AVX2" in text and f"{band:g} LSB" in text
    worse = copy.deepcopy(elsewhere)
    worse["cases"][2]["numerics"]["outputs"][0]["vs_float"]["max_lsb"] += band + 0.5
    assert _only(diff.diff_reports(old, worse)).numerics_worse  # beyond the band: a change
    assert _only(diff.diff_reports(_base(), worse)).numerics_worse  # a report without a machine: a change


def test_the_report_says_where_it_ran():
    from vgf_conformance.harness.reporting import machine
    from vgf_conformance.harness.reporting.records import render_markdown

    avx512 = {"sse4_1", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    assert machine.onednn_isa(avx512, None) == "AVX512_CORE"
    assert machine.onednn_isa(avx512, "AVX2") == "AVX2"  # the cap lowers it
    assert machine.onednn_isa({"sse4_1", "avx", "avx2", "fma"}, "AVX512_CORE") == "AVX2"  # never raises it
    here = machine.describe({"gw0": 2}, workers=1)
    assert {"cpu", "cores", "onednn_isa", "dnnl_max_cpu_isa", "torch_threads", "workers"} <= set(here)
    report = _on(_base(), "AVX2", 1)
    assert "Ran on: a CPU with AVX2, 2 cores, oneDNN AVX2, 1 torch thread(s) per worker, 2 worker(s)." \
        in render_markdown(report)
