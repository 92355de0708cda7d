"""pytest plugin of the conformance suite: options, per-case marks, report.

Options:
  --vgf-cases FILE      run the families FILE declares (FAMILY or FAMILIES,
                        see conformance.cases.family) instead of the built-in
                        table; repeatable
  --vgf-golden-dir DIR  goldens in DIR instead of golden/cases (required with --vgf-cases)
  --vgf-report DIR      write DIR/report.json and DIR/report.md
  --vgf-artifacts DIR   keep each case's export artifacts in DIR/<case id>
                        (default: a fresh directory under pytest's basetemp)
  --vgf-shard I/N       run shard I of N
  --vgf-vulkan-batch N  cases per batch (one worker, one Vulkan runner process)

Every test of a case is marked ``xdist_group(<its batch>)`` (a batch's tests
stay on one worker under ``--dist loadgroup``; see conformance/batches.py),
``quick`` when the case is in the pull-request tier, and, when the case has
an Expectation, a strict xfail that only an :class:`ExpectedStageFailure`
satisfies.

The report is gathered from the tests' ``user_properties`` on the controller,
so it is the same with and without xdist.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conformance.harness import batches
from conformance.harness.report import WorkaroundVerdict, build_report, write_report
from conformance.harness.runner import ExpectedStageFailure

REPORT_KEY = "vgf_case"
WORKAROUND_KEY = "vgf_workaround"
PLAN_KEY = pytest.StashKey[dict]()
CASES_KEY = pytest.StashKey[dict]()


# ---------------------------------------------------------------------------
# Options, marks, parametrization
# ---------------------------------------------------------------------------
def pytest_addoption(parser):
    group = parser.getgroup("vgf-conformance")
    group.addoption("--vgf-cases", metavar="FILE", action="append", default=[],
                    help="run the op families this Python file declares (FAMILY or FAMILIES) "
                         "instead of the built-in case table; repeatable")
    group.addoption("--vgf-golden-dir", metavar="DIR", default=None,
                    help="read and write goldens in DIR (<case id>.json each) instead of the "
                         "built-in golden/cases; required with --vgf-cases")
    group.addoption("--vgf-report", metavar="DIR", default=None,
                    help="write the conformance report (report.json, report.md) to DIR")
    group.addoption("--vgf-artifacts", metavar="DIR", default=None,
                    help="keep each case's export artifacts under DIR/<case id> "
                         "(DIR must not hold artifacts of the same cases)")
    group.addoption("--vgf-shard", metavar="I/N", default=None,
                    help="run shard I of N (1-based): cases are dealt round-robin in id order "
                         "over the whole table, a case's tests stay together; tests that are "
                         "not per case run in shard 1")
    group.addoption("--vgf-require-vulkan", action="store_true",
                    default=os.environ.get("CI", "").lower() == "true",
                    help="fail (instead of skip) the Vulkan tests when the Vulkan stack is missing; "
                         "on by default where the environment says CI=true")
    group.addoption("--vgf-vulkan-batch", metavar="N", type=int, default=batches.DEFAULT_SIZE,
                    help="cases per batch: a batch's tests run on one worker and its cases share "
                         f"one Vulkan runner process (default {batches.DEFAULT_SIZE}; 1: each "
                         "case alone)")


def pytest_configure(config):
    config.addinivalue_line("markers", "quick: the representative pull-request subset")
    config.addinivalue_line("markers", "vulkan: runs on the Vulkan stack (scenario runner, llvmpipe)")
    config.addinivalue_line("markers", "xdist_group(name): keep a case's tests on one worker")
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(CaseReport(config), "vgf-case-report")
    _shard(config)  # a bad --vgf-shard is a usage error, whatever is collected
    golden_dir = config.getoption("--vgf-golden-dir")
    if config.getoption("--vgf-cases") and golden_dir is None:
        raise pytest.UsageError(
            "--vgf-cases needs --vgf-golden-dir DIR: a case file's goldens live apart from the "
            "built-in ones (which would look unused, and --snapshot-update would remove them)")
    if golden_dir is not None:
        from conformance.goldens.store import set_golden_dir

        set_golden_dir(golden_dir)
    if config.getoption("--vgf-vulkan-batch") < 1:
        raise pytest.UsageError(
            f"--vgf-vulkan-batch must be at least 1, got {config.getoption('--vgf-vulkan-batch')}")


def _shard(config) -> tuple[int, int] | None:
    spec = config.getoption("--vgf-shard")
    return _parse_shard(spec) if spec else None


def session_cases(config) -> dict:
    """The cases of this run (case id -> Case): the built-in table, or the
    families of the ``--vgf-cases`` files. Loaded once, when a run collects."""
    if CASES_KEY not in config.stash:
        from conformance.cases import CASES, build_table, load_case_file

        files = config.getoption("--vgf-cases")
        try:
            config.stash[CASES_KEY] = build_table(
                [f for path in files for f in load_case_file(path)]) if files else CASES
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
    return config.stash[CASES_KEY]


def _plan(config) -> dict[str, str]:
    """Case id -> batch (conformance/batches.py), computed once, when a run
    collects cases."""
    if PLAN_KEY not in config.stash:
        cases = session_cases(config)
        config.stash[PLAN_KEY] = batches.plan_batches(
            cases, {c for c, case in cases.items() if case.quick},
            config.getoption("--vgf-vulkan-batch"), _shard(config))
    return config.stash[PLAN_KEY]


def _parse_shard(spec: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in spec.split("/"))
    except ValueError:
        index = count = 0
    if not 1 <= index <= count:
        raise pytest.UsageError(f"--vgf-shard must be I/N with 1 <= I <= N, got {spec!r}")
    return index, count


@pytest.hookimpl(trylast=True)  # after -m/-k deselection and pytest's fixture ordering
def pytest_collection_modifyitems(config, items):
    shard = _shard(config)
    if shard is not None:
        members = set(batches.shard_members(_plan(config), shard))
        keep, drop = [], []
        for item in items:
            case_id = batches.item_case(item)
            kept = case_id in members if case_id is not None else shard[0] == 1
            (keep if kept else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    _mark_expected_failures(items, session_cases(config) if items else {})
    if any(batches.item_case(item) for item in items):
        items[:] = batches.order_items(items, _plan(config))


def _mark_expected_failures(items, cases: dict) -> None:
    """A strict xfail on each test of a case that its Expectation covers: every
    test for a stage failure, one comparison's test for a numerics divergence."""
    for item in items:
        case_id = batches.item_case(item)
        expect = cases[case_id].expect if case_id in cases else None
        if expect is not None and expect.applies_to(item.originalname):
            where = "/".join((expect.stage, *expect.checks))
            reason = f"[{where}] {expect.reason}"
            item.add_marker(pytest.mark.xfail(raises=ExpectedStageFailure, strict=True, reason=reason))


