"""The suite's command-line and ini options, and their checks.

Options:
  --vgf-cases FILE      run the families FILE declares (FAMILY or FAMILIES,
                        see vgf_conformance.cases.family) instead of the built-in
                        table; repeatable
  --vgf-case ID         run only this case (exact id; repeatable): the accept and
                        rerun commands select one case with it
  --vgf-flow NAME       run the cases in this flow (repeatable; all: every flow;
                        default: the gating flows; see vgf_conformance.cases.flows)
  --vgf-golden-dir DIR  goldens in DIR instead of golden/cases (required with --vgf-cases;
                        never the built-in one)
  --vgf-report DIR      write DIR/report.json and DIR/report.md
  --vgf-artifacts DIR   keep each case's export artifacts in DIR/<case id>
                        (default: a fresh directory under pytest's basetemp)
  --vgf-stack-coverage DIR  record the stack lines each case's export reaches
  --vgf-shard I/N       run shard I of N (balanced by the durations file)
  --vgf-durations FILE  seconds per case for shards, batches, order and ETA
                        (default vgf_conformance/durations.json)
  --vgf-case-timeout S  the watchdog of each case's run (default 600 s; 0: none)
  --vgf-vulkan-batch N  cases per batch (one worker, one Vulkan runner process)
  --vgf-progress N      a progress line every N cases (0: none)

Only light imports: the xdist controller checks these and needs neither
torch nor ExecuTorch.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from vgf_conformance.harness.schedule import durations, plan

from vgf_conformance.harness.plugin import golden_keeper

#: Options a team may set in its pytest configuration instead of on the
#: command line (ini name -> option dest): paths, resolved against the
#: configuration file's directory as pytest resolves ``testpaths`` (a path
#: given on the command line is relative to the current directory).
INI_PATHS = {"vgf_golden_dir": "vgf_golden_dir", "vgf_cases": "vgf_cases", "vgf_durations": "vgf_durations"}


def _on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def add_options(parser) -> None:
    """pytest_addoption: the ``vgf-conformance`` group and its ini options."""
    parser.addini("vgf_golden_dir", type="paths", default=[],
                  help="the golden directory (--vgf-golden-dir), relative to this configuration file")
    parser.addini("vgf_cases", type="paths", default=[],
                  help="case files (--vgf-cases), relative to this configuration file")
    parser.addini("vgf_flow", type="args", default=[],
                  help="the flows a run lowers its cases in, as --vgf-flow (default: the gating flows)")
    parser.addini("vgf_durations", type="paths", default=[],
                  help="the durations file (--vgf-durations), relative to this configuration file")
    group = parser.getgroup("vgf-conformance")
    group.addoption("--vgf-cases", metavar="FILE", action="append", default=[],
                    help="run the op families this Python file declares (FAMILY or FAMILIES) "
                         "instead of the built-in case table; repeatable")
    group.addoption("--vgf-case", metavar="ID", action="append", default=[],
                    help="run only this case of the table (its exact id; repeatable); the run's "
                         "other tests are deselected")
    group.addoption("--vgf-flow", metavar="NAME", action="append", default=[],
                    help="lower the cases in this flow (repeatable; 'all': every flow); a run of "
                         "another flow than vgf is <flow>/<case id> (default: the gating flows, "
                         "vgf_conformance/cases/flows.py)")
    group.addoption("--vgf-stack-coverage", metavar="DIR", default=None,
                    help="record the lines and branches of the stack's Python (ExecuTorch's Arm backend, "
                         "exir, torchao's PT2E, vgf_export) each case's export reaches, into DIR "
                         "(python -m vgf_conformance stack-coverage DIR reads them)")
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
    group.addoption("--vgf-require-vulkan", action=argparse.BooleanOptionalAction, default=_on_ci(),
                    help="fail (instead of skip) the Vulkan tests when the Vulkan stack is missing; "
                         "on by default where the environment says CI=true")
    group.addoption("--vgf-strict-skips", action=argparse.BooleanOptionalAction, default=_on_ci(),
                    help="fail the run when a test is skipped for a reason not declared in "
                         "vgf_conformance/harness/reporting/skips.py (a missing Vulkan stack, browser or package); "
                         "on by default where the environment says CI=true")
    group.addoption("--vgf-case-timeout", metavar="SECONDS", type=float, default=None,
                    help="fail a case whose run (export, numerics, golden) takes longer, naming the "
                         "stage it hung in; the other cases go on (default 600; 0: no watchdog)")
    group.addoption("--vgf-vulkan-batch", metavar="N", type=int, default=plan.DEFAULT_SIZE,
                    help="cases per batch: a batch's tests run on one worker and its cases share "
                         f"one Vulkan runner process (default {plan.DEFAULT_SIZE}; 1: each "
                         "case alone)")


def apply_ini_paths(config) -> None:
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


def shard(config) -> tuple[int, int] | None:
    """``--vgf-shard I/N`` as (I, N); a bad value is a usage error."""
    spec = config.getoption("--vgf-shard")
    if not spec:
        return None
    try:
        return plan.parse_shard(spec)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def flows(config) -> tuple[str, ...]:
    """The flow names a run asked for (``--vgf-flow``, else the ini's ``vgf_flow``);
    empty: the gating flows. Checked against the registry where the table loads."""
    return tuple(config.getoption("--vgf-flow") or config.getini("vgf_flow"))


def case_timeout(config) -> float | None:
    """The watchdog's seconds per case (None: no watchdog)."""
    from vgf_conformance.harness.execution.runner import CASE_TIMEOUT

    timeout = config.getoption("--vgf-case-timeout")
    return CASE_TIMEOUT if timeout is None else (timeout or None)


def check(config) -> None:
    """Every option checked when the run is configured, whatever is
    collected: a bad one is a usage error naming it and what it expects."""
    shard(config)
    golden_dir = config.getoption("--vgf-golden-dir")
    if config.getoption("--vgf-cases") and golden_dir is None:
        raise pytest.UsageError(
            "--vgf-cases needs --vgf-golden-dir DIR: a case file's goldens live apart from the "
            "built-in ones (which would look unused, and --snapshot-update would remove them)")
    from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR

    refusal = golden_keeper.golden_dir_refusal(golden_dir, config.getoption("--vgf-cases"), BUILTIN_GOLDEN_DIR)
    if refusal:
        raise pytest.UsageError(refusal)
    artifacts = config.getoption("--vgf-artifacts")
    if artifacts and not hasattr(config, "workerinput") and Path(artifacts).is_dir() \
            and any(Path(artifacts).iterdir()):
        raise pytest.UsageError(
            f"--vgf-artifacts {artifacts} already holds files (a previous run's artifacts?); they are never "
            "overwritten: give a new or empty directory")
    if config.getoption("--vgf-stack-coverage"):
        import importlib.util

        if importlib.util.find_spec("coverage") is None:
            raise pytest.UsageError("--vgf-stack-coverage needs coverage.py: pip install -c requirements.lock "
                                    "coverage (scripts/setup.sh installs it)")
    timeout = config.getoption("--vgf-case-timeout")
    if timeout is not None and timeout < 0:
        raise pytest.UsageError(f"--vgf-case-timeout must be 0 (no watchdog) or a number of seconds, "
                                f"got {timeout:g}")
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
