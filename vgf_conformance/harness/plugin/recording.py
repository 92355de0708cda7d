"""What a run records: each test's case summary and workaround verdict (as
``user_properties``, so the report is the same with and without xdist),
gathered on the controller by :class:`CaseReport` into ``--vgf-report``; the
commands a report gives to rerun and accept a case; the peak memory of the
processes that ran tests.

Only light imports: the xdist controller gathers the records and needs
neither torch nor ExecuTorch.
"""

from __future__ import annotations

import dataclasses
import resource
import shlex
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from vgf_conformance.harness.reporting import case_log, machine

from vgf_conformance.harness.schedule import durations

from vgf_conformance.harness.execution import hangs
from vgf_conformance.harness.plugin.progress import Progress, case_of, function_of, tier_of
from vgf_conformance.harness.reporting.publish import write_report
from vgf_conformance.harness.reporting.records import SUITE_SCRIPT, WorkaroundVerdict, build_report

REPORT_KEY = "vgf_case"
WORKAROUND_KEY = "vgf_workaround"


def record_case(request, case_run, **extra) -> None:
    """Attach the case's summary (and ``extra`` fields) to this test's report."""
    data = case_run.summary()
    data.update(extra)
    request.node.user_properties.append((REPORT_KEY, data))


def record_workaround(request, name: str, needed: bool, evidence: list[str], upstream: str) -> None:
    """Attach a workaround-ledger verdict to this test's report."""
    verdict = WorkaroundVerdict(name=name, needed=needed, evidence=evidence, upstream=upstream)
    request.node.user_properties.append((WORKAROUND_KEY, dataclasses.asdict(verdict)))


#: The ``when`` of the report xdist makes for a test whose worker died.
CRASH = "???"


def worker_exit(node) -> str:
    """How an xdist worker's process ended: "was killed by SIGSEGV",
    "exited with status 3" (its exit status, read from execnet's process)."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    try:
        code = popen.wait(timeout=10) if popen is not None else None
    except Exception:  # noqa: BLE001 - still running, or not a local process: say so
        code = None
    if code is None:
        return "crashed (its exit status is unknown)"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _outcome(report) -> str:
    if report.when != "call" and report.failed:
        return "error"
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed and "XPASS(strict)" in str(report.longrepr):
        return "xpassed"
    return report.outcome


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
    substring match that would select its look-alikes too); a run of another
    flow than the default (``<flow>/<case id>``) with its ``--vgf-flow``."""
    flow, _, _ = case_id.rpartition("/")
    return (f"{suite_command(config)}{f' --vgf-flow {shlex.quote(flow)}' if flow else ''} "
            f"--vgf-case {shlex.quote(case_id)}")


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
        self.log = case_log.CaseLog(Path(report_dir) if report_dir else None, case_of)
        # What a worker that ended for a hung case wrote: a directory made when the
        # first worker is configured (a run without xdist has no workers to end).
        self.hangs = hangs.Notes(None)

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
    def pytest_configure_node(self, node) -> None:
        if self.hangs.directory is None:
            self.hangs = hangs.Notes.for_controller()
        node.workerinput[hangs.NOTES_KEY] = str(self.hangs.directory)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched) -> None:
        hung = self.hangs.read(case_of(crashitem) or "")
        if hung is not None:  # the worker ended itself: say why, with the stage and the stack
            report.longrepr = f"{report.longrepr}: its case hung in stage '{hung[0] or hangs.UNKNOWN_STAGE}'\n{hung[1]}"

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
        case_id = case_of(report.nodeid)
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
        crash = entry.get("run", {}).get("crashed")
        if crash and not entry.get("error"):
            entry["error"] = crash["error"]  # the records of its later tests do not erase it
        test = report.nodeid.split("::")[-1].split("[")[0]
        crashed = (crash or {}).get("test") == test
        if (report.when == "call" or report.failed or report.skipped) and not crashed:
            entry.setdefault("tests", {})[test] = _outcome(report)  # a crash stays, whatever a rerun gives
        if report.when == CRASH and node is not None:  # xdist's report of a test whose worker died
            exit_text = worker_exit(node)
            entry["error"] = f"worker {node.gateway.id} {exit_text} while running {report.nodeid.split('::')[-1]}"
            crashed = {"worker": node.gateway.id, "exit": exit_text, "test": test}
            hung = self.hangs.read(case_id)
            if hung is not None:  # it ended itself because the case hung (harness/execution/hangs.py)
                crashed["hung"] = hung[0] or hangs.UNKNOWN_STAGE
                entry["error"] += f": the case hung in stage '{crashed['hung']}'; {hung[1]}"
            entry.setdefault("run", {})["crashed"] = {**crashed, "error": entry["error"]}
            # The case is logged now: its other tests may run on a new worker, or the run may not end.
            self.log.finished(report.nodeid, lambda case: build_report({case: self.cases[case]})["cases"][0],
                              now=True)
        worker = node.gateway.id if node is not None else "main"
        if self.first_case.setdefault(worker, case_id) == case_id:
            # It also paid its worker's warm-up (the first export, the .pte
            # child's start): its seconds are not the case's own.
            entry.setdefault("run", {})["first_on_worker"] = True
        test_seconds = entry.setdefault("run", {}).setdefault("tests_seconds", {})
        test = function_of(report.nodeid)
        test_seconds[test] = round(test_seconds.get(test, 0.0) + report.duration, 3)
        if report.when == "teardown":  # the report as the run goes: each finished case appended
            self.log.finished(report.nodeid, lambda case: build_report({case: self.cases[case]})["cases"][0])

    def _time(self, report) -> None:
        """Seconds per tier: each test's duration goes to its tier, except that
        a case's run (built in the setup of its first test) goes to the
        export, numerics and golden tiers by its stage seconds."""
        case_id = case_of(report.nodeid)
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
            # Every skip by reason (vgf_conformance/harness/reporting/skips.py): a check that did not run says so.
            "skips": skipped.ledger.summary() if (skipped := self.config.pluginmanager.get_plugin("vgf-skips"))
            else [],
            "machine": machine.describe(
                self.threads or ({"main": torch_threads()} if torch_threads() is not None else None),
                workers=len(self.busy) if self.threads else 1),
        }

    def pytest_sessionfinish(self, session) -> None:
        if self.progress is not None and self.progress.done:
            self._write_line(self.progress.line(final=True))
        # A case whose worker crashed goes on on a new one: not a grouping fault.
        split = sorted(case for case, workers in self.workers.items()
                       if len(workers) > 1 and not self.cases[case].get("run", {}).get("crashed"))
        if split:
            # Each case must be exported once, on one worker (--dist loadgroup
            # with its xdist_group mark). pytest 9.2 silently breaks that
            # grouping with pytest-xdist 3.8 (pytest-dev/pytest-xdist#1386).
            session.config.get_terminal_writer().line(
                f"ERROR: {len(split)} case(s) ran on several xdist workers and were exported "
                f"more than once (e.g. {split[0]}): --dist loadgroup is not grouping; "
                "check the pinned pytest and pytest-xdist versions", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.hangs.remove()
        directory = self.config.getoption("--vgf-report")
        if directory is None:
            return
        write_report(build_report(self.cases, self.workarounds, self.run_times()), Path(directory))
