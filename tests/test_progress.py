"""The progress line of long runs and the report's seconds per tier."""

from types import SimpleNamespace

import pytest

from vgf_conformance.harness.plugin import progress as progress_module, recording

from vgf_conformance.harness.execution import runner
from vgf_conformance.harness.reporting.records import build_report, merge_reports, render_markdown

TESTS = ("test_export", "test_golden", "test_numerics_vs_float", "test_numerics_vs_fake_quant", "test_vulkan")
OTHER = "vgf_conformance/test_workarounds.py::test_workaround_still_needed[resize-split]"


def _nodeids(cases):
    ids = [f"vgf_conformance/test_cases.py::{t}[{c}]@full-batch01" for c in cases for t in TESTS]
    return ids + [OTHER]


def test_tiers_of_tests():
    assert [progress_module.tier_of(n) for n in _nodeids(["c"])] == [
        "export", "golden", "numerics", "numerics", "vulkan", "workarounds"]


def test_a_line_every_n_cases_with_tiers_and_time_left(monkeypatch):
    clock = iter(float(t) for t in range(1000))
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: next(clock))
    progress = progress_module.Progress(every=2)
    cases = [f"c{i}" for i in range(5)]
    seconds = {"c0": 10.0, "c1": 10.0, OTHER: 20.0}
    progress.collected(_nodeids(cases), lambda unit: seconds.get(unit, 5.0))
    lines = []
    for nodeid in _nodeids(cases):
        if line := progress.finished(nodeid):
            lines.append(line)
    assert len(lines) == 2  # after 2 and 4 cases; not after the last (the final line says it)
    assert lines[0].startswith("vgf progress: 2/5 cases, export 2/5, golden 2/5, numerics 2/5, vulkan 2/5, "
                               "workarounds 0/1 tests; ")
    assert lines[0].endswith("left")
    # 20 of 55 predicted seconds done: the time left is the elapsed time scaled by 35/20.
    elapsed = lines[0].split("; ")[1]
    assert "about" in elapsed
    final = progress.line(final=True)
    assert final.startswith("vgf progress: done, 5/5 cases,") and "workarounds 1/1 tests" in final


def test_eta_scales_elapsed_time_by_seconds_left():
    progress = progress_module.Progress(every=1)
    progress.collected(_nodeids(["a", "b"])[:-1], {"a": 10.0, "b": 30.0}.get)
    progress.first = progress.start = progress_module.time.perf_counter() - 20.0  # a took 20 s
    for nodeid in _nodeids(["a"])[:-1]:
        line = progress.finished(nodeid)
    assert line is not None and "about 1m00s left" in line  # b is 3x a


def test_a_test_reported_twice_or_unknown_does_not_count():
    progress = progress_module.Progress(every=1)
    ids = _nodeids(["a", "b"])
    progress.collected(ids, lambda unit: 1.0)
    assert progress.finished("vgf_conformance/test_cases.py::test_export[zzz]@x") is None
    for nodeid in ids[:5]:
        progress.finished(nodeid)
        progress.finished(nodeid)
    assert progress.line().startswith("vgf progress: 1/2 cases")


def _config(**options):
    values = {"--vgf-progress": None, "--vgf-report": None, "--vgf-golden-dir": None, **options}
    return SimpleNamespace(getoption=values.__getitem__, get_verbosity=lambda: options.get("verbosity", 0),
                           pluginmanager=SimpleNamespace(get_plugin=lambda name: None))


@pytest.mark.parametrize("verbosity, option, shown", [(0, None, True), (-1, None, False), (-1, 5, True),
                                                      (0, 0, False)])
def test_progress_is_quiet_with_q_unless_asked(verbosity, option, shown):
    report = recording.CaseReport(_config(**{"--vgf-progress": option, "verbosity": verbosity}))
    assert (report.progress is not None) == shown


def _report(nodeid, when, duration, properties=()):
    return SimpleNamespace(nodeid=nodeid, when=when, duration=duration, user_properties=list(properties),
                           failed=False, skipped=False, outcome="passed")


