"""One run's state, kept once on pytest's config: :class:`Session`.

The cases of the run (the built-in table or a team's case files, narrowed
by ``--vgf-case``), their recorded durations, the shard and the batch plan;
and what the hooks do with them: select a shard's tests, mark expected
failures, parametrize the case tests. The plugin's hooks only call these.
"""

from __future__ import annotations

import pytest

from vgf_conformance.harness.schedule import durations, plan

from vgf_conformance.harness.plugin import options

SESSION_KEY = pytest.StashKey["Session"]()


class Session:
    """Computed when first asked for, identically on every xdist worker."""

    def __init__(self, config) -> None:
        self.config = config
        self._table: dict | None = None
        self._whole: dict = {}
        self._durations: durations.Durations | None = None
        self._plan: dict[str, str] | None = None
        self.parametrized = False  # the case tests were parametrized over the table

    @classmethod
    def of(cls, config) -> "Session":
        if SESSION_KEY not in config.stash:
            config.stash[SESSION_KEY] = cls(config)
        return config.stash[SESSION_KEY]

    def cases(self, whole: bool = False) -> dict:
        """The runs of this run (run key -> Case): the built-in table, or the
        families of the ``--vgf-cases`` files, in the ``--vgf-flow`` flows,
        restricted to ``--vgf-case`` keys (``whole``: every run of every flow,
        unrestricted: what the golden directory may hold). Loaded once, when a
        run collects."""
        if self._table is None:
            from vgf_conformance.cases import TABLE, build_table, flows, load_case_file

            files = self.config.getoption("--vgf-cases")
            try:
                table = build_table([f for path in files for f in load_case_file(path)]) if files else TABLE
                chosen = flows.check_flows(options.flows(self.config)) or flows.GATING_FLOWS
            except ValueError as error:
                raise pytest.UsageError(str(error)) from None
            self._table = flows.expand(table, chosen)
            self._whole = flows.expand(table, flows.FLOWS)
        if whole:
            return self._whole
        only = self.config.getoption("--vgf-case")
        if not only:
            return self._table
        unknown = [case_id for case_id in only if case_id not in self._table]
        if unknown:
            elsewhere = " (a run of a flow this run does not lower: add --vgf-flow)" \
                if unknown[0] in self._whole else ""
            raise pytest.UsageError(f"--vgf-case: no case {unknown[0]!r} in the table{elsewhere} "
                                    f"(python -m vgf_conformance lists the case ids)")
        return {case_id: case for case_id, case in self._table.items() if case_id in only}

    @property
    def durations(self) -> durations.Durations:
        """Seconds per case (and per test that is not per case) of --vgf-durations."""
        if self._durations is None:
            self._durations = durations.load(self.config.getoption("--vgf-durations")).restricted(self.cases())
        return self._durations

    @property
    def quick(self) -> set[str]:
        return {c for c, case in self.cases().items() if case.quick}

    @property
    def workers(self) -> int:
        """The xdist workers sharing this run (1 without xdist)."""
        return int(getattr(self.config, "workerinput", {}).get("workercount", 1))

    @property
    def plan(self) -> dict[str, str]:
        """Case id -> batch (vgf_conformance/harness/schedule/plan.py)."""
        if self._plan is None:
            self._plan = plan.plan_batches(self.cases(), self.quick, self.config.getoption("--vgf-vulkan-batch"),
                                           options.shard(self.config), self.durations, self.workers)
        return self._plan

    def select(self, items) -> None:
        """Narrow ``items`` in place to this run's: only case tests with
        ``--vgf-case``, this shard's with ``--vgf-shard``; mark the expected
        failures; order them by batch (longest first)."""
        deselect = self.config.hook.pytest_deselected
        if self.config.getoption("--vgf-case"):  # exactly these cases: the run's other tests go
            others = [item for item in items if plan.item_case(item) is None]
            if others:
                deselect(items=others)
                items[:] = [item for item in items if plan.item_case(item) is not None]
        shard = options.shard(self.config)
        # A run without the suite's case tests (a team's other tests, a nested
        # stand-in suite) never loads the case table: its import is torch's.
        has_cases = any(plan.item_case(item) is not None for item in items)
        seconds = self.durations if items and (has_cases or shard is not None) else None
        if shard is not None:
            assignment, loads = plan.shard_assignment(self.cases(), shard[1], self.quick, seconds)
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
                deselect(items=drop)
                items[:] = keep
        if has_cases:
            skip_outside_flow(items, self.cases())
            mark_expected_failures(items, self.cases())
            items[:] = plan.order_items(items, self.plan, seconds)

    def case_params(self) -> list:
        self.parametrized = True  # the table's cases are this run's: its goldens are checked against it
        return case_params(self.cases(), self.plan)


def session_cases(config, whole: bool = False) -> dict:
    """The run's cases (:meth:`Session.cases`)."""
    return Session.of(config).cases(whole)


def skip_outside_flow(items, cases: dict) -> None:
    """A skip on each test of a run whose flow does not apply that check
    (declared in the skip ledger: ``not-in-flow``), saying why."""
    from vgf_conformance.cases.flows import FLOWS

    for item in items:
        case = cases.get(plan.item_case(item))
        flow = FLOWS.get(case.flow) if case is not None else None
        if flow is not None and not flow.applies_to(item.originalname):
            item.add_marker(pytest.mark.skip(reason=f"{case.id}: does not apply in the {flow.name} flow: "
                                                    f"{flow.why_not}"))


def mark_expected_failures(items, cases: dict) -> None:
    """A strict xfail on each test of a case that its Expectation covers: every
    test for a stage failure, one comparison's test for a numerics divergence."""
    from vgf_conformance.harness.execution.runner import ExpectedStageFailure

    for item in items:
        case_id = plan.item_case(item)
        expect = cases[case_id].expect if case_id in cases else None
        if expect is not None and expect.applies_to(item.originalname):
            where = "/".join((expect.stage, *expect.checks))
            reason = f"[{where}] {expect.reason}"
            item.add_marker(pytest.mark.xfail(raises=ExpectedStageFailure, strict=True, reason=reason))


def case_params(cases: dict, batch_of: dict[str, str]) -> list:
    """``pytest.param`` per case, carrying its marks: its batch's
    ``xdist_group`` and ``quick`` for the pull-request tier."""
    params = []
    for case_id, case in cases.items():
        marks = [pytest.mark.xdist_group(batch_of.get(case_id, case_id))]
        if case.quick:
            marks.append(pytest.mark.quick)
        params.append(pytest.param(case_id, marks=marks, id=case_id))
    return params