def pytest_generate_tests(metafunc):
    if "case_run" in metafunc.fixturenames:
        metafunc.parametrize("case_run", case_params(session_cases(metafunc.config), _plan(metafunc.config)),
                             indirect=True, scope="session")


def case_params(cases: dict, plan: dict[str, str]) -> list:
    """``pytest.param`` per case, carrying its marks."""
    params = []
    for case_id, case in cases.items():
        marks = [pytest.mark.xdist_group(plan.get(case_id, case_id))]
        if case.quick:
            marks.append(pytest.mark.quick)
        params.append(pytest.param(case_id, marks=marks, id=case_id))
    return params


@pytest.fixture(scope="session")
def vgf_artifacts_dir(request, tmp_path_factory) -> Path:
    option = request.config.getoption("--vgf-artifacts")
    if option is None:
        return tmp_path_factory.mktemp("vgf-artifacts", numbered=True)
    path = Path(option)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def vgf_batches(request, vgf_artifacts_dir) -> batches.Batches:
    return batches.Batches(session_cases(request.config), _plan(request.config), request.session.items,
                           vgf_artifacts_dir)


@pytest.fixture(scope="session")
def case_run(request, vgf_batches):
    """One case's run, shared by its tests (parametrized over the session's
    cases in pytest_generate_tests): exported once, kept until the next batch."""
    return vgf_batches.run(request.param)


@pytest.fixture
def golden(snapshot):
    """The case's golden, as syrupy stores it (conformance.goldens.store)."""
    from conformance.goldens import GoldenExtension

    return snapshot.use_extension(GoldenExtension)


# ---------------------------------------------------------------------------
# Recording and the report
# ---------------------------------------------------------------------------
def record_case(request, case_run, **extra) -> None:
    """Attach the case's summary (and ``extra`` fields) to this test's report."""
    data = case_run.summary()
    data.update(extra)
    request.node.user_properties.append((REPORT_KEY, data))


def record_workaround(request, name: str, needed: bool, evidence: list[str], upstream: str) -> None:
    """Attach a workaround-ledger verdict to this test's report."""
    verdict = WorkaroundVerdict(name=name, needed=needed, evidence=evidence, upstream=upstream)
    request.node.user_properties.append((WORKAROUND_KEY, dataclasses.asdict(verdict)))


def _outcome(report) -> str:
    if report.when != "call" and report.failed:
        return "error"
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed and "XPASS(strict)" in str(report.longrepr):
        return "xpassed"
    return report.outcome


def _case_id(nodeid: str) -> str | None:
    if "test_cases.py::" not in nodeid or "[" not in nodeid:
        return None
    return nodeid[nodeid.index("[") + 1 : nodeid.rindex("]")]


class CaseReport:
    """Gathers per-case records from test reports; writes --vgf-report."""

    def __init__(self, config) -> None:
        self.config = config
        self.cases: dict[str, dict] = defaultdict(dict)
        self.workers: dict[str, set[str]] = defaultdict(set)
        self.workarounds: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report) -> None:
        for key, value in report.user_properties:
            if key == WORKAROUND_KEY:
                self.workarounds[value["name"]] = value
        case_id = _case_id(report.nodeid)
        if case_id is None:
            return
        entry = self.cases[case_id]
        node = getattr(report, "node", None)  # the xdist worker that ran it
        if node is not None:
            self.workers[case_id].add(node.gateway.id)
        for key, value in report.user_properties:
            if key != REPORT_KEY:
                continue
            for field, data in value.items():
                if isinstance(data, dict) and isinstance(entry.get(field), dict):
                    entry[field] = {**entry[field], **data}
                else:
                    entry[field] = data
        if report.when == "call" or report.failed or report.skipped:
            test = report.nodeid.split("::")[-1].split("[")[0]
            entry.setdefault("tests", {})[test] = _outcome(report)

    def pytest_sessionfinish(self, session) -> None:
        split = sorted(case for case, workers in self.workers.items() if len(workers) > 1)
        if split:
            # Each case must be exported once, on one worker (--dist loadgroup
            # with its xdist_group mark). pytest 9.2 silently breaks that
            # grouping with pytest-xdist 3.8 (pytest-dev/pytest-xdist#1386).
            session.config.get_terminal_writer().line(
                f"ERROR: {len(split)} case(s) ran on several xdist workers and were exported "
                f"more than once (e.g. {split[0]}): --dist loadgroup is not grouping; "
                "check the pinned pytest and pytest-xdist versions", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        directory = self.config.getoption("--vgf-report")
        if directory is None:
            return
        write_report(build_report(self.cases, self.workarounds), Path(directory))


