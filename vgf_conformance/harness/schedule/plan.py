"""The plan of a run: which cases a shard runs, how they are batched, and in
what order the tests run (see vgf_conformance/harness/execution/batches.py for what a batch
is). Light on purpose: the xdist controller imports it without torch.
"""

from __future__ import annotations

from typing import Callable

from vgf_conformance.harness.schedule import durations

DEFAULT_SIZE = 8
VULKAN_TEST = "test_vulkan"


def parse_shard(spec: str, option: str = "--vgf-shard") -> tuple[int, int]:
    """``I/N`` as (I, N), 1 <= I <= N; a ``ValueError`` naming ``option`` otherwise."""
    try:
        index, count = (int(part) for part in spec.split("/"))
    except ValueError:
        index = count = 0
    if not 1 <= index <= count:
        raise ValueError(f"{option} must be I/N with 1 <= I <= N, got {spec!r}")
    return index, count


def known_others(seconds) -> dict[str, float]:
    """The tests that are not per case (node ids: they have ``::``) that the
    durations file knows, with their seconds (none for a plain callable)."""
    return {unit: value for unit, value in getattr(seconds, "seconds", {}).items() if "::" in unit}


def shard_assignment(case_ids, count: int, quick=frozenset(),
                     seconds: Callable[[str], float] | None = None) -> tuple[dict[str, int], list[float]]:
    """Case id (and node id of each test that is not per case that the
    durations file knows) -> shard (0-based) of ``count`` shards, and each
    shard's seconds: longest-processing-time over the whole table on
    ``seconds`` (vgf_conformance/harness/schedule/durations.py), the quick tier first, then
    the other cases together with those tests (a 41 s ledger test first,
    cases around it, not on top of shards already even), so that shards are
    balanced both for a full run and for ``-m quick``. The same from the
    same file wherever it is computed (parametrization, collection). Without
    ``seconds`` every case weighs the same (each tier dealt round-robin in id
    order, the second starting where the first ended)."""
    weigh = seconds or (lambda unit: 1.0)
    ordered = sorted(case_ids)
    assignment: dict[str, int] = {}
    loads = None
    for tier in (True, False):
        units = {c: weigh(c) for c in ordered if (c in quick) == tier}
        if not tier:
            units.update(known_others(seconds))
        part, loads = durations.balance(units, count, loads)
        assignment.update(part)
    return assignment, loads


def shard_members(case_ids, shard: tuple[int, int] | None, quick=frozenset(),
                  seconds: Callable[[str], float] | None = None) -> list[str]:
    """The case ids of shard (I, N) (:func:`shard_assignment`), in id order;
    all of them when ``shard`` is None."""
    if shard is None:
        return sorted(case_ids)
    assignment, _ = shard_assignment(case_ids, shard[1], quick, seconds)
    return sorted(c for c, b in assignment.items() if b == shard[0] - 1 and c in case_ids)


def plan_batches(case_ids, quick: set[str], size: int, shard: tuple[int, int] | None = None,
                 seconds: Callable[[str], float] | None = None, workers: int = 1) -> dict[str, str]:
    """Case id -> batch name. Cases outside ``shard`` (I, N) keep their own
    name: they are deselected.

    Per tier (quick, full) of the shard: as many batches as ``size`` cases a
    batch needs, rounded up to a multiple of ``workers`` (so that each worker
    gets as many), the cases dealt over them by longest-processing-time on
    ``seconds`` (at most ``size`` a batch): batches of about equal seconds,
    so the workers finish together."""
    if size < 1:
        raise ValueError(f"--vgf-vulkan-batch must be at least 1, got {size}")
    plan = {case_id: case_id for case_id in case_ids}
    if size == 1:
        return plan
    ordered = shard_members(case_ids, shard, quick, seconds)
    weigh = seconds or (lambda unit: 1.0)
    for tier in ("quick", "full"):
        members = [c for c in ordered if (c in quick) == (tier == "quick")]
        if not members:
            continue
        count = -(-len(members) // size)
        count = min(len(members), -(-count // workers) * workers)
        loads, filled = [0.0] * count, [0] * count
        for case_id in sorted(members, key=lambda c: (-weigh(c), c)):
            target = min((b for b in range(count) if filled[b] < size), key=lambda b: (loads[b], b))
            loads[target] += weigh(case_id)
            filled[target] += 1
            plan[case_id] = f"{tier}-batch{target + 1:02d}"
    return plan


def item_case(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("case_run") if callspec else None


def order_items(items: list, plan: dict[str, str], seconds: Callable[[str], float] | None = None) -> list:
    """Each batch's items together, its Vulkan tests last. With ``seconds``,
    the batches and the tests that are not per case (by node id) longest
    first, so a worker that frees up takes the longest work left and the run
    ends on short work (xdist hands groups out in this order, see
    ``plugin.pytest_configure``); without, in collection order."""
    units: dict[tuple, list] = {}  # unit -> [first index, seconds]
    counted: set[str] = set()
    keys = []
    for index, item in enumerate(items):
        case_id = item_case(item)
        if case_id is None:
            unit, weight = ("test", item.nodeid), seconds(item.nodeid) if seconds else 0.0
        else:
            unit = ("batch", plan[case_id])
            weight = seconds(case_id) if seconds and case_id not in counted else 0.0
            counted.add(case_id)
        units.setdefault(unit, [index, 0.0])[1] += weight
        keys.append((unit, int(case_id is not None and item.originalname == VULKAN_TEST), index))

    def position(key):
        unit, vulkan_last, index = key
        first, weight = units[unit]
        return (-weight, first, vulkan_last, index)

    return [item for _, item in sorted(zip(keys, items), key=lambda pair: position(pair[0]))]
