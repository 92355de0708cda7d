"""pytest plugin of the vgf_conformance suite: its hooks and fixtures, nothing else.

Each hook calls the module that does the work: options and their checks
(:mod:`~vgf_conformance.harness.plugin.options`), the run's cases, shard, batches
and marks (:class:`~vgf_conformance.harness.plugin.session.Session`), the report
and progress lines (:mod:`~vgf_conformance.harness.plugin.recording`), skips
(:mod:`~vgf_conformance.harness.reporting.skips`) and the golden directory
(:mod:`~vgf_conformance.harness.plugin.golden_keeper`).

Every test of a case is marked ``xdist_group(<its batch>)`` (a batch's tests
stay on one worker under ``--dist loadgroup``; see vgf_conformance/harness/schedule/plan.py and batches.py),
``quick`` when the case is in the pull-request tier, and, when the case has
an Expectation, a strict xfail that only an :class:`ExpectedStageFailure`
satisfies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Only light modules here: the xdist controller imports this plugin and needs
# neither torch nor ExecuTorch (the workers import them when they collect).
from vgf_conformance.harness.plugin import golden_keeper, options, recording
from vgf_conformance.harness.reporting import skips
from vgf_conformance.harness.schedule.plan import item_case
from vgf_conformance.harness.plugin.progress import case_of
from vgf_conformance.harness.plugin.session import Session, session_cases


def pytest_addoption(parser):
    options.add_options(parser)


def pytest_configure(config):
    options.apply_ini_paths(config)
    config.addinivalue_line("markers", "quick: the representative pull-request subset")
    config.addinivalue_line("markers", "vulkan: runs on the Vulkan stack (scenario runner, llvmpipe)")
    if not config.pluginmanager.hasplugin("xdist"):  # xdist registers it itself
        config.addinivalue_line("markers", "xdist_group(name): keep a case's tests on one worker")
    options.check(config)
    golden_dir = config.getoption("--vgf-golden-dir")
    if golden_dir is not None:
        from vgf_conformance.goldens.store import set_golden_dir

        set_golden_dir(golden_dir)
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(recording.WorkerMemory(config), "vgf-worker-memory")
        return
    # The controller, or a run without xdist: it gathers the results.
    config.pluginmanager.register(recording.CaseReport(config), "vgf-case-report")
    config.pluginmanager.register(skips.SkipReport(config), "vgf-skips")
    session = Session.of(config)
    config.pluginmanager.register(golden_keeper.GoldenKeeper(
        config, case_of, lambda: golden_keeper.table_ids_of(config, session_cases) if session.parametrized
        else None), "vgf-golden-keeper")
    if getattr(config.option, "dist", "no") == "loadgroup":
        # Hand groups out in the order of order_items (longest first), not
        # sorted by their number of tests (xdist's --loadscope-reorder).
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` that goes on after a worker is lost (xdist's own
    can wait forever then: vgf_conformance/harness/execution/scheduling.py)."""
    from vgf_conformance.harness.execution import scheduling

    return scheduling.make_scheduler(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
    config = session.config
    if any(item_case(item) is not None for item in session.items):  # a process that runs cases
        from vgf_conformance.harness.execution.runner import tune_gc

        tune_gc()
    if hasattr(config, "workerinput") and Session.of(config).parametrized:
        # The whole table's ids, for the controller's stale-golden check.
        config.workeroutput[golden_keeper.TABLE_KEY] = list(session_cases(config, whole=True))


@pytest.hookimpl(trylast=True)  # after -m/-k deselection and pytest's fixture ordering
def pytest_collection_modifyitems(config, items):
    Session.of(config).select(items)


def pytest_generate_tests(metafunc):
    if "case_run" in metafunc.fixturenames:
        # The table's cases are about to run: their golden directory must be this table's.
        refusal = golden_keeper.foreign_table_refusal(metafunc.config, session_cases)
        if refusal:
            raise pytest.Collector.CollectError(refusal)  # shown as its message alone
        metafunc.parametrize("case_run", Session.of(metafunc.config).case_params(), indirect=True, scope="session")


@pytest.fixture(scope="session")
def vgf_artifacts_dir(request, tmp_path_factory) -> Path:
    option = request.config.getoption("--vgf-artifacts")
    if option is None:
        return tmp_path_factory.mktemp("vgf-artifacts", numbered=True)
    path = Path(option)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def vgf_batches(request, vgf_artifacts_dir):
    """The runs of the current batch and their Vulkan results (vgf_conformance/harness/execution/batches.py)."""
    from vgf_conformance.harness.execution.batches import Batches
    from vgf_conformance.harness.execution.hangs import Notes
    from vgf_conformance.harness.measurements.stack_coverage import StackCoverage

    session = Session.of(request.config)
    stack_coverage = StackCoverage.of_worker(request.config)
    if stack_coverage is not None:
        request.addfinalizer(stack_coverage.save)
    return Batches(session.cases(), session.plan, request.session.items, vgf_artifacts_dir,
                   case_timeout=options.case_timeout(request.config), hangs=Notes.of_worker(request.config),
                   stack_coverage=stack_coverage)


@pytest.fixture(scope="session")
def case_run(request, vgf_batches):
    """One case's run, shared by its tests (parametrized over the session's
    cases in pytest_generate_tests): exported once, kept until the next batch."""
    return vgf_batches.run(request.param)


@pytest.fixture
def golden(snapshot):
    """The case's golden, as syrupy stores it (vgf_conformance.goldens.store)."""
    from vgf_conformance.goldens import GoldenExtension

    return snapshot.use_extension(GoldenExtension)
