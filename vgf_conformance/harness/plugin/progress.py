"""Which case and tier a test belongs to (from its node id), and where a
long run is: :class:`Progress`, the lines the controller prints.

Only light imports: the xdist controller uses these.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

from vgf_conformance.harness.schedule import durations

CASE_TESTS_MODULE = "test_cases.py"  # vgf_conformance/test_cases.py: the tests of each case


def case_of(nodeid: str) -> str | None:
    """The case of a test of vgf_conformance/test_cases.py, from its node id:
    ``vgf_conformance/test_cases.py::test_export[<case>]`` in this repository,
    ``::test_export[<case>]`` in a team repository's run (``--pyargs``, the
    module outside the rootdir, so its path is left out); under ``--dist
    loadgroup`` xdist appends ``@<group>``."""
    module, _, test = nodeid.partition("::")
    if module and Path(module).name != CASE_TESTS_MODULE:
        return None
    if "::" in test or "[" not in test or "]" not in test:
        return None
    return test[test.index("[") + 1 : test.rindex("]")]


def function_of(nodeid: str) -> str:
    """The test function's name in a node id (``test_export`` of ``...::test_export[<case>]``)."""
    return nodeid.split("::")[-1].split("[")[0]


def tier_of(nodeid: str) -> str:
    """A test's tier: what its name says after ``test_`` up to the next
    underscore for a case's tests (export, delegation, golden, numerics, pte,
    vulkan), the module's name for the others (e.g. workarounds)."""
    if case_of(nodeid) is not None:
        return function_of(nodeid).removeprefix("test_").split("_")[0]
    return Path(nodeid.split("::")[0]).stem.removeprefix("test_")


def _minutes(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Where a long run is (controller side, so the same with xdist): cases
    done of the total, per tier, and the time left. A case is done in a tier
    when its tests of that tier have finished; the time left is the elapsed
    time scaled by the seconds (durations file) of what is left against what
    is done."""

    def __init__(self, every: int | None = None) -> None:
        self.every = every  # None: every tenth of the run
        self.seconds: Callable[[str], float] = lambda unit: 1.0
        self.tests: dict[str, set[str]] = {}  # unit (case id or node id) -> its tests not done
        self.tiers: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # tier -> unit -> left
        self.size: dict[str, int] = {}
        self.done: set[str] = set()
        self.start = self.first = time.perf_counter()
        self.next_line = 0

    def collected(self, nodeids, seconds: Callable[[str], float]) -> None:
        """The run's tests (node ids) and the seconds of each unit."""
        if self.tests:
            return  # every xdist worker sends the same collection
        self.seconds = seconds
        for nodeid in nodeids:
            unit = case_of(nodeid) or nodeid
            self.tests.setdefault(unit, set()).add(nodeid)
            self.tiers[tier_of(nodeid)][unit].add(nodeid)
        self.size = {unit: len(tests) for unit, tests in self.tests.items()}
        self.cases = [u for u in self.tests if case_of(next(iter(self.tests[u]))) is not None]
        if isinstance(seconds, durations.Durations):
            self.seconds = seconds.restricted(self.cases)
        self.interval = self.every or max(10, -(-len(self.cases) // 10))
        self.next_line = self.interval
        self.first = time.perf_counter()

    def finished(self, nodeid: str) -> str | None:
        """Record a test's end; the progress line when it is time for one."""
        unit = case_of(nodeid) or nodeid
        left = self.tests.get(unit)
        if left is None or nodeid not in left:
            return None
        left.discard(nodeid)
        self.tiers[tier_of(nodeid)][unit].discard(nodeid)
        if left or unit in self.done:
            return None
        self.done.add(unit)
        done_cases = sum(1 for c in self.cases if c in self.done)
        if unit in self.cases and done_cases >= self.next_line and done_cases < len(self.cases):
            self.next_line += self.interval
            return self.line()
        return None

    def line(self, final: bool = False) -> str:
        now = time.perf_counter()
        done_cases = sum(1 for c in self.cases if c in self.done)
        parts = [f"{done_cases}/{len(self.cases)} cases"]
        for tier, units in self.tiers.items():
            cases = [u for u in units if u in self.cases]
            if cases:
                parts.append(f"{tier} {sum(1 for u in cases if not units[u])}/{len(cases)}")
            else:
                parts.append(f"{tier} {sum(1 for u in units if not units[u])}/{len(units)} tests")
        elapsed = f"{_minutes(now - self.start)} elapsed"
        if final:
            return "vgf progress: done, " + ", ".join(parts) + f"; {elapsed}"
        total = sum(self.seconds(u) for u in self.tests)
        done = sum(self.seconds(u) * (1 - len(left) / self.size[u]) for u, left in self.tests.items())
        eta = (now - self.first) * (total - done) / done if done else 0.0
        return "vgf progress: " + ", ".join(parts) + f"; {elapsed}, about {_minutes(eta)} left"
