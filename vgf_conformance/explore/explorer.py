"""The explorer: draw cases, run them in the draw child, group and shrink failures.

Two phases within one wall-time budget:

1. **Drawing** (``explore``). A Hypothesis test per family (``@given`` over
   :func:`vgf_conformance.explore.space.strategy`) is driven through its public
   fuzzing entry point, ``test.hypothesis.fuzz_one_input``, with byte strings
   from ``random.Random(seed)``: the same seed draws the same cases in the same
   order. The test body runs the draw in the draw child
   (:class:`~vgf_conformance.explore.worker.DrawChild`) and raises, for a failing
   draw, an exception whose *class* is its signature
   (:mod:`vgf_conformance.explore.signature`). Hypothesis keys failures by that
   class (its "interesting origin"), and ``fuzz_one_input`` stores each
   signature's smallest failing choice sequence in the example database
   (``OUT/hypothesis/<family>``). Drawing stops at ``1 - shrink_share`` of the
   budget once something has failed (if nothing has, it goes on, and stops at
   the first failure or at the end of the budget).
2. **Shrinking** (``shrink``). Each group found while drawing, in the
   order found, gets an ordinary Hypothesis run of the same test (phases
   ``reuse`` and ``shrink``) in which only its signature counts as a failure:
   Hypothesis replays the stored failures and shrinks that signature's to
   its minimal failing case (a candidate failing with another signature does
   not count; it still updates that group's smallest case seen). Each group
   gets an equal share of the time left (what one leaves goes to the next).
   Each case is exported once per run (outcomes are cached by parameters);
   once a group's share is spent, new candidates are not exported (they
   count as passing), so Hypothesis finishes with what it has.

The example database persists in the out directory: a later run with the
same out directory replays the stored failures first. The run's summary
(``findings.json``) and ``findings.md`` come from
:mod:`vgf_conformance.explore.findings`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import TextIO

from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hypothesis_seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

from vgf_conformance.explore import entry, reach, space
from vgf_conformance.explore.signature import ExploreFailure, failure_type, signature, slug
from vgf_conformance.explore.worker import ChildStartError, DrawChild

#: Bytes handed to ``fuzz_one_input`` per draw (a draw takes a few dozen).
BUFFER_BYTES = 512


@dataclasses.dataclass(frozen=True)
class Options:
    families: tuple[str, ...]
    seed: int
    budget: float  # seconds of wall time, child start included
    out: Path
    shrink_share: float = 0.4
    draw_timeout: float = 90.0
    vulkan: bool = False
    pte: bool = False
    workarounds_off: tuple[str, ...] = ()
    max_draws: int | None = None  # drawing phase: at most this many exports
    stack_target: bool = False  # draw where the matrix does not reach the stack first (explore/reach.py)
    limits: space.Limits = space.Limits()
    command: str = ""  # the command line, for the findings


def _walk(error: BaseException):
    yield error
    for inner in getattr(error, "exceptions", ()) or ():
        yield from _walk(inner)


@dataclasses.dataclass
class Group:
    signature: str
    family: str
    draws: list[int] = dataclasses.field(default_factory=list)
    first: dict | None = None
    smallest: dict | None = None  # by space.size_key
    minimal: dict | None = None  # Hypothesis' shrunk example
    found_in: str = "explore"

    @property
    def best(self) -> dict:
        return self.minimal or self.smallest or self.first


def _quiet_stack_logs() -> None:
    """Import-time noise of the stack (torchao's CUDA kernels, torch's pytree notices)."""
    import logging

    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class Explorer:
    def __init__(self, options: Options, progress: TextIO = sys.stderr, child=None) -> None:
        self.options = options
        self.progress = progress
        self.out = Path(options.out)
        self.cache: dict[str, dict] = {}
        self.records: list[dict] = []
        self.groups: dict[tuple[str, str], Group] = {}  # (family, signature) -> group
        self.phase = "explore"
        self.target: str | None = None  # the signature being shrunk
        self.slice_end: float | None = None  # when its share of the shrinking time ends
        self.cache_hits = 0
        self.skipped = 0
        self.invalid = 0
        self.minimal_by: dict[str, str] = {}
        self.notes: list[str] = []
        self.phase_seconds: dict[str, float] = {}
        self.explore_draws = 0
        self.start = self.end = self.explore_end = 0.0
        # The draw child (tests give a stand-in with launch/start/run/close).
        self.child = child or DrawChild(self.out / "draw-child.log")
        #: With ``stack_target``: the matrix's reached stack lines, and the draws that add to them.
        self.reach = reach.StackTarget.recorded(BUFFER_BYTES) if options.stack_target else None
        self._log = None
        self.error: str | None = None  # the traceback, if the explorer itself failed

    # -- time ----------------------------------------------------------------
    def left(self) -> float:
        return self.end - time.monotonic()

    def _typical_draw(self) -> float:
        seconds = [r["seconds"] for r in self.records[-20:] if r.get("status") == "done"]
        return statistics.median(seconds) if seconds else 2.0

    def _may_start_draw(self) -> bool:
        end = self.end if self.slice_end is None else min(self.end, self.slice_end)
        return end - time.monotonic() > self._typical_draw()

    # -- one draw --------------------------------------------------------------
    def evaluate(self, family: str, params: dict) -> dict | None:
        """The outcome of a draw: from the cache, or run in the draw child;
        None when the budget has no room for it (it then counts as passing)."""
        key = space.draw_key(family, params)
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key]
        if not self._may_start_draw():
            self.skipped += 1
            return None
        number = len(self.records) + 1
        artifacts = self.out / "artifacts" / f"draw-{number:05d}"
        request = {"draw": number, "family": family, "params": params, "artifacts": str(artifacts),
                   "vulkan": self.options.vulkan, "pte": self.options.pte,
                   "draw_timeout": self.options.draw_timeout}
        if self.reach is not None:
            request[reach.REQUEST_FIELD] = str(self.out / "stack-coverage")
        started = time.monotonic()
        outcome = self.child.run(request, self.options.draw_timeout)
        outcome["seconds"] = outcome.get("seconds") or round(time.monotonic() - started, 3)
        outcome.update(draw=number, phase=self.phase, family=family, params=params)
        if "id" not in outcome:  # no answer (hang, crash): name the case here
            try:
                outcome["code"] = entry.render(family, params)
                outcome["id"] = entry.build_case(outcome["code"]).id
            except Exception as error:  # noqa: BLE001
                outcome["id"] = f"(unbuildable: {type(error).__name__}: {error})"
        sig = signature(outcome)
        outcome["signature"] = sig
        if self.reach is not None:
            self.reach.see(outcome)
        if sig is None and artifacts.exists():
            shutil.rmtree(artifacts, ignore_errors=True)
        self.cache[key] = outcome
        self.records.append(outcome)
        if self.phase == "explore":
            self.explore_draws += 1
        self._log.write(json.dumps(outcome, default=str) + "\n")
        self._log.flush()
        new = False
        if sig is not None:
            group = self.groups.get((family, sig))
            if group is None:
                group = Group(sig, family, first=outcome, smallest=outcome, found_in=self.phase)
                self.groups[(family, sig)] = group
                new = True
            group.draws.append(number)
            if space.size_key(family, params) < space.size_key(family, group.smallest["params"]):
                group.smallest = outcome
        self._report(outcome, new)
        return outcome

    def _report(self, outcome: dict, new: bool) -> None:
        elapsed = time.monotonic() - self.start
        verdict = "ok" if outcome["signature"] is None else ("NEW " if new else "") + f"FAIL {outcome['signature']}"
        self.progress.write(
            f"[{self.phase} {_clock(elapsed)}, {_clock(self.left())} left] #{outcome['draw']} "
            f"{outcome.get('id')} ({outcome['seconds']:.1f}s): {verdict} | "
            f"{len(self.records)} cases tried, {len(self.groups)} groups\n")
        self.progress.flush()

    # -- the Hypothesis tests ------------------------------------------------
    def make_tests(self, family: str):
        """(the drawing test, a function making the shrinking test of a signature).

        Both wrap one function, so they share Hypothesis' database key: the
        failures the drawing test stores (``OUT/hypothesis/<family>/explore``)
        are what a signature's shrinking test replays. A shrinking test reads
        that database without changing it and keeps its own examples in
        ``OUT/hypothesis/<family>/<signature>``."""
        strategy = space.strategy(family, self.options.limits, self.options.workarounds_off)
        root = self.out / "hypothesis" / family
        explore_db = DirectoryBasedExampleDatabase(root / "explore")
        common = dict(deadline=None, max_examples=10_000, suppress_health_check=list(HealthCheck),
                      verbosity=Verbosity.quiet, print_blob=False)
        explorer = self

        def explore_case(params):
            outcome = explorer.evaluate(family, params)
            sig = outcome["signature"] if outcome else None
            if sig is not None and explorer.target in (None, sig):
                raise failure_type(sig)(outcome)

        def test(database, **extra):
            return settings(database=database, **common, **extra)(
                hypothesis_seed(self.options.seed)(given(params=strategy)(explore_case)))

        def shrinker(sig: str):
            database = MultiplexedDatabase(ReadOnlyDatabase(explore_db),
                                           DirectoryBasedExampleDatabase(root / slug(sig)))
            return test(database, phases=(Phase.reuse, Phase.shrink), report_multiple_bugs=False)

        return test(explore_db), shrinker

    # -- the run ---------------------------------------------------------------
    def run(self) -> dict:
        options = self.options
        self.out.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.out / "artifacts", ignore_errors=True)  # a run's own; the database persists
        self.start = time.monotonic()
        self.end = self.start + options.budget
        self.explore_end = self.start + options.budget * (1 - options.shrink_share)
        self._log = open(self.out / "draws.jsonl", "w")
        interrupted = False
        try:
            self.progress.write(f"[explore] seed {options.seed}, budget {_clock(options.budget)}, families "
                                f"{', '.join(options.families)}; starting the draw child "
                                f"(log: {self.child.log_path})\n")
            self.child.launch()  # it imports the stack while this process imports the builders
            _quiet_stack_logs()
            import vgf_conformance.cases  # noqa: F401 - to name the cases of draws that never answer

            tests = {family: self.make_tests(family) for family in options.families}
            self.child.start()
            self._explore(tests)
            self.phase_seconds["explore"] = time.monotonic() - self.start
            self._shrink(tests)
        except KeyboardInterrupt:
            interrupted = True
            self.notes.append("interrupted (Ctrl-C): findings are what was found until then")
        except ChildStartError:
            raise
        except Exception as error:  # noqa: BLE001 - a bug of the explorer: still write what it found
            import traceback

            self.error = traceback.format_exc()
            self.progress.write(self.error)
            self.notes.append(f"the explorer failed ({type(error).__name__}: {error}); findings are what "
                              "was found until then")
        finally:
            self.child.close()
            self._log.close()
        self.phase_seconds.setdefault("explore", time.monotonic() - self.start)
        self.phase_seconds["total"] = time.monotonic() - self.start
        self.phase_seconds["shrink"] = self.phase_seconds["total"] - self.phase_seconds["explore"]
        self._prune_artifacts()
        from vgf_conformance.explore import findings

        summary = findings.summarize(self, interrupted)
        findings.write_findings(self.out, summary)
        self.progress.write(f"[done] {summary['cases']} cases in {_clock(summary['seconds'])} "
                            f"({summary['cases_per_minute']:.1f}/min), {len(self.groups)} groups: "
                            f"{self.out / 'findings.md'}\n")
        return summary

    def _explore(self, tests: dict) -> None:
        options = self.options
        rng = random.Random(options.seed)
        attempt = 0
        while True:
            now = time.monotonic()
            if not self._may_start_draw():
                break
            if now >= self.explore_end and self.groups:
                break
            if options.max_draws is not None and self.explore_draws >= options.max_draws:
                break
            family = options.families[attempt % len(options.families)]
            attempt += 1
            buffer = self.reach.next_buffer(rng) if self.reach is not None else rng.randbytes(BUFFER_BYTES)
            try:
                if tests[family][0].hypothesis.fuzz_one_input(buffer) is None:
                    self.invalid += 1
            except ExploreFailure:
                pass
            if self.reach is not None:
                self.reach.keep(buffer)
            if attempt > 1000 * (self.explore_draws + 1):
                self.notes.append("drawing stopped: the space gave no new cases")
                break

    def _shrink(self, tests: dict) -> None:
        """Shrink each group found while drawing, in the order found, each in
        its share of the time left (what one leaves goes to the next)."""
        self.phase = "shrink"
        queue = [g for g in sorted(self.groups.values(), key=lambda g: g.draws[0])]
        self.progress.write(f"[shrink] {len(queue)} groups, {_clock(self.left())} left\n")
        for i, group in enumerate(queue):
            if not self._may_start_draw():
                self.notes.append(f"no time left to shrink {len(queue) - i} of {len(queue)} groups")
                break
            self.target = group.signature
            self.slice_end = time.monotonic() + self.left() / (len(queue) - i)
            self.progress.write(f"[shrink] {group.signature} ({group.family}): {_clock(self.slice_end - time.monotonic())}\n")
            try:
                tests[group.family][1](group.signature)()
            except ExploreFailure as error:
                if error.signature == group.signature:
                    group.minimal = error.outcome
            except Exception as error:  # noqa: BLE001 - Hypothesis gave up (e.g. flaky): keep the smallest seen
                found = [e for e in _walk(error) if isinstance(e, ExploreFailure) and e.signature == group.signature]
                if found:
                    group.minimal = found[0].outcome
                else:
                    self.notes.append(f"shrinking {group.signature}: Hypothesis stopped with "
                                      f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}")
            else:
                self.notes.append(f"shrinking {group.signature}: Hypothesis replayed no failure from its database")
            finally:
                self.target = self.slice_end = None

    def _prune_artifacts(self) -> None:
        """Keep the artifacts of each group's first and minimal case only."""
        keep = {o["draw"] for g in self.groups.values() for o in (g.first, g.smallest, g.minimal) if o}
        root = self.out / "artifacts"
        if not root.is_dir():
            return
        for path in root.iterdir():
            match = re.fullmatch(r"draw-(\d+)", path.name)
            if match and int(match.group(1)) not in keep:
                shutil.rmtree(path, ignore_errors=True)
