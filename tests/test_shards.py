"""Shards and batches balanced by the durations file, and its command."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vgf_conformance.harness.plugin import options
from vgf_conformance.harness.schedule import durations
from vgf_conformance.harness.schedule.plan import order_items, plan_batches, shard_assignment, shard_members

REPO = Path(__file__).resolve().parent.parent


def test_balance_is_longest_processing_time_and_deterministic():
    weights = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 2.0, "f": 1.0}
    assignment, loads = durations.balance(weights, 2)
    assert loads == [9.0, 9.0]
    assert assignment == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 1, "f": 0}
    # On top of given loads: the next unit goes to the least loaded bin.
    assert durations.balance({"x": 1.0}, 2, [3.0, 2.0])[0] == {"x": 1}


def test_missing_units_count_as_the_median_of_the_runs_known_ones():
    seconds = durations.Durations({"a": 1.0, "b": 3.0, "c": 10.0, "other-table": 100.0})
    assert seconds("nope") == 6.5  # over the whole file
    restricted = seconds.restricted(["a", "b", "c", "nope"])
    assert restricted("nope") == 3.0 and restricted("other-table") == 100.0
    assert durations.Durations()("anything") == 1.0  # nothing known: all equal


def _table(n_quick=10, n_full=60):
    """Case id -> seconds: quick cases and long grid cases among short resizes."""
    seconds = {}
    for i in range(n_quick):
        seconds[f"q{i:02d}"] = 1.0 + (i % 3)
    for i in range(n_full):
        seconds[f"f{i:02d}"] = 6.0 if i % 4 == 0 else 1.0 + (i % 5) * 0.3
    return seconds, {c for c in seconds if c.startswith("q")}


def _spread(loads):
    return (max(loads) - min(loads)) / max(loads)


@pytest.mark.parametrize("count", [2, 4])
def test_long_tests_that_are_not_per_case_are_dealt_with_the_cases_not_on_top(count):
    """The ledger's tests (60 s, 40 s: longer than any case) are dealt
    together with the cases, longest first: dealt on top of shards already
    even, 4 full-matrix shards were 18 % apart (scripts/benchmark.py
    --shards-of full)."""
    cases, quick = _table()
    others = {"vgf_conformance/test_workarounds.py::test_slow": 60.0, "vgf_conformance/test_workarounds.py::test_b": 40.0}
    known = durations.Durations({**cases, **others})
    assignment, loads = shard_assignment(cases, count, quick, known)
    assert set(others) <= set(assignment) and _spread(loads) < 0.10, loads
    assert shard_members(cases, (1, count), quick, known) == sorted(
        c for c in cases if assignment[c] == 0)  # the plan's membership: cases only, the same split
    # The fault it exists for: the cases balanced alone, those tests on top.
    alone, case_loads = shard_assignment(cases, count, quick, cases.get)
    assert _spread(durations.balance(others, count, case_loads)[1]) > 0.10


@pytest.mark.parametrize("count", [2, 4])
def test_shards_by_seconds_are_within_ten_percent_where_round_robin_is_not(count):
    seconds, quick = _table()
    balanced = [sum(seconds[c] for c in shard_members(seconds, (i, count), quick, seconds.get))
                for i in range(1, count + 1)]
    round_robin = [sum(seconds[c] for c in shard_members(seconds, (i, count), quick))
                   for i in range(1, count + 1)]
    assert _spread(balanced) < 0.10, balanced
    assert _spread(round_robin) > 0.10, round_robin  # the fault the balance exists for
    # The quick tier alone (-m quick) is balanced too: it is dealt first.
    quick_loads = [sum(seconds[c] for c in shard_members(seconds, (i, count), quick, seconds.get)
                       if c in quick) for i in range(1, count + 1)]
    assert max(quick_loads) - min(quick_loads) <= max(seconds[c] for c in quick)


def test_shards_cover_the_table_once():
    seconds, quick = _table()
    shards = [shard_members(seconds, (i, 3), quick, seconds.get) for i in (1, 2, 3)]
    assert sorted(c for s in shards for c in s) == sorted(seconds)
    assert shard_members(seconds, None) == sorted(seconds)


def test_the_repository_durations_balance_the_built_in_table():
    """The durations file kept in the repository: predicted shard seconds of
    the current table within 10 % for 2 and 4 shards."""
    from vgf_conformance.cases import CASES

    seconds = durations.load(None).restricted(CASES)
    assert len(seconds.seconds) > len(CASES) // 2, "vgf_conformance/durations.json misses most cases: refresh it"
    quick = {c for c, case in CASES.items() if case.quick}
    for count in (2, 4):
        _, loads = shard_assignment(CASES, count, quick, seconds)
        assert _spread(loads) < 0.10, (count, loads)


def test_batches_are_a_multiple_of_the_workers_and_about_equal():
    seconds, quick = _table()
    plan = plan_batches(seconds, quick, size=8, seconds=seconds.get, workers=2)
    full = {}
    for case, batch in plan.items():
        full.setdefault(batch, []).append(case)
    quick_batches = [b for b in full if b.startswith("quick")]
    full_batches = [b for b in full if b.startswith("full")]
    assert len(quick_batches) == 2 and len(full_batches) == 8  # ceil(10/8)=2, ceil(60/8)=8
    assert all(len(members) <= 8 for members in full.values())
    loads = [sum(seconds[c] for c in full[b]) for b in full_batches]
    assert max(loads) - min(loads) <= 6.0  # within the longest case
    # A shard's batches hold only its cases; the other cases keep their own group.
    sharded = plan_batches(seconds, quick, size=8, shard=(2, 2), seconds=seconds.get, workers=2)
    members = set(shard_members(seconds, (2, 2), quick, seconds.get))
    assert all((sharded[c] == c) == (c not in members) for c in seconds)


def _item(name, case=None, nodeid=None):
    from types import SimpleNamespace

    callspec = SimpleNamespace(params={"case_run": case}) if case else None
    return SimpleNamespace(originalname=name, callspec=callspec, name=f"{name}[{case}]",
                           nodeid=nodeid or f"vgf_conformance/test_cases.py::{name}[{case}]")


def test_order_puts_the_longest_work_first():
    plan = {"a": "b1", "b": "b2", "c": "b2"}
    seconds = {"a": 5.0, "b": 1.0, "c": 1.0, "vgf_conformance/test_x.py::test_long": 9.0}.get
    items = [_item("test_export", c) for c in "abc"] + [_item("test_vulkan", c) for c in "abc"]
    items.append(_item("test_long", nodeid="vgf_conformance/test_x.py::test_long"))
    order = [item.name for item in order_items(items, plan, seconds)]
    assert order == ["test_long[None]", "test_export[a]", "test_vulkan[a]",
                     "test_export[b]", "test_export[c]", "test_vulkan[b]", "test_vulkan[c]"]


def _report(tmp_path, name, cases, other=None):
    directory = tmp_path / name
    directory.mkdir()
    report = {"cases": [{"id": c, "run": {"tests_seconds": t, "seconds": s}} for c, (t, s) in cases.items()],
              "workarounds": [], "run": {"tiers": {}, "other_tests": other or {}}}
    (directory / "report.json").write_text(json.dumps(report))
    return directory


def test_update_command_counts_a_vulkan_share_and_keeps_small_changes(tmp_path):
    one = _report(tmp_path, "one", {
        "a": ({"test_export": 2.0, "test_pte": 0.5, "test_vulkan": 3.0}, {"vulkan": 0.25}),
        "b": ({"test_export": 1.0}, {}),
    }, other={"vgf_conformance/test_workarounds.py::test_w": 30.0})
    out = tmp_path / "durations.json"
    command = [sys.executable, "-m", "vgf_conformance", "durations", "update", str(one), "--out", str(out)]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(out.read_text())["seconds"]
    # a: its tests, with the Vulkan test counted as its share of the batch's runner.
    assert stored == {"a": 2.75, "b": 1.0, "vgf_conformance/test_workarounds.py::test_w": 30.0}
    two = _report(tmp_path, "two", {"a": ({"test_export": 2.9}, {}), "b": ({"test_export": 2.0}, {})})
    subprocess.run([*command[:5], str(two), "--out", str(out)], cwd=REPO, check=True, capture_output=True)
    stored = json.loads(out.read_text())["seconds"]
    assert stored["a"] == 2.75 and stored["b"] == 2.0  # a moved by 5 %: kept; b doubled: updated
    assert durations.load(out)("b") == 2.0


def test_a_bad_durations_file_is_a_usage_error(tmp_path, pytester):
    bad = tmp_path / "d.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="--vgf-durations: .* is not a durations file"):
        durations.load(bad)
    with pytest.raises(ValueError, match="--vgf-durations: no such file"):
        durations.load(tmp_path / "missing.json")
    with pytest.raises(pytest.UsageError, match="is not a durations file"):  # when the run is configured
        options.check(pytester.parseconfig("-p", "vgf_conformance", "--vgf-durations", str(bad)))


def test_the_first_case_of_a_worker_is_not_measured():
    """It also paid the worker's warm-up (first export, the .pte child's start)."""
    record = {"id": "a", "run": {"tests_seconds": {"test_export": 9.0}, "first_on_worker": True}}
    assert durations.case_seconds(record) is None
    assert durations.measured({"cases": [record]}) == {}
    record["run"]["first_on_worker"] = False
    assert durations.measured({"cases": [record]}) == {"a": 9.0}


def test_the_durations_refresh_has_hysteresis_either_way():
    """A runner on a CPU twice as slow (or fast) does not rewrite the file at
    the nightly's tolerance (1.5: 2.5x); a case that became 3x slower does,
    and so does a 3x faster one (the rule is the same either way)."""
    from vgf_conformance.harness.schedule.durations import update

    stored = {"a": 10.0, "b": 10.0, "c": 10.0, "d": 10.0}
    new = {"a": 20.0, "b": 5.0, "c": 30.0, "d": 3.0, "e": 1.0}
    assert update(stored, new, tolerance=1.5) == {"a": 10.0, "b": 10.0, "c": 30.0, "d": 3.0, "e": 1.0}
    assert update(stored, new)["b"] == 5.0  # the default 20 %: halving is beyond it