def test_tier_seconds_put_a_cases_run_in_its_stages():
    report = recording.CaseReport(_config(**{"--vgf-progress": 0}))
    run = {"run": {"seconds": {"export_total": 2.0, "numerics": 0.5, "golden": 0.1}}}
    export, golden = _nodeids(["c"])[0], _nodeids(["c"])[1]
    report.pytest_runtest_logreport(_report(export, "setup", 2.7))  # the case's run
    report.pytest_runtest_logreport(_report(export, "call", 0.01, [(recording.REPORT_KEY, run)]))
    report.pytest_runtest_logreport(_report(export, "teardown", 0.0))
    report.pytest_runtest_logreport(_report(golden, "call", 0.2))
    report.pytest_runtest_logreport(_report(OTHER, "call", 30.0))
    times = report.run_times()
    seconds = {tier: entry["seconds"] for tier, entry in times["tiers"].items()}
    assert seconds == {"export": 2.1, "numerics": 0.5, "golden": 0.3, "workarounds": 30.0}
    assert times["other_tests"] == {OTHER: 30.0}
    assert report.cases["c"]["run"]["tests_seconds"] == {"test_export": 2.71, "test_golden": 0.2}
    # The report keeps it (report.json "run", report.md "Time") and merges shards by adding.
    built = build_report(report.cases, None, times)
    assert built["run"]["tiers"]["export"] == {"tests": 1, "seconds": 2.1}
    assert "## Time" in render_markdown(built) and "workarounds 30 s" in render_markdown(built)
    merged = merge_reports([built, build_report({"d": {}}, None, times)])
    assert merged["run"]["tiers"]["workarounds"]["seconds"] == 60.0


def test_profile_export_report_says_where_a_runs_time_went(tmp_path):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "profile_export.py"
    spec = importlib.util.spec_from_file_location("profile_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = {"id": "c", "family": "resize", "quick": True,
            "run": {"seconds": {"export_total": 2.0, "numerics": 0.5},
                    "tests_seconds": {"test_export": 2.6, "test_pte": 1.0}}}
    run = {"tiers": {"export": {"tests": 1, "seconds": 2.0}, "pte": {"tests": 1, "seconds": 1.0}},
           "other_tests": {OTHER: 30.0}, "wall_seconds": 40.0,
           "workers": {"gw0": {"tests": 2, "seconds": 3.6, "last_end": 39.0}},
           "memory": {"gw0": {"rss_mib": 500.0, "children_rss_mib": 520.0}}}
    (tmp_path / "report.json").write_text(json.dumps({"cases": [case], "workarounds": [], "run": run}))
    text = module.report_profile(tmp_path, 5)
    assert "| export | 1 | 2.0 | 67% |" in text and "| resize (quick) | 1 | 3.60 | 3.6 |" in text
    assert "| c | 3.6 | export 2.6, pte 1.0 |" in text and f"| {OTHER} | 30.0 |" in text
    assert "| gw0 | 2 | 3.6 | 39.0 s |" in text and "gw0 500 MiB (child 520 MiB)" in text


def test_the_report_marks_the_first_case_of_each_worker():
    report = recording.CaseReport(_config(**{"--vgf-progress": 0}))
    for case, worker in (("a", "gw0"), ("b", "gw1"), ("c", "gw0")):
        for when in ("setup", "call", "teardown"):
            entry = _report(_nodeids([case])[0], when, 1.0)
            entry.node = SimpleNamespace(gateway=SimpleNamespace(id=worker))
            report.pytest_runtest_logreport(entry)
    assert [bool(report.cases[c]["run"].get("first_on_worker")) for c in "abc"] == [True, True, False]
    assert report.run_times()["workers"]["gw0"]["tests"] == 2


@pytest.mark.parametrize("nodeid, case", [
    ("vgf_conformance/test_cases.py::test_export[resize-a]", "resize-a"),
    ("vgf_conformance/test_cases.py::test_export[resize-a]@full-batch01", "resize-a"),  # xdist loadgroup
    ("::test_golden[thumb-x2]", "thumb-x2"),  # a team repository's run: --pyargs, outside the rootdir
    ("../venv/lib/python3.11/site-packages/conformance/test_cases.py::test_pte[c]", "c"),
    ("vgf_conformance/test_workarounds.py::test_workaround_still_needed[resize-split]", None),
    ("tests/test_report.py::test_x", None),
    ("::test_golden", None),
])
def test_case_of_a_node_id(nodeid, case):
    assert progress_module.case_of(nodeid) == case


def _invocation(args, golden_dir):
    options = {"--vgf-golden-dir": golden_dir}
    return SimpleNamespace(getoption=options.get, invocation_params=SimpleNamespace(args=tuple(args)))


def test_the_accept_command_reruns_the_same_cases():
    assert recording.accept_command(_invocation(["-n", "auto"], None), "c") == \
        "scripts/conformance.sh --vgf-case c --snapshot-update"
    team = _invocation(["--vgf-cases=cases.py", "-n", "auto", "--vgf-golden-dir", "my golden/"], "my golden/")
    assert recording.accept_command(team, "c") == \
        "pytest --vgf-cases=cases.py --vgf-golden-dir 'my golden/' --vgf-case c --snapshot-update"
    assert recording.suite_command(_invocation([], "golden")) == "pytest"  # given by the ini file's addopts


def test_tune_gc_freezes_what_lives_and_raises_the_thresholds():
    import gc

    before = gc.get_threshold()
    try:
        runner.tune_gc()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == runner.GC_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
