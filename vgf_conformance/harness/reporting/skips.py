"""Skips say so: every skipped test is counted by its reason, in the terminal
summary and the report, and a skip whose reason is not declared here fails
a strict run (``--vgf-strict-skips``, on by default where ``CI=true``).

A skip hides a check. Some are by design and say why (a case declared to stay
on the CPU has no program for Vulkan); those are :data:`DECLARED`. Anything
else (a missing Vulkan stack, a missing browser, a missing package) is a check
that did not run: outside CI a finding the summary names and counts, in CI a
failure. A Vulkan tier that cannot run is a finding in every mode: the
summary and the report say how many tests it skipped and why.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter


@dataclasses.dataclass(frozen=True)
class Declared:
    """A reason a test may be skipped, even in CI: ``pattern`` matches its skip
    message; ``why`` says why nothing is lost."""

    pattern: str
    why: str
    #: Whether a strict run (CI) accepts it.
    in_ci: bool = True


#: Prefix of the skip message of a Vulkan test when the stack is missing.
VULKAN_UNAVAILABLE = "the Vulkan tier did not run"

DECLARED: dict[str, Declared] = {
    "stays-on-cpu": Declared(
        r": stays on the CPU as declared \(",
        "the case is declared to stay on the CPU (its reason in the case table): no delegate, "
        "so no program for Vulkan; test_delegation fails if it gets delegated"),
    "not-in-flow": Declared(
        r": does not apply in the [a-z0-9-]+ flow: ",
        "the check does not apply to that flow's runs (its entry in vgf_conformance/cases/flows.py says "
        "why); the same case's run in the default flow runs it"),
    "vulkan-unavailable": Declared(
        re.escape(VULKAN_UNAVAILABLE),
        "no Vulkan stack on this machine (scripts/setup.sh installs it): the Vulkan tier is a "
        "finding outside CI; in CI --vgf-require-vulkan makes it a failure", in_ci=False),
}


def skip_reason(report) -> str | None:
    """The skip message of a test report, or None when it did not skip
    (an expected failure is reported as skipped too: not a skip)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def declared_as(reason: str) -> str | None:
    return next((name for name, d in DECLARED.items() if re.search(d.pattern, reason)), None)


class SkipLedger:
    """The skips of a run, by reason."""

    def __init__(self) -> None:
        self.by_reason: Counter = Counter()  # declared name, or the message itself
        self.examples: dict[str, str] = {}

    def record(self, report) -> None:
        reason = skip_reason(report)
        if reason is None:
            return
        key = declared_as(reason) or reason
        self.by_reason[key] += 1
        self.examples.setdefault(key, reason)

    def summary(self) -> list[dict]:
        """One entry per reason: count, the declared name (None: undeclared), an example message."""
        return [{"reason": self.examples[key], "count": n, "declared": key if key in DECLARED else None}
                for key, n in sorted(self.by_reason.items(), key=lambda kv: (-kv[1], kv[0]))]

    def refused(self, strict: bool) -> list[dict]:
        """The skips a run refuses: undeclared ones, and in a strict run the declared ones CI does not accept."""
        return [e for e in self.summary()
                if e["declared"] is None or (strict and not DECLARED[e["declared"]].in_ci)]


def summary_lines(entries: list[dict], strict: bool) -> list[str]:
    """The terminal summary (and report.md) lines of a run's skips."""
    lines = []
    for e in entries:
        name = e["declared"]
        if name == "vulkan-unavailable":
            lines.append(f"FINDING: {e['count']} Vulkan test(s) skipped, {e['reason']}")
        elif name is None:
            lines.append(f"{e['count']} skipped, NOT DECLARED{' (fails in CI)' if not strict else ''}: {e['reason']}")
        else:
            lines.append(f"{e['count']} skipped as declared ({name}): {DECLARED[name].why}")
    return lines


def merge(runs: list[dict]) -> list[dict]:
    """The skips of shard reports together."""
    counts: Counter = Counter()
    for run in runs:
        for e in run.get("skips") or []:
            counts[(e["reason"] if e["declared"] is None else "", e["declared"] or "")] += e["count"]
    examples = {(e["reason"] if e["declared"] is None else "", e["declared"] or ""): e["reason"]
                for run in runs for e in run.get("skips") or []}
    return [{"reason": examples[key], "count": n, "declared": key[1] or None}
            for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


class SkipReport:
    """The pytest side (registered on the controller): records each report's
    skip, prints the summary, fails a strict run on a refused skip."""

    def __init__(self, config) -> None:
        self.config = config
        self.ledger = SkipLedger()

    @property
    def strict(self) -> bool:
        return bool(self.config.getoption("--vgf-strict-skips"))

    def pytest_runtest_logreport(self, report) -> None:
        self.ledger.record(report)

    def pytest_sessionfinish(self, session) -> None:
        refused = self.ledger.refused(self.strict)
        if refused and self.strict and session.exitstatus in (0, 5):
            session.exitstatus = 1  # pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        entries = self.ledger.summary()
        if not entries:
            return
        terminalreporter.section("vgf skips")
        for line in summary_lines(entries, self.strict):
            terminalreporter.write_line(line)
        refused = self.ledger.refused(self.strict)
        if refused and self.strict:
            terminalreporter.write_line(
                f"ERROR: {sum(e['count'] for e in refused)} test(s) skipped for a reason this run does not "
                "accept (--vgf-strict-skips, on where CI=true): a skipped check is a check that did not "
                "run. Declared reasons: vgf_conformance/harness/reporting/skips.py", red=True)
