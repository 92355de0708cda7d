"""pytest plugin of the vgf_conformance suite: options, per-case marks, report.

Options:
  --vgf-cases FILE      run the families FILE declares (FAMILY or FAMILIES,
                        see vgf_conformance.cases.family) instead of the built-in
                        table; repeatable
  --vgf-case ID         run only this case (exact id; repeatable): the accept and
                        rerun commands select one case with it
  --vgf-golden-dir DIR  goldens in DIR instead of golden/cases (required with --vgf-cases;
                        never the built-in one)
  --vgf-report DIR      write DIR/report.json and DIR/report.md
  --vgf-artifacts DIR   keep each case's export artifacts in DIR/<case id>
                        (default: a fresh directory under pytest's basetemp)
  --vgf-shard I/N       run shard I of N (balanced by the durations file)
  --vgf-durations FILE  seconds per case for shards, batches, order and ETA
                        (default vgf_conformance/durations.json)
  --vgf-case-timeout S  the watchdog of each case's run (default 600 s; 0: none)
  --vgf-vulkan-batch N  cases per batch (one worker, one Vulkan runner process)
  --vgf-progress N      a progress line every N cases (0: none)

Every test of a case is marked ``xdist_group(<its batch>)`` (a batch's tests
stay on one worker under ``--dist loadgroup``; see vgf_conformance/harness/plan.py and batches.py),
``quick`` when the case is in the pull-request tier, and, when the case has
an Expectation, a strict xfail that only an :class:`ExpectedStageFailure`
satisfies.

The report is gathered from the tests' ``user_properties`` on the controller,
so it is the same with and without xdist.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import resource
import shlex
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

import pytest

# Only light modules here: the xdist controller imports this plugin and needs
# neither torch nor ExecuTorch (the workers import them when they collect).
from vgf_conformance.harness import case_log, durations, golden_keeper, machine, plan, skips
from vgf_conformance.harness.publish import write_report
from vgf_conformance.harness.report import SUITE_SCRIPT, WorkaroundVerdict, build_report

REPORT_KEY = "vgf_case"
WORKAROUND_KEY = "vgf_workaround"
PLAN_KEY = pytest.StashKey[dict]()
CASES_KEY = pytest.StashKey[dict]()
PARAMETRIZED_KEY = pytest.StashKey[bool]()  # the case tests were parametrized over the table
DURATIONS_KEY = pytest.StashKey[durations.Durations]()


# ---------------------------------------------------------------------------
# Options, marks, parametrization
# ---------------------------------------------------------------------------
#: Options a team may set in its pytest configuration instead of on the
#: command line (ini name -> option dest): paths, resolved against the
#: configuration file's directory as pytest resolves ``testpaths`` (a path
#: given on the command line is relative to the current directory).
INI_PATHS = {"vgf_golden_dir": "vgf_golden_dir", "vgf_cases": "vgf_cases", "vgf_durations": "vgf_durations"}


def pytest_addoption(parser):
    parser.addini("vgf_golden_dir", type="paths", default=[],
                  help="the golden directory (--vgf-golden-dir), relative to this configuration file")
    parser.addini("vgf_cases", type="paths", default=[],
                  help="case files (--vgf-cases), relative to this configuration file")
    parser.addini("vgf_durations", type="paths", default=[],
                  help="the durations file (--vgf-durations), relative to this configuration file")
    group = parser.getgroup("vgf-conformance")
    group.addoption("--vgf-cases", metavar="FILE", action="append", default=[],
                    help="run the op families this Python file declares (FAMILY or FAMILIES) "
                         "instead of the built-in case table; repeatable")
    group.addoption("--vgf-case", metavar="ID", action="append", default=[],
                    help="run only this case of the table (its exact id; repeatable); the run's "
                         "other tests are deselected")
    group.addoption("--vgf-golden-dir", metavar="DIR", default=None,
                    help="read and write goldens in DIR (<case id>.json each) instead of the "
                         "built-in golden/cases; required with --vgf-cases")
    group.addoption("--vgf-report", metavar="DIR", default=None,
                    help="write the conformance report (report.json, report.md) to DIR")
    group.addoption("--vgf-artifacts", metavar="DIR", default=None,
                    help="keep each case's export artifacts under DIR/<case id> "
                         "(DIR must not hold artifacts of the same cases)")
    group.addoption("--vgf-shard", metavar="I/N", default=None,
                    help="run shard I of N (1-based): cases are dealt over the whole table by "
                         "their seconds in the durations file (longest first, to the shard with "
                         "the least so far; the quick tier first), a case's tests stay together; "
                         "tests that are not per case are dealt on top")
    group.addoption("--vgf-durations", metavar="FILE", default=None,
                    help="seconds per case (python -m vgf_conformance durations update) that "
                         "balance shards and batches, order them and give the ETA "
                         "(default: vgf_conformance/durations.json; missing cases count as the median)")
    group.addoption("--vgf-progress", metavar="N", type=int, default=None,
                    help="print a progress line every N cases (done of total, per tier, ETA) and "
                         "one at the end; 0: none (default: every tenth of the run, at least 10 "
                         "cases; none with -q)")
    group.addoption("--vgf-require-vulkan", action=argparse.BooleanOptionalAction,
                    default=os.environ.get("CI", "").lower() == "true",
                    help="fail (instead of skip) the Vulkan tests when the Vulkan stack is missing; "
                         "on by default where the environment says CI=true")
    group.addoption("--vgf-strict-skips", action=argparse.BooleanOptionalAction,
                    default=os.environ.get("CI", "").lower() == "true",
                    help="fail the run when a test is skipped for a reason not declared in "
                         "vgf_conformance/harness/skips.py (a missing Vulkan stack, browser or package); "
                         "on by default where the environment says CI=true")
    group.addoption("--vgf-case-timeout", metavar="SECONDS", type=float, default=None,
                    help="fail a case whose run (export, numerics, golden) takes longer, naming the "
                         "stage it hung in; the other cases go on (default 600; 0: no watchdog)")
    group.addoption("--vgf-vulkan-batch", metavar="N", type=int, default=plan.DEFAULT_SIZE,
                    help="cases per batch: a batch's tests run on one worker and its cases share "
                         f"one Vulkan runner process (default {plan.DEFAULT_SIZE}; 1: each "
                         "case alone)")


def _ini_paths(config) -> None:
    """The ini options of :data:`INI_PATHS` where the command line gives none."""
    for ini, dest in INI_PATHS.items():
        paths = [str(p) for p in config.getini(ini)]
        if not paths or getattr(config.option, dest):
            continue
        if dest == "vgf_cases":
            setattr(config.option, dest, paths)
        elif len(paths) > 1:
            raise pytest.UsageError(f"ini option {ini} takes one path, got {len(paths)}: {paths}")
        else:
            setattr(config.option, dest, paths[0])


def pytest_configure(config):
    _ini_paths(config)
    config.addinivalue_line("markers", "quick: the representative pull-request subset")
    config.addinivalue_line("markers", "vulkan: runs on the Vulkan stack (scenario runner, llvmpipe)")
    if not config.pluginmanager.hasplugin("xdist"):  # xdist registers it itself
        config.addinivalue_line("markers", "xdist_group(name): keep a case's tests on one worker")
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(WorkerMemory(config), "vgf-worker-memory")
    else:  # the controller, or a run without xdist
        config.pluginmanager.register(CaseReport(config), "vgf-case-report")
        config.pluginmanager.register(skips.SkipReport(config), "vgf-skips")
        if getattr(config.option, "dist", "no") == "loadgroup":
            # Hand groups out in the order of order_items (longest first), not
            # sorted by their number of tests (xdist's --loadscope-reorder).
            config.option.loadscopereorder = False
    _shard(config)  # a bad --vgf-shard is a usage error, whatever is collected
    golden_dir = config.getoption("--vgf-golden-dir")
    if config.getoption("--vgf-cases") and golden_dir is None:
        raise pytest.UsageError(
            "--vgf-cases needs --vgf-golden-dir DIR: a case file's goldens live apart from the "
            "built-in ones (which would look unused, and --snapshot-update would remove them)")
    from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR

    refusal = golden_keeper.golden_dir_refusal(golden_dir, config.getoption("--vgf-cases"), BUILTIN_GOLDEN_DIR)
    if refusal:
        raise pytest.UsageError(refusal)
    if golden_dir is not None:
        from vgf_conformance.goldens.store import set_golden_dir

        set_golden_dir(golden_dir)
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(golden_keeper.GoldenKeeper(
            config, _case_id, lambda: golden_keeper.table_ids_of(config, session_cases)
            if config.stash.get(PARAMETRIZED_KEY, False) else None), "vgf-golden-keeper")
    artifacts = config.getoption("--vgf-artifacts")
    if artifacts and not hasattr(config, "workerinput") and Path(artifacts).is_dir() \
            and any(Path(artifacts).iterdir()):
        raise pytest.UsageError(
            f"--vgf-artifacts {artifacts} already holds files (a previous run's artifacts?); they are never "
            "overwritten: give a new or empty directory")
    case_timeout = config.getoption("--vgf-case-timeout")
    if case_timeout is not None and case_timeout < 0:
        raise pytest.UsageError(f"--vgf-case-timeout must be 0 (no watchdog) or a number of seconds, "
                                f"got {case_timeout:g}")
    if config.getoption("--vgf-vulkan-batch") < 1:
        raise pytest.UsageError(
            f"--vgf-vulkan-batch must be at least 1, got {config.getoption('--vgf-vulkan-batch')}")
    progress = config.getoption("--vgf-progress")
    if progress is not None and progress < 0:
        raise pytest.UsageError(f"--vgf-progress must be 0 (none) or a number of cases, got {progress}")
    try:
        durations.load(config.getoption("--vgf-durations"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


#: The cyclic garbage collector's thresholds in the suite's processes
#: (CPython's default: 700, 10, 10). An export allocates and drops millions
#: of container objects (fx nodes, fake tensors, pass results), so with the
#: default the collector runs thousands of times a case, each pass of the
#: oldest generation over every live object. Measured on 12 exports in one
#: process: 19.7 s with the default, 17.5 s with these. When the collector
#: runs changes nothing an export computes (the goldens are byte-identical).
GC_THRESHOLDS = (20000, 50, 100)


def tune_gc() -> None:
    """Collect once, move every object alive now (the imported toolchain,
    the case table, pytest's collected items: alive for the whole session)
    to the collector's permanent generation so that no later collection
    walks them again, and set :data:`GC_THRESHOLDS`. Without the freeze the
    suite's exports ran 17 % slower than the same exports in a bare process
    (scripts/benchmark.py, harness overhead): the collector walking pytest's
    thousands of items. (The rest of that overhead was the depth of pytest's
    stack: :func:`vgf_conformance.harness.runner.on_a_fresh_stack`.)"""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
    if session.items:  # a process that runs tests (an xdist worker, or a run without xdist)
        tune_gc()
    config = session.config
    if hasattr(config, "workerinput") and config.stash.get(PARAMETRIZED_KEY, False):
        # The whole table's ids, for the controller's stale-golden check.
        config.workeroutput[golden_keeper.TABLE_KEY] = list(session_cases(config, whole=True))


def _shard(config) -> tuple[int, int] | None:
    spec = config.getoption("--vgf-shard")
    return _parse_shard(spec) if spec else None


def session_cases(config, whole: bool = False) -> dict:
    """The cases of this run (case id -> Case): the built-in table, or the
    families of the ``--vgf-cases`` files, restricted to ``--vgf-case`` ids
    (``whole``: not restricted). Loaded once, when a run collects."""
    if CASES_KEY not in config.stash:
        from vgf_conformance.cases import CASES, build_table, load_case_file

        files = config.getoption("--vgf-cases")
        try:
            config.stash[CASES_KEY] = build_table(
                [f for path in files for f in load_case_file(path)]) if files else CASES
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
    table = config.stash[CASES_KEY]
    only = config.getoption("--vgf-case")
    if whole or not only:
        return table
    unknown = [case_id for case_id in only if case_id not in table]
    if unknown:
        raise pytest.UsageError(f"--vgf-case: no case {unknown[0]!r} in the table "
                                f"(python -m vgf_conformance lists the case ids)")
    return {case_id: table[case_id] for case_id in table if case_id in only}


def session_durations(config) -> durations.Durations:
    """Seconds per case (and per test that is not per case) of --vgf-durations."""
    if DURATIONS_KEY not in config.stash:
        config.stash[DURATIONS_KEY] = durations.load(
            config.getoption("--vgf-durations")).restricted(session_cases(config))
    return config.stash[DURATIONS_KEY]


def _workers(config) -> int:
    """The xdist workers sharing this run (1 without xdist)."""
    return int(getattr(config, "workerinput", {}).get("workercount", 1))


def _quick(config) -> set[str]:
    return {c for c, case in session_cases(config).items() if case.quick}


def _plan(config) -> dict[str, str]:
    """Case id -> batch (vgf_conformance/harness/plan.py), computed once, when a run
    collects cases (identically on every xdist worker)."""
    if PLAN_KEY not in config.stash:
        config.stash[PLAN_KEY] = plan.plan_batches(
            session_cases(config), _quick(config), config.getoption("--vgf-vulkan-batch"),
            _shard(config), session_durations(config), _workers(config))
    return config.stash[PLAN_KEY]


def _parse_shard(spec: str) -> tuple[int, int]:
    try:
        return plan.parse_shard(spec)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(trylast=True)  # after -m/-k deselection and pytest's fixture ordering
def pytest_collection_modifyitems(config, items):
    if config.getoption("--vgf-case"):  # exactly these cases: the run's other tests go
        others = [item for item in items if plan.item_case(item) is None]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if plan.item_case(item) is not None]
    shard = _shard(config)
    seconds = session_durations(config) if items else None
    if shard is not None:
        assignment, loads = plan.shard_assignment(session_cases(config), shard[1], _quick(config),
                                                     seconds)
        # Tests that are not per case and that the durations file does not
        # know (so they were not dealt with the cases) go on top.
        others = {item.nodeid: seconds(item.nodeid) for item in items
                  if plan.item_case(item) is None and item.nodeid not in assignment}
        assignment.update(durations.balance(others, shard[1], loads)[0])
        keep, drop = [], []
        for item in items:
            unit = plan.item_case(item) or item.nodeid
            (keep if assignment.get(unit) == shard[0] - 1 else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    _mark_expected_failures(items, session_cases(config) if items else {})
    if any(plan.item_case(item) for item in items):
        items[:] = plan.order_items(items, _plan(config), seconds)


def _mark_expected_failures(items, cases: dict) -> None:
    """A strict xfail on each test of a case that its Expectation covers: every
    test for a stage failure, one comparison's test for a numerics divergence."""
    from vgf_conformance.harness.runner import ExpectedStageFailure

    for item in items:
        case_id = plan.item_case(item)
        expect = cases[case_id].expect if case_id in cases else None
        if expect is not None and expect.applies_to(item.originalname):
            where = "/".join((expect.stage, *expect.checks))
            reason = f"[{where}] {expect.reason}"
            item.add_marker(pytest.mark.xfail(raises=ExpectedStageFailure, strict=True, reason=reason))


def pytest_generate_tests(metafunc):
    if "case_run" in metafunc.fixturenames:
        # The table's cases are this run's: its goldens are checked against it.
        metafunc.config.stash[PARAMETRIZED_KEY] = True
        metafunc.parametrize("case_run", case_params(session_cases(metafunc.config), _plan(metafunc.config)),
                             indirect=True, scope="session")


def case_params(cases: dict, batch_of: dict[str, str]) -> list:
    """``pytest.param`` per case, carrying its marks."""
    params = []
    for case_id, case in cases.items():
        marks = [pytest.mark.xdist_group(batch_of.get(case_id, case_id))]
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
def vgf_batches(request, vgf_artifacts_dir):
    """The runs of the current batch and their Vulkan results (vgf_conformance/harness/batches.py)."""
    from vgf_conformance.harness.batches import Batches

    from vgf_conformance.harness.runner import CASE_TIMEOUT

    timeout = request.config.getoption("--vgf-case-timeout")
    timeout = CASE_TIMEOUT if timeout is None else (timeout or None)
    return Batches(session_cases(request.config), _plan(request.config), request.session.items,
                   vgf_artifacts_dir, case_timeout=timeout)


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


CASE_TESTS_MODULE = "test_cases.py"  # vgf_conformance/test_cases.py: the tests of each case


def _case_id(nodeid: str) -> str | None:
    """The case of a test of vgf_conformance/test_cases.py, from its node id:
    ``vgf_conformance/test_cases.py::test_export[<case>]`` in this repository,
    ``::test_export[<case>]`` in a team repository's run (``--pyargs``, the
    module outside the rootdir, so its path is left out); under ``--dist
    loadgroup`` xdist appends ``@<group>``."""
    module, _, test = nodeid.partition("::")
    if module and Path(module).name != CASE_TESTS_MODULE:
        return None
    if "::" in test or "[" not in test or "]" not in test:
        return None
    return test[test.index("[") + 1 : test.rindex("]")]


def suite_command(config) -> str:
    """The command that reruns this run's cases: ``scripts/conformance.sh`` on
    the built-in table; on a case file (a team repository), pytest with the
    ``--vgf-cases`` and ``--vgf-golden-dir`` arguments given on the command
    line (those of an ini file's addopts apply again by themselves)."""
    if not config.getoption("--vgf-golden-dir"):
        return SUITE_SCRIPT
    words, args = ["pytest"], list(config.invocation_params.args)
    for i, arg in enumerate(args):
        option = arg.split("=", 1)[0]
        if option in ("--vgf-cases", "--vgf-golden-dir"):
            words.append(shlex.quote(arg))
            if "=" not in arg and i + 1 < len(args):
                words.append(shlex.quote(args[i + 1]))
    return " ".join(words)


def case_command(config, case_id: str) -> str:
    """The command that reruns exactly one case (``--vgf-case``, never a
    substring match that would select its look-alikes too)."""
    return f"{suite_command(config)} --vgf-case {shlex.quote(case_id)}"


def accept_command(config, case_id: str) -> str:
    """The command that accepts a case's changed golden."""
    return f"{case_command(config, case_id)} --snapshot-update"


def peak_memory() -> dict[str, float]:
    """This process's resident-set high-water mark, and that of the largest of
    its child processes waited for (TOSA reference model, model-converter,
    scenario runner, .pte runtime), in MiB. Linux counts in a child's mark
    the image it replaced at exec (its parent's, for a forked child), so the
    children's figure is an upper bound: at least this process's own at the
    time of the fork."""
    mib = lambda usage: round(usage.ru_maxrss / 1024, 1)  # noqa: E731 - ru_maxrss is in KiB on Linux
    return {"rss_mib": mib(resource.getrusage(resource.RUSAGE_SELF)),
            "children_rss_mib": mib(resource.getrusage(resource.RUSAGE_CHILDREN))}


class WorkerMemory:
    """On an xdist worker: its peak memory, sent to the controller with the
    worker's output (updated after each test, so a worker that dies still
    told its last value)."""

    def __init__(self, config) -> None:
        self.config = config

    def pytest_runtest_logfinish(self) -> None:
        self.config.workeroutput["vgf_memory"] = peak_memory()
        threads = torch_threads()
        if threads is not None:
            self.config.workeroutput["vgf_threads"] = threads


def torch_threads() -> int | None:
    """torch's intra-op thread count in this process (None before torch is imported)."""
    import sys

    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _test_name(nodeid: str) -> str:
    return nodeid.split("::")[-1].split("[")[0]


def tier_of(nodeid: str) -> str:
    """A test's tier: what its name says after ``test_`` up to the next
    underscore for a case's tests (export, delegation, golden, numerics, pte,
    vulkan), the module's name for the others (e.g. workarounds)."""
    if _case_id(nodeid) is not None:
        return _test_name(nodeid).removeprefix("test_").split("_")[0]
    return Path(nodeid.split("::")[0]).stem.removeprefix("test_")


def _minutes(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Where a long run is (controller side, so the same with xdist): cases
    done of the total, per tier, and the time left. A case is done in a tier
    when its tests of that tier have finished; the time left is the elapsed
    time scaled by the seconds (durations file) of what is left against what
    is done."""

    def __init__(self, every: int | None = None) -> None:
        self.every = every  # None: every tenth of the run
        self.seconds: Callable[[str], float] = lambda unit: 1.0
        self.tests: dict[str, set[str]] = {}  # unit (case id or node id) -> its tests not done
        self.tiers: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # tier -> unit -> left
        self.size: dict[str, int] = {}
        self.done: set[str] = set()
        self.start = self.first = time.perf_counter()
        self.next_line = 0

    def collected(self, nodeids, seconds: Callable[[str], float]) -> None:
        """The run's tests (node ids) and the seconds of each unit."""
        if self.tests:
            return  # every xdist worker sends the same collection
        self.seconds = seconds
        for nodeid in nodeids:
            unit = _case_id(nodeid) or nodeid
            self.tests.setdefault(unit, set()).add(nodeid)
            self.tiers[tier_of(nodeid)][unit].add(nodeid)
        self.size = {unit: len(tests) for unit, tests in self.tests.items()}
        self.cases = [u for u in self.tests if _case_id(next(iter(self.tests[u]))) is not None]
        if isinstance(seconds, durations.Durations):
            self.seconds = seconds.restricted(self.cases)
        self.interval = self.every or max(10, -(-len(self.cases) // 10))
        self.next_line = self.interval
        self.first = time.perf_counter()

    def finished(self, nodeid: str) -> str | None:
        """Record a test's end; the progress line when it is time for one."""
        unit = _case_id(nodeid) or nodeid
        left = self.tests.get(unit)
        if left is None or nodeid not in left:
            return None
        left.discard(nodeid)
        self.tiers[tier_of(nodeid)][unit].discard(nodeid)
        if left or unit in self.done:
            return None
        self.done.add(unit)
        done_cases = sum(1 for c in self.cases if c in self.done)
        if unit in self.cases and done_cases >= self.next_line and done_cases < len(self.cases):
            self.next_line += self.interval
            return self.line()
        return None

    def line(self, final: bool = False) -> str:
        now = time.perf_counter()
        done_cases = sum(1 for c in self.cases if c in self.done)
        parts = [f"{done_cases}/{len(self.cases)} cases"]
        for tier, units in self.tiers.items():
            cases = [u for u in units if u in self.cases]
            if cases:
                parts.append(f"{tier} {sum(1 for u in cases if not units[u])}/{len(cases)}")
            else:
                parts.append(f"{tier} {sum(1 for u in units if not units[u])}/{len(units)} tests")
        elapsed = f"{_minutes(now - self.start)} elapsed"
        if final:
            return "vgf progress: done, " + ", ".join(parts) + f"; {elapsed}"
        total = sum(self.seconds(u) for u in self.tests)
        done = sum(self.seconds(u) * (1 - len(left) / self.size[u]) for u, left in self.tests.items())
        eta = (now - self.first) * (total - done) / done if done else 0.0
        return "vgf progress: " + ", ".join(parts) + f"; {elapsed}, about {_minutes(eta)} left"


class CaseReport:
    """Gathers per-case records from test reports; writes --vgf-report; prints
    the progress lines."""

    def __init__(self, config) -> None:
        self.config = config
        self.cases: dict[str, dict] = defaultdict(dict)
        self.workers: dict[str, set[str]] = defaultdict(set)
        self.workarounds: dict[str, dict] = {}
        self.setup_seconds: Counter = Counter()  # case id -> its tests' setup seconds (its run)
        self.other_tests: Counter = Counter()  # node id -> seconds, for tests not per case
        self.tier_seconds: Counter = Counter()
        self.tier_tests: Counter = Counter()
        self.start = time.perf_counter()
        self.memory: dict[str, dict] = {}  # worker id -> peak_memory()
        self.threads: dict[str, int] = {}  # worker id -> torch threads
        self.first_case: dict[str, str] = {}  # worker id -> the first case it ran
        self.busy: dict[str, list] = defaultdict(lambda: [0, 0.0, 0.0])  # worker -> tests, seconds, last end
        every = config.getoption("--vgf-progress")
        quiet = every is None and config.get_verbosity() < 0
        self.progress = None if every == 0 or quiet else Progress(every)
        report_dir = config.getoption("--vgf-report")
        self.log = case_log.CaseLog(Path(report_dir) if report_dir else None, _case_id)

    def pytest_collection_finish(self, session) -> None:
        if self.progress is not None and session.items:
            self.progress.collected([item.nodeid for item in session.items], self._durations())
        if session.items:
            self.log.planned(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.progress is not None:
            self.progress.collected(ids, self._durations())
        self.log.planned(ids)

    def _durations(self) -> durations.Durations:
        # Not session_durations: that loads the case table (torch) on the controller.
        return durations.load(self.config.getoption("--vgf-durations"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        memory = getattr(node, "workeroutput", {}).get("vgf_memory")
        if memory is not None:
            self.memory[node.gateway.id] = memory
        threads = getattr(node, "workeroutput", {}).get("vgf_threads")
        if threads is not None:
            self.threads[node.gateway.id] = threads

    def _write_line(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text)

    def pytest_runtest_logreport(self, report) -> None:
        for key, value in report.user_properties:
            if key == WORKAROUND_KEY:
                self.workarounds[value["name"]] = value
        self._time(report)
        if self.progress is not None and report.when == "teardown":
            line = self.progress.finished(report.nodeid)
            if line:
                self._write_line(line)
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
        worker = node.gateway.id if node is not None else "main"
        if self.first_case.setdefault(worker, case_id) == case_id:
            # It also paid its worker's warm-up (the first export, the .pte
            # child's start): its seconds are not the case's own.
            entry.setdefault("run", {})["first_on_worker"] = True
        test_seconds = entry.setdefault("run", {}).setdefault("tests_seconds", {})
        test = _test_name(report.nodeid)
        test_seconds[test] = round(test_seconds.get(test, 0.0) + report.duration, 3)
        if report.when == "teardown":  # the report as the run goes: each finished case appended
            self.log.finished(report.nodeid, lambda case: build_report({case: self.cases[case]})["cases"][0])

    def _time(self, report) -> None:
        """Seconds per tier: each test's duration goes to its tier, except that
        a case's run (built in the setup of its first test) goes to the
        export, numerics and golden tiers by its stage seconds."""
        case_id = _case_id(report.nodeid)
        tier = tier_of(report.nodeid)
        if report.when == "setup" and case_id is not None:
            self.setup_seconds[case_id] += report.duration
        else:
            self.tier_seconds[tier] += report.duration
        if case_id is None:
            self.other_tests[report.nodeid] += report.duration
        if report.when == "teardown":
            self.tier_tests[tier] += 1
        node = getattr(report, "node", None)
        busy = self.busy[node.gateway.id if node is not None else "main"]
        busy[0] += report.when == "teardown"
        busy[1] += report.duration
        busy[2] = time.perf_counter() - self.start

    def run_times(self) -> dict:
        """The report's ``run``: seconds per tier (summed over workers), the
        tests that are not per case, and the run's wall seconds."""
        tiers = Counter(self.tier_seconds)
        for case_id, setup in self.setup_seconds.items():
            stages = (self.cases.get(case_id, {}).get("run") or {}).get("seconds") or {}
            built = {tier: stages.get(tier, 0.0) for tier in ("numerics", "golden")}
            for tier, seconds in built.items():
                tiers[tier] += seconds
            tiers["export"] += max(0.0, setup - sum(built.values()))
        return {
            "tiers": {tier: {"tests": self.tier_tests[tier], "seconds": round(tiers[tier], 1)}
                      for tier in sorted(set(tiers) | set(self.tier_tests))},
            "other_tests": {nodeid: round(seconds, 2) for nodeid, seconds in sorted(self.other_tests.items())},
            "wall_seconds": round(time.perf_counter() - self.start, 1),
            "command": suite_command(self.config),  # reruns a case with --vgf-case <case id>
            # Per worker: tests run, seconds in them, and when its last test
            # ended (seconds since the run started): workers that finish
            # together waste no time.
            "workers": {worker: {"tests": n, "seconds": round(seconds, 1), "last_end": round(end, 1)}
                        for worker, (n, seconds, end) in sorted(self.busy.items())},
            # Peak resident memory per process that ran tests (xdist workers,
            # or this one) and of its largest child process.
            "memory": dict(sorted(self.memory.items())) or {"main": peak_memory()},
            # Where it ran: calibrated values move with oneDNN's ISA and the
            # thread count (vgf_conformance/goldens/compliance.py).
            # Every skip by reason (vgf_conformance/harness/skips.py): a check that did not run says so.
            "skips": skipped.ledger.summary() if (skipped := self.config.pluginmanager.get_plugin("vgf-skips"))
            else [],
            "machine": machine.describe(
                self.threads or ({"main": torch_threads()} if torch_threads() is not None else None),
                workers=len(self.busy) if self.threads else 1),
        }

    def pytest_sessionfinish(self, session) -> None:
        if self.progress is not None and self.progress.done:
            self._write_line(self.progress.line(final=True))
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
        write_report(build_report(self.cases, self.workarounds, self.run_times()), Path(directory))
