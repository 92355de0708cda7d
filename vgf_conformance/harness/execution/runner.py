"""Running one case: export it once, build everything its tests check.

:func:`run_case` never raises: it returns a :class:`CaseRun` that records
the stage reached, the failure (stage, error, the tail of its message, and
its origin: ExecuTorch's toolchain, the case's definition, or this suite's
harness) and, on success, the golden sections. The tests of the case then
assert on it, so a case is exported exactly once per run. A golden that
cannot be built fails ``test_golden`` alone: it never hides a failure of the
export or the numerics.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import gc
import re
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from vgf_conformance.cases import STAGES, Case
from vgf_conformance.goldens import build_golden
from vgf_conformance.oracles.lowered import LoweredRunError
from vgf_conformance import speed_patches
from vgf_conformance.oracles.numerics import Numerics, measure
from vgf_conformance.text import tail
from vgf_export import ExportResult, ExportStageError, export_model

#: Where a failure comes from. Only a toolchain failure is ExecuTorch's (or
#: the TOSA tools' or ML SDK's): the others are bugs of a case or of the suite.
TOOLCHAIN, CASE, HARNESS = "toolchain", "case", "harness"
_ORIGIN_TEXT = {
    TOOLCHAIN: "",
    CASE: " (the case's definition failed, not the toolchain: fix the case)",
    HARNESS: " (the suite's harness failed, not the toolchain: a bug of vgf-conformance)",
}


class ExpectedStageFailure(Exception):
    """A case failed exactly as its Expectation says (strict xfail)."""


class CaseFailure(AssertionError):
    """A case failed at a stage it was not expected to fail at."""


@dataclasses.dataclass
class StageFailure:
    stage: str
    error_type: str
    message: str
    origin: str = TOOLCHAIN  # TOOLCHAIN, CASE or HARNESS

    def describe(self) -> str:
        return f"[{self.stage}] {self.error_type}: {self.message}"

    @classmethod
    def of(cls, stage: str, error: BaseException, origin: str) -> "StageFailure":
        """From an exception: its message for a toolchain error, the traceback otherwise."""
        text = str(error) if origin == TOOLCHAIN else traceback.format_exc()
        return cls(stage, type(error).__name__, tail(text), origin)


@dataclasses.dataclass
class CaseRun:
    case: Case
    artifacts: Path
    stage: str  # the last stage reached (where it failed, if it failed)
    failure: StageFailure | None = None
    result: ExportResult | None = None
    numerics: Numerics | None = None
    golden: dict | None = None
    golden_failure: StageFailure | None = None  # the golden could not be built
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    vulkan_batch: int | None = None  # cases that shared its Vulkan runner process
    #: Warnings the stack raised during the export: "Category: message (file:line)".
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: The run did not finish within its timeout (its thread is still running).
    hung: bool = False
    #: ``guard(stage, fn, *args)``: ``fn(*args)`` for the case after its run
    #: (a re-export), under the case's watchdog; set by the pytest plugin
    #: (:meth:`vgf_conformance.harness.execution.batches.Batches.guarded`).
    guard: Any = dataclasses.field(default=None, repr=False)
    #: The model and inputs the case was exported from, built once: the
    #: oracles and the golden use the same ones.
    model: Any = dataclasses.field(default=None, repr=False)
    inputs: Any = dataclasses.field(default=None, repr=False)

    def fail(self, failure: StageFailure) -> None:
        """Raise for ``failure``: as expected (xfail) or as a real failure."""
        expect = self.case.expect
        if (
            expect is not None
            and not expect.checks
            and failure.stage == expect.stage
            and re.search(expect.match, f"{failure.error_type}: {failure.message}")
        ):
            raise ExpectedStageFailure(f"{failure.describe()}\n(expected: {expect.reason})")
        hint = ""
        if expect is not None:
            hint = f"\nexpected instead: [{expect.stage}] /{expect.match}/ ({expect.reason})"
        raise CaseFailure(
            f"case {self.case.id} failed at stage '{failure.stage}'{_ORIGIN_TEXT[failure.origin]}\n"
            f"{failure.describe()}\nartifacts: {self.artifacts}{hint}"
        )

    def unexcused(self, check: str, failures: list[str]) -> list[tuple[str, str]]:
        """The failures of ``check`` the case's expectation does not excuse,
        each with why (all of them when it has none for ``check``)."""
        expect = self.case.expect
        if expect is None or check not in expect.checks:
            return [(f, "no expectation for this check") for f in failures]
        return [(f, why) for f in failures if (why := expect.excuses(f)) is not None]

    def fail_check(self, check: str, what: str, message: str | list[str]) -> None:
        """Raise for a failed check of the run (a comparison, ``pte``): as
        expected (xfail) or as a real failure. ``what`` says what was checked;
        ``message`` is the failure, or the list of its separate failures (one
        per output, tensor or problem): an expectation excuses a failure only
        when it matches every one of them, so it never absorbs another."""
        failures = [message] if isinstance(message, str) else list(message)
        message = "\n".join(failures)
        expect = self.case.expect
        unexcused = self.unexcused(check, failures)
        if expect is not None and check in expect.checks and not unexcused:
            raise ExpectedStageFailure(f"[run] {check}: {message}\n(expected: {expect.reason})")
        hint = ""
        if expect is not None and check in expect.checks:
            hint = (f"\nexpected instead: /{expect.match}/ ({expect.reason}); it does not excuse: "
                    + " | ".join(f"{f.splitlines()[0]} ({why})" for f, why in unexcused))
        raise CaseFailure(
            f"case {self.case.id}: stage 'run', {what}\n{message}\nartifacts: {self.artifacts}{hint}")

    def _require(self, value, failure: StageFailure | None):
        if failure is not None:
            self.fail(failure)
        assert value is not None
        return value

    def require_export(self) -> ExportResult:
        """The export result, or raise for the stage that failed."""
        failed = self.failure is not None and STAGES.index(self.failure.stage) < STAGES.index("run")
        return self._require(self.result, self.failure if failed else None)

    def require_numerics(self) -> Numerics:
        """The numerics, or raise for the stage that failed."""
        self.require_export()
        return self._require(self.numerics, self.failure)

    def require_golden(self) -> dict:
        """The golden, or raise for the stage that failed before it, or for the
        harness failing to build it."""
        self.require_export()
        return self._require(self.golden, self.golden_failure)

    def summary(self) -> dict:
        """What the report records of this case (JSON-native)."""
        delegates, cpu_ops = [], []
        if self.result is not None:
            delegates = [{"backend": d.backend, "ops": d.ops} for d in self.result.report.delegates]
            cpu_ops = list(self.result.report.cpu_ops)
        return {
            "id": self.case.id,
            "family": self.case.family,
            "flow": self.case.flow,
            "quick": self.case.quick,
            "stage": self.stage,
            "error": self.failure.describe() if self.failure else None,
            "origin": self.failure.origin if self.failure else None,
            "delegates": delegates,
            "cpu_ops": cpu_ops,
            "numerics": self.numerics.to_dict() if self.numerics else None,
            "tolerances": [self.case.get_tolerance(i).to_dict() | {"sources": self.case.get_tolerance(i).sources}
                           for i in range(len(self.case.output_qspecs))],
            "stays_on_cpu": self.case.stays_on_cpu,
            "warnings": self.warnings,
            # Run-specific (where the files went, how long it took): the rest
            # of a case's record is the same from one run to the next.
            "run": {
                "artifacts": str(self.artifacts),
                "seconds": {k: round(v, 3) for k, v in sorted(self.seconds.items())},
                "vulkan_batch": self.vulkan_batch,
            },
        }


_PATH = re.compile(r"/[^\s'\"()<>:]+/")


def _origin(filename: str) -> str:
    """A warning's file without the machine's part: inside site-packages or the stdlib."""
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in filename:
            return filename.rpartition(marker)[2]
    return Path(filename).name


def _distinct_warnings(caught) -> list[str]:
    """Warnings, deduplicated by category, first message line and origin;
    paths in messages are cut to their file name (no machine paths, and
    temporary directories do not split one warning into many)."""
    seen = set()
    for w in caught:
        lines = str(w.message).strip().splitlines()
        message = _PATH.sub("", lines[0][:200]) if lines else ""
        seen.add(f"{w.category.__name__}: {message} ({_origin(str(w.filename))}:{w.lineno})")
    return sorted(seen)


#: Seconds a case's run (export, numerics, golden) may take before the
#: watchdog fails it as hung (the longest case, IFNet, takes about 12 s; the
#: native tools in it have their own, shorter timeouts). ``--vgf-case-timeout``.
CASE_TIMEOUT = 600.0


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
    stack: :func:`vgf_conformance.harness.execution.runner.on_a_fresh_stack`.)"""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class CaseTimeout(Exception):
    """The function given to :func:`on_a_fresh_stack` did not return in time."""

    def __init__(self, thread: threading.Thread, seconds: float) -> None:
        super().__init__(f"did not finish within {seconds:g} s")
        self.thread, self.seconds = thread, seconds


