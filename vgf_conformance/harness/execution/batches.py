"""Batches: how the suite's cases are grouped on workers and share Vulkan runs.

A scenario-runner process spends most of a small case's time compiling the
emulation layer's shaders (about 0.4 s of 0.6 s), once per process. So the
cases are dealt into batches of at most ``--vgf-vulkan-batch`` (default
:data:`vgf_conformance.harness.schedule.plan.DEFAULT_SIZE`) cases, the quick tier and the rest separately (``-m
quick`` then makes full batches), within the shard of ``--vgf-shard``
(:func:`vgf_conformance.harness.schedule.plan.shard_members`: balanced by the seconds of
vgf_conformance/durations.json). The number of batches of a tier is a multiple
of the number of xdist workers and the cases are dealt over them by their
seconds, so the batches take about the same time. A batch:

- is one xdist group: all tests of its cases run on one worker, in the
  order :func:`vgf_conformance.harness.schedule.plan.order_items` gives: every case's export, golden and numerics
  tests first, then the batch's ``test_vulkan`` tests; the longest batches
  (and tests that are not per case) first;
- keeps its cases' runs (:class:`Batches`), so a case is still exported once
  although its Vulkan test comes after the other cases' tests;
- runs its cases' scenarios in one runner process when the first of its
  Vulkan tests asks (:func:`vgf_conformance.oracles.vulkan.run_scenarios`: a batch that
  fails is rerun case by case). A case whose batched outputs do not pass is
  rerun alone before it fails, so a failure always comes from the case's own
  scenario, the one its rerun command runs.

``--vgf-vulkan-batch 1`` gives every case its own group and runner process.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from vgf_conformance.harness.schedule.plan import VULKAN_TEST, item_case
from vgf_conformance.harness.execution.hangs import Notes
from vgf_conformance.harness.execution.runner import CaseRun, CaseTimeout, hung_run, on_a_fresh_stack, run_case
from vgf_conformance.oracles.vulkan import (
    ScenarioBuilder,
    VulkanCheck,
    VulkanRunError,
    check_case,
    rerun_command,
    prepare_case,
    run_scenario,
    run_scenarios,
)

@dataclasses.dataclass
class _Outcome:
    value: VulkanCheck | Exception
    alone: bool  # from the case's own scenario alone (no point in running it again)


class Batches:
    """One per process: the runs of the current batch and their Vulkan results."""

    def __init__(self, cases: dict, plan: dict[str, str], items: list, artifacts_root: Path,
                 case_timeout: float | None = None, hangs: Notes | None = None, stack_coverage=None) -> None:
        self.cases = cases  # case id -> Case
        self.plan = plan
        self.artifacts_root = artifacts_root
        self.case_timeout = case_timeout  # the watchdog of each case's run (seconds; None: none)
        self.hangs = hangs or Notes(None)  # how a hung case stops its worker (vgf_conformance/harness/execution/hangs.py)
        #: ``--vgf-stack-coverage``'s recorder (harness/measurements/stack_coverage.py), or None.
        self.stack_coverage = stack_coverage
        #: batch -> its cases that have a Vulkan test in this session, in order.
        self.vulkan_members: dict[str, list[str]] = {}
        for item in items:
            case_id = item_case(item)
            if case_id is not None and item.originalname == VULKAN_TEST:
                members = self.vulkan_members.setdefault(plan[case_id], [])
                if case_id not in members:
                    members.append(case_id)
        self.runs: dict[str, CaseRun] = {}
        self.builders: dict[str, ScenarioBuilder] = {}
        self.vulkan: dict[str, _Outcome] = {}

    def run(self, case_id: str) -> CaseRun:
        """The case's run: exported on first use, kept until another batch starts."""
        batch = self.plan[case_id]
        for other in [c for c in self.runs if self.plan[c] != batch]:
            del self.runs[other]
            self.builders.pop(other, None)
            self.vulkan.pop(other, None)
        if case_id not in self.runs:
            self.runs[case_id] = self._run_case(case_id, self.cases[case_id])
        return self.runs[case_id]

    def _run_case(self, case_id: str, case) -> CaseRun:
        hung = self.hangs.read(case_id)
        if hung is not None:  # an earlier test of the case hung, and its worker ended
            stage, message = hung
            return hung_run(case, self.artifacts_root, stage or "export",  # not known: the first stage
                            f"{message}\n(an earlier test of this case hung; its worker was ended, and the case "
                            "is not run again)")
        with self.hangs.deadline(case_id, self.case_timeout):
            run = run_case(case, self.artifacts_root, timeout=self.case_timeout,
                           around_export=self.stack_coverage.context if self.stack_coverage else None)
        if run.hung:  # the hung thread cannot be stopped: end this worker with it
            self.hangs.stop(case_id, run.failure.stage, run.failure.message)
        run.guard = lambda stage, fn, *args: self.guarded(case_id, stage, fn, *args)
        return run

    def guarded(self, case_id: str, stage: str, fn, *args):
        """``fn(*args)`` (work for the case after its run, e.g. a re-export to
        localize a failure) under the case's watchdog and hard deadline: if
        it hangs, this worker ends as for a hung run, or, without xdist,
        :class:`CaseTimeout` is raised."""
        with self.hangs.deadline(case_id, self.case_timeout):
            try:
                return on_a_fresh_stack(fn, *args, timeout=self.case_timeout)
            except CaseTimeout as hang:
                self.hangs.stop(case_id, stage, f"the case's {stage} hung: it had not finished after "
                                f"{hang.seconds:g} s (--vgf-case-timeout)")
                raise

    def vulkan_check(self, case_id: str, accept: Callable[[VulkanCheck], bool]) -> VulkanCheck:
        """The case on Vulkan: from its batch's shared runner process, or, when
        that result is not accepted (or the batch's run of it failed), from its
        scenario alone. Raises :class:`VulkanRunError` (or the error of
        building its scenario)."""
        if case_id not in self.vulkan:
            self._run_batch(case_id)
        outcome = self.vulkan[case_id]
        if isinstance(outcome.value, VulkanCheck) and (outcome.alone or accept(outcome.value)):
            return outcome.value
        if outcome.alone:
            raise outcome.value
        builder = self.builders[case_id]
        alone = check_case(builder, run_scenario(builder.scenario))
        if isinstance(outcome.value, VulkanCheck) and not alone.same_outputs(outcome.value):
            # The runtime gave this case two different answers: nondeterminism.
            raise VulkanRunError(
                f"{case_id}: the batched run ({outcome.value.batch} cases in one runner) and the "
                "run alone wrote different outputs (the runtime is not deterministic):\n"
                f"  batched: {outcome.value.problems(0.0) or 'bit-exact'}\n"
                f"  alone:   {alone.problems(0.0) or 'bit-exact'}\n"
                f"rerun: {rerun_command(builder.scenario)}")
        return alone

    def _run_batch(self, case_id: str) -> None:
        batch = self.plan[case_id]
        members = [c for c in self.vulkan_members.get(batch, []) if c not in self.vulkan]
        if case_id not in members:
            members.insert(0, case_id)
        for member in members:
            run = self.run(member)
            if member != case_id and (run.failure is not None or not run.numerics.program.calls):
                continue  # its own test fails or skips, and says why
            try:
                self.builders[member] = prepare_case(run.numerics, run.result, run.artifacts / "vulkan")
            except Exception as error:  # noqa: BLE001 - raised by the case's own test
                self.vulkan[member] = _Outcome(error, alone=True)
        ready = [m for m in members if m in self.builders and m not in self.vulkan]
        scenarios = [self.builders[m].scenario for m in ready]
        results, together = run_scenarios(scenarios, self.artifacts_root / "_vulkan_batches" / f"{batch}.json")
        shared = len(ready) if together else 1
        for member, scenario in zip(ready, scenarios):
            result, run = results[scenario], self.runs[member]
            if isinstance(result, VulkanRunError):
                self.vulkan[member] = _Outcome(result, alone=True)
                continue
            try:
                check = check_case(self.builders[member], result, batch=shared)
            except VulkanRunError as error:
                self.vulkan[member] = _Outcome(error, alone=shared == 1)
            else:
                self.vulkan[member] = _Outcome(check, alone=shared == 1)
