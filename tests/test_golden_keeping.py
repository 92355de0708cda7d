"""Nothing lost: accepting goldens keeps every baseline.

A team-style repository (``--pyargs``, ``testpaths``, ``--vgf-golden-dir``,
the example's two cases) grows a case that fails at export, one that xfails
(its Expectation), a stale golden, and foreign files in its golden
directory. ``--snapshot-update`` keeps the failing and xfailing cases'
goldens byte for byte and says so, never touches the foreign files, and
removes the stale golden only on a full, unfiltered run; any run of the
cases reports a stale golden and fails. The accept command selects exactly
one case; the built-in golden directory is refused as a team's.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vgf_conformance.goldens.stale import golden_files, stale_goldens
from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR
from vgf_conformance.harness.plugin import golden_keeper, options, recording, session

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "team-repo"

EXTRA_CASES = '''

import torch


class Branchy(torch.nn.Module):
    """Data-dependent control flow: torch.export refuses it."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


from vgf_conformance.cases import Expectation  # noqa: E402

_EXTRA = [
    Case(id="branchy-fails", family="team", model=Branchy, inputs=(InputSpec("smooth", (1, 4, 8, 8)),),
         input_qspecs=("int8",), output_qspecs=("int8",)),
    Case(id="branchy-xfails", family="team", model=Branchy, inputs=(InputSpec("smooth", (1, 4, 8, 8)),),
         input_qspecs=("int8",), output_qspecs=("int8",),
         expect=Expectation("export", r"(?i)data.dependent", "data-dependent control flow: not exportable")),
]
FAMILY = Family("team", __doc__, lambda: _cases() + _EXTRA, family_tolerance(),
                quick=frozenset({"thumbnail-down4-int8io"}))
'''

#: A test-only fault: vgf_dump "times out" on the warp's VGF, so its golden's
#: vgf section cannot be built (a transient failure, not a change of the stack).
VGF_DUMP_TIMES_OUT = '''
import vgf_conformance.goldens.projections as projections

_real = projections.vgf_file


def _times_out_on_the_warp(path):
    if "warp-rgba-border-int8io" in str(path):
        raise TimeoutError("vgf_dump did not answer within 60 s (a test-only fault)")
    return _real(path)