def on_a_fresh_stack(fn, *args, timeout: float | None = None, **kwargs):
    """``fn(*args, **kwargs)`` in a new thread, waited for: it starts at the top
    of a stack, as in a bare script.

    A test runs some 60 frames deep (pytest, pluggy, xdist, the fixture), and
    an export there is measurably slower than the same export in a bare script
    (4 exports, one process, same garbage-collector settings, alternated: 3.80 s
    80 frames deep, 3.33 s at the top, 3.35 s in a fresh thread started 80
    frames deep); the cost is spread thinly over torch.export and ExecuTorch
    (no one function holds it), so the harness avoids the depth instead.
    Nothing else changes: context variables are carried over, torch's
    thread-local modes are the defaults a bare script starts with, exceptions
    are re-raised here, and only one thread runs at a time.

    It is also the watchdog: after ``timeout`` seconds, :class:`CaseTimeout`
    (the thread is left behind as a daemon: Python cannot stop it)."""
    context, outcome = contextvars.copy_context(), {}

    def target() -> None:
        try:
            outcome["value"] = context.run(fn, *args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name=f"vgf-{getattr(fn, '__name__', 'call')}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise CaseTimeout(thread, timeout)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_case(case: Case, artifacts_root: Path, disable_workarounds=(),
             timeout: float | None = CASE_TIMEOUT, around_export=None) -> CaseRun:
    """Export ``case`` once, run its lowered program on the oracles, build its
    golden (on a fresh stack: :func:`on_a_fresh_stack`). A run that takes more
    than ``timeout`` seconds fails as hung (``hung``), naming the stage it hung
    in and where (the hung thread's stack); the thread is left running, for
    the caller to stop (:mod:`vgf_conformance.harness.execution.hangs`).
    ``around_export(run key)``: a context the export runs in (stack coverage)."""
    phase = {"now": "export"}
    try:
        return on_a_fresh_stack(_run_case, case, artifacts_root, disable_workarounds, phase, around_export,
                                timeout=timeout)
    except CaseTimeout as hang:
        from vgf_export.stages import current_stage

        stage = current_stage(hang.thread.ident) or phase["now"]
        frame = sys._current_frames().get(hang.thread.ident)
        where = "".join(traceback.format_stack(frame)[-12:]) if frame is not None else "(no stack)\n"
        return hung_run(case, artifacts_root, stage,
                        f"the case hung: stage '{stage}' had not finished after {hang.seconds:g} s "
                        f"(--vgf-case-timeout); where it was:\n{where}")


