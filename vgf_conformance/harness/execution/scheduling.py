"""xdist's ``--dist loadgroup`` scheduler, without its deadlocks after a lost
worker (pytest-xdist 3.8.0, the pinned and newest release).

A hung case ends its worker, and a crash kills one (vgf_conformance/harness/
execution/hangs.py); xdist then starts a replacement. Its loadgroup scheduler
can then wait forever, with every worker idle:

- the lost worker's whole workload goes back on the queue, its finished
  groups too; one handed out again sends a worker no test, and no test of it
  ever finishes to ask for more (pytest-xdist#1323, #1378);
- a worker runs a test only once it holds the next one (or is told to shut
  down); a replacement handed one group of one test, with more groups still
  queued, waits for a second test that is never sent (pytest-xdist#1327).

The fixes merged upstream after 3.8.0 (pytest-xdist#1324, #1328) are not
released; this subclass is the same scheduler with both mended, and goes
when a release carries them (tests/test_golden_keeping.py runs hangs and a
crash in one two-worker run: it hangs without this).
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling


class LostWorkerSafeLoadGroupScheduling(LoadGroupScheduling):
    """``--dist loadgroup`` that goes on after a worker is lost."""

    def remove_node(self, node):
        workload = self.assigned_work.get(node, {})
        for group in [group for group, tests in workload.items() if all(tests.values())]:
            del workload[group]  # finished: not work to hand out again
        return super().remove_node(node)

    def _reschedule(self, node) -> None:
        super()._reschedule(node)
        # Until the node holds two tests (it runs one once it knows the next),
        # or is shut down (then it runs what it holds).
        while node in self.assigned_work and not node.shutting_down \
                and self._pending_of(self.assigned_work[node]) < 2:
            if self.workqueue:
                self._assign_work_unit(node)
            else:
                node.shutdown()


def make_scheduler(config, log):
    """The scheduler of ``--dist loadgroup`` (None: xdist's own for the others)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return LostWorkerSafeLoadGroupScheduling(config, log)
