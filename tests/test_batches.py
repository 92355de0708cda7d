"""Batches: grouping and order of the suite's tests, and the shared Vulkan runs
with their fallbacks (a batch that fails, a case whose batched result is not
accepted)."""

from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vgf_conformance.harness.execution import batches
from vgf_conformance.harness.schedule.plan import order_items, plan_batches, shard_members
from vgf_conformance.oracles.vulkan import VulkanCheck, VulkanRunError
from tests.helpers import collected_suite

REPO = Path(__file__).resolve().parent.parent


def test_plan_deals_cases_per_tier_and_shard():
    ids = [f"c{i:02d}" for i in range(10)]
    quick = {"c01", "c04", "c07"}
    plan = plan_batches(ids, quick, size=3)
    assert [c for c in ids if plan[c] == "quick-batch01"] == ["c01", "c04", "c07"]
    # Equal weights (no durations): dealt over ceil(7/3) = 3 batches in id order.
    assert [c for c in ids if plan[c] == "full-batch01"] == ["c00", "c05", "c09"]
    assert [c for c in ids if plan[c] == "full-batch03"] == ["c03", "c08"]
    sharded = plan_batches(ids, quick, size=3, shard=(2, 2))
    members = shard_members(ids, (2, 2), quick)
    assert members == ["c00", "c03", "c04", "c06", "c09"]
    assert [c for c in ids if sharded[c] == "quick-batch01"] == ["c04"]
    assert sorted(c for c in ids if sharded[c].startswith("full-batch")) == ["c00", "c03", "c06", "c09"]
    assert sharded["c01"] == "c01"  # another shard's case: its own group
    # Two workers: as many batches for each (ceil(7/3) = 3, rounded up to 4).
    assert len({plan for plan in plan_batches(ids, quick, size=3, workers=2).values()
                if plan.startswith("full")}) == 4
    assert plan_batches(ids, quick, size=1) == {c: c for c in ids}
    with pytest.raises(ValueError, match="--vgf-vulkan-batch must be at least 1, got 0"):
        plan_batches(ids, quick, size=0)


def _item(name, case=None):
    callspec = SimpleNamespace(params={"case_run": case}) if case else None
    return SimpleNamespace(originalname=name, callspec=callspec, name=f"{name}[{case}]",
                           nodeid=f"test_cases.py::{name}[{case}]")


def test_order_puts_each_batch_together_with_its_vulkan_tests_last():
    plan = {"a": "b1", "b": "b1", "c": "b2"}
    items = [_item("test_setup")]
    for case in "abc":
        items += [_item("test_export", case), _item("test_vulkan", case), _item("test_golden", case)]
    items.append(_item("test_ledger"))
    order = [item.name for item in order_items(items, plan)]
    assert order == [
        "test_setup[None]",
        "test_export[a]", "test_golden[a]", "test_export[b]", "test_golden[b]",
        "test_vulkan[a]", "test_vulkan[b]",
        "test_export[c]", "test_golden[c]", "test_vulkan[c]",
        "test_ledger[None]",
    ]


def test_collected_suite_runs_each_batch_vulkan_last(pytester):
    nodeids = collected_suite(pytester, "-m", "quick", "--vgf-vulkan-batch", "5")
    from vgf_conformance.cases import CASES

    quick = sorted(c for c, case in CASES.items() if case.quick)
    assert {n[n.index("[") + 1:n.rindex("]")] for n in nodeids} == set(quick)
    from vgf_conformance.harness.schedule import durations

    plan = plan_batches(CASES, set(quick), 5, seconds=durations.load(None).restricted(CASES))
    positions = defaultdict(list)
    for index, nodeid in enumerate(nodeids):
        case = nodeid[nodeid.index("[") + 1:nodeid.rindex("]")]
        positions[plan[case]].append((index, "::test_vulkan[" in nodeid))
    assert len(positions) == -(-len(quick) // 5)
    spans = sorted((min(i for i, _ in p), max(i for i, _ in p)) for p in positions.values())
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), "batches interleave"
    for batch, entries in positions.items():
        kinds = [vk for _, vk in sorted(entries)]
        assert kinds == sorted(kinds), f"{batch}: a Vulkan test runs before another test of its batch"