def hung_run(case: Case, artifacts_root: Path, stage: str, message: str) -> CaseRun:
    """The run of a case that hung in ``stage``."""
    run = CaseRun(case=case, artifacts=artifacts_root / case.id, stage=stage, hung=True)
    run.failure = StageFailure(stage, "Timeout", tail(message), TOOLCHAIN)
    return run


def _run_case(case: Case, artifacts_root: Path, disable_workarounds=(), phase: dict | None = None,
              around_export=None) -> CaseRun:
    phase = {} if phase is None else phase
    run = CaseRun(case=case, artifacts=artifacts_root / case.id, stage="export")
    timer = _Timer(run.seconds)
    with timer("export_total"), (around_export(case.id) if around_export else contextlib.nullcontext()):
        _export(run, disable_workarounds)
    if run.result is None:
        return run
    run.seconds.update(run.result.stage_seconds)
    run.stage = phase["now"] = "run"
    with timer("numerics"):
        try:
            run.numerics = measure(case, run.result, run.model, run.inputs)
        except LoweredRunError as error:  # a reference backend rejected a delegate
            run.failure = StageFailure.of("run", error, TOOLCHAIN)
        except Exception as error:  # noqa: BLE001 - a bug of the oracles
            run.failure = StageFailure.of("run", error, HARNESS)
    with timer("golden"):
        numerics = run.numerics.to_dict() if run.numerics else {"error": run.failure.describe()}
        try:
            run.golden = build_golden(case, run.result, numerics, run.model)
        except Exception as error:  # noqa: BLE001 - the harness broke, on this case alone
            run.golden_failure = StageFailure.of("serialize", error, HARNESS)
    return run


def _export(run: CaseRun, disable_workarounds) -> None:
    case = run.case
    try:
        run.model, run.inputs, kwargs = case.model(), case.make_inputs(), case.export_kwargs()
    except Exception as error:  # noqa: BLE001 - the case cannot even be built
        run.failure = StageFailure.of("export", error, CASE)
        return
    kwargs["disable_workarounds"] = (*kwargs.get("disable_workarounds", ()), *disable_workarounds)
    speed_patches.enable()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run.result = export_model(run.model, run.inputs, artifacts_root=run.artifacts, **kwargs)
        run.warnings = _distinct_warnings(caught)
    except ExportStageError as error:
        run.stage = error.stage
        run.failure = StageFailure(error.stage, type(error.cause).__name__, tail(_with_causes(error.cause)))
    except (ValueError, TypeError, FileExistsError) as error:  # export_model refused the arguments
        run.failure = StageFailure.of("export", error, CASE)
    except Exception as error:  # noqa: BLE001 - outside the flow's stages: our wrapper broke
        run.failure = StageFailure.of("export", error, HARNESS)


def _with_causes(error: BaseException) -> str:
    """The error's message and those of the errors it wraps (ExecuTorch's pass
    manager wraps the real error of a pass in "An error occurred when running
    ... pass"): the root cause is what a failure and an Expectation name."""
    lines, seen = [str(error)], {id(error)}
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        lines.append(f"caused by {type(cause).__name__}: {cause}")
        cause = cause.__cause__ or cause.__context__
    return "\n".join(lines)


class _Timer:
    """``with timer(key):`` adds the block's wall seconds to ``seconds[key]``."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds

    @contextlib.contextmanager
    def __call__(self, key: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start
