"""The report written as the run goes: one line per finished case.

With ``--vgf-report DIR``, ``DIR/planned.json`` lists the cases the run
collected, and ``DIR/cases.jsonl`` gets one JSON line per case as soon as all
of its tests have finished (the case's record as the report holds it). A
worker or a shard killed mid-run (a CI job's timeout) so still leaves every
finished case's record; ``report.json`` is written at the end as before, and
``python -m vgf_conformance report merge`` takes a shard that has only
``cases.jsonl`` as a partial shard, saying which of its planned cases are
missing. Standard library only.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Callable

PLANNED = "planned.json"
CASES = "cases.jsonl"
#: The run's report, written whole when the run ends (harness/reporting/publish.py).
REPORT = "report.json"
#: What report.json says from the start of a run until its end: a run that
#: is killed leaves it saying so, never a previous run's report.
PARTIAL = ("the run has not ended, or was stopped before its end: cases.jsonl holds the cases it finished "
           "(python -m vgf_conformance report merge OUT DIR reads them)")


def is_partial(report: dict) -> bool:
    """Whether a report.json is the mark of a run that did not end."""
    return bool(report.get("partial"))


class CaseLog:
    def __init__(self, directory: Path | None, case_of: Callable[[str], str | None]) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.case_of = case_of  # node id -> case id, or None for a test that is not per case
        self.left: Counter = Counter()  # case id -> its tests not finished
        self.written: set[str] = set()
        self.started = False

    def planned(self, nodeids) -> None:
        """The run's collected tests (every xdist worker sends the same: once)."""
        if self.left or self.directory is None:
            return
        for nodeid in nodeids:
            case_id = self.case_of(nodeid)
            if case_id is not None:
                self.left[case_id] += 1
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / PLANNED).write_text(json.dumps(sorted(self.left), indent=0) + "\n")
        (self.directory / CASES).write_text("")  # this run's log, not a previous one's
        # report.json says "partial" until the run ends and writes it whole;
        # a previous run's report.md and report.html go with its report.json.
        for stale in ("report.md", "report.html"):
            (self.directory / stale).unlink(missing_ok=True)
        (self.directory / REPORT).write_text(
            json.dumps({"partial": PARTIAL, "cases": [], "workarounds": []}, indent=2, sort_keys=True) + "\n")
        self.started = True

    def finished(self, nodeid: str, record: Callable[[str], dict], now: bool = False) -> None:
        """A test's teardown: append its case's record when it was the case's
        last test (``now``: at once, e.g. when its worker crashed)."""
        case_id = self.case_of(nodeid)
        if not self.started or case_id is None or case_id not in self.left or case_id in self.written:
            return
        self.left[case_id] -= 1
        if self.left[case_id] > 0 and not now:
            return
        self.written.add(case_id)
        with (self.directory / CASES).open("a") as log:
            log.write(json.dumps({"id": case_id, **record(case_id)}, sort_keys=True) + "\n")


def read(directory: Path) -> tuple[dict[str, dict], list[str]]:
    """The records a (possibly killed) run logged, by case id, and the ids it
    planned but did not log. A torn last line (the kill came mid-write) is
    dropped."""
    records: dict[str, dict] = {}
    path = Path(directory) / CASES
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                records[record.pop("id")] = record
    planned_path = Path(directory) / PLANNED
    planned = json.loads(planned_path.read_text()) if planned_path.is_file() else []
    return records, [case_id for case_id in planned if case_id not in records]