class FakeStack:
    """Stands in for the export and the Vulkan runs, recording what ran."""

    def __init__(self, monkeypatch, batch_fails=False, accept=True):
        self.exports, self.batch_runs, self.alone_runs = [], [], []
        self.batch_fails = batch_fails
        self.nondeterministic = False
        plan = {"a": "b1", "b": "b1", "nothing": "b1", "c": "b2"}
        items = [_item("test_vulkan", c) for c in ("a", "b", "nothing", "c")]
        monkeypatch.setattr(batches, "run_case", self.run_case)
        monkeypatch.setattr(batches, "prepare_case", lambda numerics, result, workdir: SimpleNamespace(
            scenario=workdir / "scenario.json"))
        monkeypatch.setattr(batches, "run_scenarios", self.run_scenarios)
        monkeypatch.setattr(batches, "run_scenario", self.run_scenario)
        monkeypatch.setattr(batches, "check_case", self.check_case)
        self.store = batches.Batches({c: c for c in plan}, plan, items, Path("/art"))

    def run_case(self, case, root, timeout=None, around_export=None):
        self.exports.append(case)
        calls = [] if case == "nothing" else ["delegate"]
        return SimpleNamespace(failure=None, artifacts=root / case, result=case, hung=False,
                               numerics=SimpleNamespace(program=SimpleNamespace(calls=calls)))

    def run_scenarios(self, scenarios, target):
        names = [s.parent.parent.name for s in scenarios]
        self.batch_runs.append(names)
        if self.batch_fails:
            return {s: (VulkanRunError(f"{s.parent.parent.name} crashed") if s.parent.parent.name == "b" else 0.5)
                    for s in scenarios}, False
        return {s: 0.25 for s in scenarios}, len(scenarios) > 1

    def run_scenario(self, scenario):
        self.alone_runs.append(scenario.parent.parent.name)
        return 0.5

    def check_case(self, builder, seconds, batch=1):
        # What the runner wrote: the same for a batch and a run alone, unless
        # the fake runtime is told to be nondeterministic.
        value = batch if self.nondeterministic else 0
        return VulkanCheck(builder.scenario, seconds, [], {"v_out": np.array([value])}, batch)


def test_a_batch_shares_one_runner_and_exports_each_case_once(monkeypatch):
    fake = FakeStack(monkeypatch)
    for case in ("a", "b"):
        fake.store.run(case)
    check_a = fake.store.vulkan_check("a", accept=lambda c: True)
    check_b = fake.store.vulkan_check("b", accept=lambda c: True)
    assert fake.batch_runs == [["a", "b"]]  # "nothing" has no delegate: not in the batch
    assert (check_a.batch, check_b.batch, check_a.seconds) == (2, 2, 0.25)
    assert fake.exports == ["a", "b", "nothing"] and fake.alone_runs == []
    fake.store.vulkan_check("c", accept=lambda c: True)  # next batch: b1's runs are released
    assert set(fake.store.runs) == {"c"} and fake.exports[-1] == "c"


def test_a_batched_result_that_is_not_accepted_is_rerun_alone(monkeypatch):
    fake = FakeStack(monkeypatch)
    check = fake.store.vulkan_check("a", accept=lambda c: c.batch == 1)
    assert fake.alone_runs == ["a"] and check.batch == 1 and check.seconds == 0.5


def test_a_batched_result_that_a_run_alone_contradicts_is_a_failure(monkeypatch):
    fake = FakeStack(monkeypatch)
    fake.nondeterministic = True
    with pytest.raises(VulkanRunError, match="wrote different outputs.*not deterministic"):
        fake.store.vulkan_check("a", accept=lambda c: c.batch == 1)
    assert fake.alone_runs == ["a"]


def test_a_failed_batch_fails_only_the_bad_case_without_running_it_again(monkeypatch):
    fake = FakeStack(monkeypatch, batch_fails=True)
    assert fake.store.vulkan_check("a", accept=lambda c: False).batch == 1
    with pytest.raises(VulkanRunError, match="b crashed"):
        fake.store.vulkan_check("b", accept=lambda c: True)
    assert fake.alone_runs == []  # the errors and results came from runs alone already