projections.vgf_file = _times_out_on_the_warp
'''

#: What the team keeps in its golden directory besides goldens.
FOREIGN = {"README.md": "# our goldens\n", "notes.json": '{"reviewed": true}\n',
           "sub/old.json": '{"case": {"id": "old"}}\n'}


@pytest.fixture
def team(pytester, monkeypatch) -> pytest.Pytester:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "out"))
    cases = pytester.path / "cases.py"
    cases.write_text(cases.read_text() + EXTRA_CASES)
    golden = pytester.path / "golden"
    for name, text in FOREIGN.items():
        (golden / name).parent.mkdir(parents=True, exist_ok=True)
        (golden / name).write_text(text)
    for case_id in ("branchy-fails", "branchy-xfails"):  # their baselines, from before they broke
        (golden / f"{case_id}.json").write_text(json.dumps({"case": {"id": case_id}, "graph": ["baseline"]}))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def _files(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*")) if p.is_file()}


def _run(team, *args):
    # Without the Vulkan tier (-m "not vulkan"): it plays no part in keeping goldens.
    return team.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", "-W", "ignore::DeprecationWarning",
                                     *args, timeout=900)


def test_snapshot_update_keeps_failing_and_xfailing_goldens_and_foreign_files(team):
    golden = team.path / "golden"
    (golden / "case-gone.json").write_text(json.dumps({"case": {"id": "case-gone"}}))
    thumbnail = golden / "thumbnail-down4-int8io.json"
    resolved = thumbnail.read_text()
    thumbnail.write_text(f"<<<<<<< HEAD\n{resolved}=======\n{resolved}>>>>>>> theirs\n")  # a merge conflict
    before = _files(golden)

    # Filtered runs report the stale golden (and fail), and never remove it;
    # the accept command repairs a golden that is not JSON.
    result = _run(team, "-m", "not vulkan", "-k", "thumbnail", "--snapshot-update")
    output = result.stdout.str()
    assert "stale golden" in output and "case-gone" in output, output[-3000:]
    assert result.ret != 0
    assert (golden / "case-gone.json").exists()
    assert json.loads(thumbnail.read_text()) == json.loads(resolved), "the conflicted golden was not repaired"

    # The full run: the failing case fails, the xfailing one xfails, and
    # neither's golden changes; the warp's vgf section cannot be built (a
    # transient failure), so its test_golden fails and its golden is kept
    # byte for byte; foreign files stay; the stale golden goes.
    team.makeconftest(VGF_DUMP_TIMES_OUT)
    result = _run(team, "--snapshot-update")
    output = result.stdout.str()
    assert result.ret != 0  # branchy-fails fails at export
    assert "kept 3 stored golden(s) untouched" in output, output[-3000:]
    assert "branchy-fails [failed]" in output and "branchy-xfails [xfailed]" in output, output[-3000:]
    assert "section(s) ['vgf'] could not be built" in output and "vgf_dump did not answer" in output
    assert "removed stale golden case-gone.json" in output, output[-3000:]
    after = _files(golden)
    assert "case-gone.json" not in after
    for name in (*FOREIGN, "branchy-fails.json", "branchy-xfails.json", "warp-rgba-border-int8io.json"):
        assert after[name] == before[name], f"{name} changed"
    assert {name for name in after if name.endswith(".json") and "/" not in name} == {
        "notes.json", "branchy-fails.json", "branchy-xfails.json",
        "thumbnail-down4-int8io.json", "warp-rgba-border-int8io.json"}


def test_the_built_in_golden_directory_is_refused_as_a_teams(pytester, tmp_path):
    """A case file's goldens in the built-in golden directory (or a folder
    holding it): a usage error when the run is configured."""
    for directory in (BUILTIN_GOLDEN_DIR, BUILTIN_GOLDEN_DIR.parent):
        config = pytester.parseconfig("-p", "vgf_conformance", "--vgf-cases", "cases.py",
                                      f"--vgf-golden-dir={directory}")
        with pytest.raises(pytest.UsageError, match="holds the built-in goldens"):
            options.check(config)
    options.check(pytester.parseconfig("-p", "vgf_conformance", "--vgf-cases", "cases.py",
                                       f"--vgf-golden-dir={tmp_path}"))  # a directory of the team's own


def test_a_golden_that_is_not_json_says_so_and_names_the_accept_command(tmp_path):
    from vgf_conformance.goldens import store

    conflict = '<<<<<<< HEAD\n{"case": {}}\n=======\n{"case": {"x": 1}}\n>>>>>>> theirs\n'
    golden = {"case": {"x": 1}, "graph": []}
    assert store.changed_sections(conflict, golden) == [store.NOT_JSON]
    assert store.describe_changes(conflict, golden) == ["the stored golden is not JSON (a merge conflict?)"]
    message = store.mismatch_message("a-case", tmp_path / "a-case.json", conflict, golden, [store.NOT_JSON],
                                     "scripts/conformance.sh --vgf-case a-case --snapshot-update")
    assert "is not a JSON object" in message and message.endswith("--vgf-case a-case --snapshot-update")
    assert not store.GoldenExtension().matches(serialized_data=store.serialize(golden), snapshot_data=conflict)


def test_a_golden_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A run killed mid-write leaves the previous golden, never half of it
    (and no temporary file behind)."""
    import os as os_module

    from syrupy.data import Snapshot, SnapshotCollection

    from vgf_conformance.goldens import store

    path = tmp_path / "a-case.json"
    path.write_text('{"case": {"x": 0}}\n')
    collection = SnapshotCollection(location=str(path))
    collection.add(Snapshot(name="test_golden[a-case]", data='{"case": {"x": 1}}\n'))

    def killed(*args):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(os_module, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        store.GoldenExtension.write_snapshot_collection(snapshot_collection=collection)
    assert path.read_text() == '{"case": {"x": 0}}\n' and sorted(p.name for p in tmp_path.iterdir()) == ["a-case.json"]
    monkeypatch.undo()
    store.GoldenExtension.write_snapshot_collection(snapshot_collection=collection)
    assert path.read_text() == '{"case": {"x": 1}}\n'


def test_a_section_that_records_a_failure_is_never_compared_or_written():
    from vgf_conformance.cases import Expectation
    from vgf_conformance.checks import unbuilt_sections

    golden = {"graph": ["[0] input x"], "vgf": [{"delegate": 0, "error": "TimeoutError: vgf_dump"}],
              "numerics": {"error": "[run] LoweredRunError: TOSA reference model: BAD_INPUT"}}
    assert unbuilt_sections(SimpleNamespace(expect=None), golden) == {
        "vgf": "TimeoutError: vgf_dump", "numerics": "[run] LoweredRunError: TOSA reference model: BAD_INPUT"}
    expected = SimpleNamespace(expect=Expectation("run", r"BAD_INPUT", "the reference model refuses the input"))
    assert unbuilt_sections(expected, golden) == {"vgf": "TimeoutError: vgf_dump"}  # the run fails as expected
    assert unbuilt_sections(SimpleNamespace(expect=None), {"graph": [], "numerics": {"outputs": []}}) == {}


def test_another_tables_golden_directory_is_refused_before_any_case_runs(team, monkeypatch):
    """The team's golden directory with the built-in table (its case files
    forgotten), by option or by VGF_GOLDEN_DIR: a full --snapshot-update
    would have deleted the team's goldens as stale and written 387 of ours.
    Refused when the suite's case tests are collected (other tests that use
    the golden extension, tests/test_portability.py's, are not the table's):
    one run by option, VGF_GOLDEN_DIR on the function that decides."""
    golden = team.path / "golden"
    before = _files(golden)
    result = _run(team, "-o", "addopts=--pyargs --vgf-golden-dir golden", "--snapshot-update")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED and "error during collection" in output, output[-2000:]
    assert "--vgf-golden-dir golden holds 4 golden(s)" in output
    assert "none of them a case of the built-in table" in output
    assert " passed" not in output and " failed" not in output  # no case ran
    assert _files(golden) == before

    config = SimpleNamespace(getoption={"--vgf-golden-dir": None, "--vgf-cases": []}.get)
    table = lambda config, whole: ["resize-bilinear-ac0-up2-int8io"]  # noqa: E731 - the built-in table, in short
    monkeypatch.setenv("VGF_GOLDEN_DIR", str(golden))
    assert f"VGF_GOLDEN_DIR {golden} holds 4 golden(s)" in golden_keeper.foreign_table_refusal(config, table)
    assert golden_keeper.foreign_table_refusal(config, lambda config, whole: ["thumbnail-down4-int8io"]) is None
    monkeypatch.delenv("VGF_GOLDEN_DIR")
    assert golden_keeper.foreign_table_refusal(config, table) is None  # none chosen: the built-in goldens


def test_only_goldens_are_goldens(tmp_path):
    (tmp_path / "a-case.json").write_text('{"case": {}}')
    (tmp_path / "notes.json").write_text('{"reviewed": true}')  # a JSON of the team's
    (tmp_path / "Bad Name.json").write_text('{"case": {}}')
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b-case.json").write_text('{"case": {}}')
    assert list(golden_files(tmp_path)) == ["a-case"]
    assert stale_goldens(tmp_path, ["a-case"]) == []
    assert stale_goldens(tmp_path, []) == [tmp_path / "a-case.json"]


def _config(args=(), **options):
    values = {"--vgf-shard": None, "--vgf-case": [], "--vgf-cases": [], **options}
    return SimpleNamespace(args=list(args), getoption=values.get,
                           option=SimpleNamespace(keyword="", markexpr="", lf=False, failedfirst=False,
                                                  stepwise=False, deselect=None))


def test_a_full_run_is_one_that_selects_everything():
    assert golden_keeper.is_full_run(_config(["tests", "vgf_conformance"]))
    assert not golden_keeper.is_full_run(_config(["vgf_conformance/test_cases.py::test_golden[a]"]))
    assert not golden_keeper.is_full_run(_config(**{"--vgf-case": ["a"]}))
    assert not golden_keeper.is_full_run(_config(**{"--vgf-shard": "1/2"}))
    filtered = _config()
    filtered.option.keyword = "up2"
    assert not golden_keeper.is_full_run(filtered)


def test_the_accept_command_selects_exactly_one_case():
    """``-k resize-nearest-up2-int16io`` also selected a16w8-resize-nearest-up2-int16io;
    ``--vgf-case`` takes the exact id."""
    from vgf_conformance.cases import CASES

    target = "resize-nearest-up2-int16io"
    assert f"a16w8-{target}" in CASES  # the look-alike exists
    config = SimpleNamespace(getoption={"--vgf-case": [target], "--vgf-cases": [], "--vgf-golden-dir": None}.get,
                             getini=lambda name: [], stash={}, invocation_params=SimpleNamespace(args=()))
    config.stash = pytest.Stash()
    assert list(session.session_cases(config)) == [target]
    assert recording.accept_command(config, target) == f"scripts/conformance.sh --vgf-case {target} --snapshot-update"
    bad = SimpleNamespace(getoption={"--vgf-case": ["no-such-case"], "--vgf-cases": []}.get, getini=lambda name: [],
                          stash=pytest.Stash())
    with pytest.raises(pytest.UsageError, match="--vgf-case: no case 'no-such-case'"):
        session.session_cases(bad)


# ---------------------------------------------------------------------------
# No stage can hang a run: the watchdog, the report as it goes, a killed shard
# ---------------------------------------------------------------------------
#: A test-only fault: the partitioner never returns on the warp's graph.
HANG = '''
import time

