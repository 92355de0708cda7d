"""Running one case: export it once, build everything its tests check.

:func:`run_case` never raises for a toolchain failure: it returns a
:class:`CaseRun` that records the stage reached, the failure (stage, error,
the tail of its message) and, on success, the golden sections. The tests of
the case then assert on it, so a case is exported exactly once per run.
"""

from __future__ import annotations

import dataclasses
import re
import time
import traceback
import warnings
from pathlib import Path

from conformance.cases import STAGES, Case
from conformance.goldens.store import build_golden
from conformance.oracles.lowered import LoweredRunError
from conformance.oracles.numerics import Numerics, measure
from conformance.text import tail
from vgf_export import ExportResult, ExportStageError, export_model



class ExpectedStageFailure(Exception):
    """A case failed exactly as its Expectation says (strict xfail)."""


class CaseFailure(AssertionError):
    """A case failed at a stage it was not expected to fail at."""


@dataclasses.dataclass
class StageFailure:
    stage: str
    error_type: str
    message: str

    def describe(self) -> str:
        return f"[{self.stage}] {self.error_type}: {self.message}"


@dataclasses.dataclass
class CaseRun:
    case: Case
    artifacts: Path
    stage: str  # the last stage reached (where it failed, if it failed)
    failure: StageFailure | None = None
    result: ExportResult | None = None
    numerics: Numerics | None = None
    golden: dict | None = None
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    vulkan_batch: int | None = None  # cases that shared its Vulkan runner process
    #: Warnings the stack raised during the export: "Category: message (file:line)".
    warnings: list[str] = dataclasses.field(default_factory=list)

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
            f"case {self.case.id} failed at stage '{failure.stage}'\n"
            f"{failure.describe()}\nartifacts: {self.artifacts}{hint}"
        )

    def fail_check(self, check: str, what: str, message: str) -> None:
        """Raise for a failed check of the run (a comparison, ``pte``): as
        expected (xfail) or as a real failure. ``what`` says what was checked."""
        expect = self.case.expect
        if expect is not None and check in expect.checks and re.search(expect.match, message):
            raise ExpectedStageFailure(f"[run] {check}: {message}\n(expected: {expect.reason})")
        hint = ""
        if expect is not None and check in expect.checks:
            hint = f"\nexpected instead: /{expect.match}/ ({expect.reason})"
        raise CaseFailure(
            f"case {self.case.id}: stage 'run', {what}\n{message}\nartifacts: {self.artifacts}{hint}")

    def fail_numerics(self, comparison: str, message: str) -> None:
        self.fail_check(comparison, f"the lowered program (TOSA reference) {comparison.replace('_', ' ')}",
                        message)

    def require_export(self) -> ExportResult:
        """The export result, or raise for the stage that failed."""
        if self.failure is not None and STAGES.index(self.failure.stage) < STAGES.index("run"):
            self.fail(self.failure)
        assert self.result is not None
        return self.result

    def require_numerics(self) -> Numerics:
        """The numerics, or raise for the stage that failed."""
        self.require_export()
        if self.failure is not None:
            self.fail(self.failure)
        assert self.numerics is not None
        return self.numerics

    def summary(self) -> dict:
        """What the report records of this case (JSON-native)."""
        delegates, cpu_ops = [], []
        if self.result is not None:
            delegates = [{"backend": d.backend, "ops": d.ops} for d in self.result.report.delegates]
            cpu_ops = list(self.result.report.cpu_ops)
        return {
            "id": self.case.id,
            "family": self.case.family,
            "quick": self.case.quick,
            "stage": self.stage,
            "error": self.failure.describe() if self.failure else None,
            "delegates": delegates,
            "cpu_ops": cpu_ops,
            "numerics": self.numerics.report_dict() if self.numerics else None,
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


def run_case(case: Case, artifacts_root: Path, disable_workarounds=()) -> CaseRun:
    artifacts = artifacts_root / case.id
    run = CaseRun(case=case, artifacts=artifacts, stage="export")
    start = time.perf_counter()
    try:
        inputs = case.make_inputs()
        kwargs = case.export_kwargs()
        kwargs["disable_workarounds"] = (*kwargs.get("disable_workarounds", ()), *disable_workarounds)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run.result = export_model(case.model(), inputs, artifacts_root=artifacts, **kwargs)
        run.warnings = _distinct_warnings(caught)
    except ExportStageError as error:
        run.stage = error.stage
        run.failure = StageFailure(error.stage, type(error.cause).__name__, tail(str(error.cause)))
        run.seconds["export_total"] = time.perf_counter() - start
        return run
    except Exception as error:  # a bug of the case or of the flow itself
        run.failure = StageFailure("export", type(error).__name__, tail(traceback.format_exc()))
        run.seconds["export_total"] = time.perf_counter() - start
        return run
    run.seconds.update(run.result.stage_seconds)
    run.seconds["export_total"] = time.perf_counter() - start
    run.stage = "run"
    start = time.perf_counter()
    try:
        run.numerics = measure(case, run.result)
    except LoweredRunError as error:
        run.failure = StageFailure("run", type(error).__name__, tail(str(error)))
    except Exception as error:
        run.failure = StageFailure("run", type(error).__name__, tail(traceback.format_exc()))
    run.seconds["numerics"] = time.perf_counter() - start
    start = time.perf_counter()
    numerics = run.numerics.to_dict() if run.numerics else {"error": run.failure.describe()}
    try:
        run.golden = build_golden(case, run.result, numerics)
    except Exception as error:  # the harness itself broke: say so, on this case alone
        run.failure = StageFailure("serialize", type(error).__name__, tail(traceback.format_exc()))
        run.stage = "serialize"
    run.seconds["golden"] = time.perf_counter() - start
    return run
