"""``--dist loadgroup`` after a lost worker: the scheduler hands every test
out once more at most and never leaves a worker waiting (xdist 3.8.0's own
does both: vgf_conformance/harness/execution/scheduling.py). Driven here as
xdist's controller drives it, with workers that only record what they are
sent; the end-to-end run of hangs and a crash is
tests/test_golden_keeping.py's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from xdist.scheduler import LoadGroupScheduling

from vgf_conformance.harness.execution.scheduling import LostWorkerSafeLoadGroupScheduling, make_scheduler

#: Four groups (cases): a, b and d of one test, c of two.
COLLECTION = ["t.py::x[a]@a", "t.py::x[b]@b", "t.py::x[c]@c", "t.py::y[c]@c", "t.py::x[d]@d"]


class Worker:
    """What a worker is told: the indices of the tests to run, and shutdown."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices) -> None:
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True

    def holds(self, scheduler) -> int:
        return scheduler._pending_of(scheduler.assigned_work[self])

    def waits_forever(self, scheduler) -> bool:
        """A worker runs a test once it holds the next one, or is shutting down."""
        return self.holds(scheduler) == 1 and not self.shutting_down


def _config(dist: str = "loadgroup"):
    return SimpleNamespace(getvalue={"tx": ["2*popen"], "dist": dist}.get,
                           option=SimpleNamespace(loadscopereorder=False))


def _started(scheduler_class):
    scheduler = scheduler_class(_config())
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    return scheduler, workers


def _finish(scheduler, worker, nodeid: str) -> None:
    scheduler.mark_test_complete(worker, COLLECTION.index(nodeid))


def _replace(scheduler, lost: Worker, name: str) -> Worker:
    """xdist on a lost worker: remove it (its work back on the queue), start
    a replacement that collects, schedule again."""
    scheduler.remove_node(lost)
    new = Worker(name)
    scheduler.add_node(new)
    scheduler.add_node_collection(new, COLLECTION)
    scheduler.schedule()
    return new


def _ours_and_xdists(bug: str):
    """Ours, and xdist 3.8.0's own as a strict expected failure on ``bug``."""
    return pytest.mark.parametrize("scheduler_class", [
        LostWorkerSafeLoadGroupScheduling,
        pytest.param(LoadGroupScheduling, marks=pytest.mark.xfail(strict=True, reason=bug))])


@_ours_and_xdists("pytest-xdist#1323: a finished group handed out again, as no test")
def test_a_lost_workers_finished_groups_are_not_handed_out_again(scheduler_class):
    scheduler, (gw0, gw1) = _started(scheduler_class)
    group_a = gw0.sent[0]
    _finish(scheduler, gw0, COLLECTION[group_a[0]])  # gw0 finished group a ...
    gw2 = _replace(scheduler, gw0, "gw2")  # ... then was lost in its next group
    everything_sent = [index for worker in (gw0, gw1, gw2) for indices in worker.sent for index in indices]
    assert [] not in gw1.sent + gw2.sent, "a worker was sent no test: it never asks for more"
    assert everything_sent.count(group_a[0]) == 1, "a finished test ran again"


@_ours_and_xdists("pytest-xdist#1327: a replacement holding one test waits for a second")
def test_a_replacement_never_waits_holding_one_test(scheduler_class):
    scheduler, (gw0, gw1) = _started(scheduler_class)
    gw2 = _replace(scheduler, gw0, "gw2")  # lost before it finished anything
    assert not any(worker.waits_forever(scheduler) for worker in (gw1, gw2)), \
        {w.gateway.id: (w.sent, w.holds(scheduler), w.shutting_down) for w in (gw1, gw2)}


def test_only_loadgroup_is_replaced():
    assert isinstance(make_scheduler(_config("loadgroup"), None), LostWorkerSafeLoadGroupScheduling)
    assert make_scheduler(_config("load"), None) is None  # xdist's own