import vgf_export.export as export

_real = export.to_edge_transform_and_lower


def _hangs_on_the_warp(exported, *args, **kwargs):
    if "grid_sampler" in exported.graph_module.code:
        time.sleep(3600)
    return _real(exported, *args, **kwargs)


export.to_edge_transform_and_lower = _hangs_on_the_warp
'''


def test_a_shard_killed_mid_run_still_merges_saying_what_is_missing(team, tmp_path):
    import signal
    import subprocess
    import time

    team.makeconftest(HANG)
    shard = team.path / "shard-1"
    shard.mkdir()
    previous = {"cases": [{"id": "warp-rgba-border-int8io", "outcome": "passed"}], "workarounds": []}
    (shard / "report.json").write_text(json.dumps(previous))  # yesterday's run into the same directory
    # Two workers, each case its own group: one worker hangs in the warp, the
    # other finishes cases (their first two tests: soon); then the job is
    # killed, as a CI timeout kills it.
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "--vgf-vulkan-batch", "1", "-m", "not vulkan", "-k", "test_export or test_delegation",
         "--vgf-case-timeout", "0", "--vgf-report", str(shard)],
        cwd=team.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log = shard / "cases.jsonl"
    try:
        deadline = time.monotonic() + 300
        while not (log.exists() and log.read_text().strip()):  # a finished case is logged
            assert process.poll() is None, "the run ended: the warp did not hang"
            assert time.monotonic() < deadline, "no finished case was logged in time"
            time.sleep(1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the CI job's timeout
        process.wait()
    logged = {json.loads(line)["id"] for line in log.read_text().splitlines() if line.endswith("}")}
    assert "warp-rgba-border-int8io" not in logged
    assert "the run has not ended, or was stopped" in json.loads((shard / "report.json").read_text())["partial"]
    missing = sorted(set(json.loads((shard / "planned.json").read_text())) - logged)
    merged = tmp_path / "merged"
    done = subprocess.run([sys.executable, "-m", "vgf_conformance", "report", "merge", str(merged), str(shard)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"partial shard {shard}" in done.stdout and "warp-rgba-border-int8io" in done.stdout, done.stdout
    report = json.loads((merged / "report.json").read_text())
    assert {c["id"] for c in report["cases"]} == logged
    assert report["run"]["partial_shards"] == {str(shard): {"missing": missing}}
    assert "**Partial shard**" in (merged / "report.md").read_text()


#: A test-only fault: the branchy case's run calls C's sleep() without
#: releasing the GIL, so that not even the watchdog's thread can run.
HOLDS_THE_GIL = '''
import ctypes

import vgf_conformance.harness.execution.runner as runner

_real_run = runner._run_case


def _holds_the_gil(case, *args, **kwargs):
    if case.id == "branchy-fails":
        ctypes.PyDLL(None).sleep(3600)
    return _real_run(case, *args, **kwargs)


runner._run_case = _holds_the_gil
'''


#: A test-only fault: the worker running the thumbnail's .pte test dies of a segfault.
CRASH = '''
import os
import signal

import vgf_conformance.checks as checks

_real = checks.pte


def _segfaults_on_the_thumbnail(case_run, *args, **kwargs):
    if case_run.case.id == "thumbnail-down4-int8io" and not os.path.exists("crashed-once"):
        open("crashed-once", "w").close()  # xdist sends the test to the new worker: it passes there
        os.kill(os.getpid(), signal.SIGSEGV)
    return _real(case_run, *args, **kwargs)


checks.pte = _segfaults_on_the_thumbnail
'''


def test_hung_and_crashed_workers_end_their_cases_alone_and_the_run_goes_on(team):
    """Under xdist a hung case is stopped with its worker, not left running,
    and a crashed worker's case is recorded, in one run of two workers: one
    hang that releases the GIL (the watchdog ends the worker, naming the
    stage), one that holds it (faulthandler's deadline ends it, with every
    thread's stack), one worker killed by SIGSEGV. The hung cases' later
    tests do not run them again, every case is reported and logged as it
    finished, and the run goes on to the end on new workers."""
    team.makeconftest(HANG + HOLDS_THE_GIL + CRASH)
    result = _run(team, "-n", "2", "--dist", "loadgroup", "-m", "not vulkan", "--vgf-case-timeout", "5",
                  "--vgf-report", "report", "--vgf-vulkan-batch", "1")
    output = result.stdout.str()
    assert result.ret == 1, output[-3000:]
    report = {c["id"]: c for c in json.loads((team.path / "report" / "report.json").read_text())["cases"]}
    warp, branchy = report["warp-rgba-border-int8io"], report["branchy-fails"]
    assert warp["run"]["crashed"]["hung"] == "partition", warp
    crash = warp["run"]["crashed"]["error"]
    assert "had not finished after 5 s" in crash and "in _hangs_on_the_warp" in crash, crash
    assert "its case hung in stage 'partition'" in output, output[-3000:]
    assert "an earlier test of this case hung; its worker was ended" in output  # not exported again
    assert branchy["run"]["crashed"]["hung"] == "unknown", branchy
    crash = branchy["run"]["crashed"]["error"]  # the case's later tests say it hung, without the stack
    assert "holding the GIL" in crash and "in _holds_the_gil" in crash, crash
    assert report["branchy-xfails"]["outcome"] == "xfailed"
    thumbnail = report["thumbnail-down4-int8io"]
    assert thumbnail["tests"]["test_pte"] == "error" and thumbnail["outcome"] == "error"  # its rerun passed
    assert "was killed by SIGSEGV while running test_pte[thumbnail-down4-int8io]" in thumbnail["error"], thumbnail
    assert thumbnail["run"]["crashed"]["exit"] == "was killed by SIGSEGV"
    logged = [json.loads(line) for line in (team.path / "report" / "cases.jsonl").read_text().splitlines()]
    assert sorted(c["id"] for c in logged) == sorted(report)  # each case appended as it finished
    assert any(c["id"] == "thumbnail-down4-int8io" and "SIGSEGV" in (c["error"] or "") for c in logged)


def test_a_report_says_partial_from_the_start_of_a_run_to_its_end(tmp_path):
    """A previous run's report.json in the same directory is never read as
    this run's: from the start, report.json says the run has not ended."""
    from vgf_conformance.harness.reporting import case_log, diff
    from vgf_conformance.harness.reporting.records import load_shard

    (tmp_path / "report.json").write_text(json.dumps({"cases": [{"id": "a", "outcome": "passed"}]}))
    (tmp_path / "report.md").write_text("# yesterday's report\n")
    log = case_log.CaseLog(tmp_path, lambda nodeid: nodeid.split("[", 1)[1][:-1] if "[" in nodeid else None)
    log.planned(["test_golden[a]", "test_golden[b]"])
    assert case_log.is_partial(json.loads((tmp_path / "report.json").read_text()))
    assert not (tmp_path / "report.md").exists()
    with pytest.raises(diff.ReportError, match="is the report of a run that did not end"):
        diff.load_report(tmp_path, "NEW")
    report, missing = load_shard(tmp_path)
    assert report["cases"] == [] and missing == ["a", "b"]


def test_paths_read_from_a_report_stay_inside_its_folder(tmp_path):
    """A report is data: an id ``../../x`` with a map file ``/etc/hostname``
    copied that file outside the report folder."""
    from vgf_conformance.harness.reporting.html import PNG_SIGNATURE, copy_maps

    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not yours")
    artifacts = tmp_path / "artifacts" / "case-a"
    (artifacts / "maps").mkdir(parents=True)
    (artifacts / "maps" / "out0.png").write_bytes(PNG_SIGNATURE + b"a map")
    (artifacts / "maps" / "linked.png").symlink_to(tmp_path / "secret.png")  # inside, but a link to any file
    (artifacts / "maps" / "text.png").write_bytes(b"not a PNG at all")
    report = {"cases": [
        {"id": "../../escaped", "run": {"artifacts": str(artifacts)}, "error_maps": [{"file": "maps/out0.png"}]},
        {"id": "case-b", "run": {"artifacts": str(artifacts)}, "error_maps": [{"file": str(secret)}]},
        {"id": "case-a", "run": {"artifacts": str(artifacts)}, "error_maps": [{"file": "maps/out0.png"}]},
        {"id": "case-c", "run": {"artifacts": str(artifacts)},
         "error_maps": [{"file": "maps/linked.png"}, {"file": "maps/text.png"}]},
    ]}
    out = tmp_path / "report"
    maps = copy_maps(report, out)
    assert maps["case-a"][0]["src"] == "maps/case-a/out0.png"
    assert "refused" in maps["../../escaped"][0]["missing"]
    assert "missing" in maps["case-b"][0]
    assert all("missing" in entry for entry in maps["case-c"]), maps["case-c"]
    copied = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.png") if "report" in p.parts)
    assert copied == ["report/maps/case-a/out0.png"]
    assert not (tmp_path / "escaped").exists()


def test_a_used_artifacts_directory_is_refused_not_overwritten(pytester, tmp_path):
    used = tmp_path / "artifacts"
    (used / "some-case").mkdir(parents=True)
    (used / "some-case" / "program.pte").write_bytes(b"a previous run's")
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--vgf-artifacts={used}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--vgf-artifacts" in result.stderr.str() and "never overwritten" in result.stderr.str()
    assert (used / "some-case" / "program.pte").read_bytes() == b"a previous run's"
