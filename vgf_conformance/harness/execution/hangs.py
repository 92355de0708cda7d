"""A hung case is stopped, not abandoned.

The watchdog of a case's run (:func:`vgf_conformance.harness.execution.runner.run_case`,
``--vgf-case-timeout``) fails the case when its thread has not returned in
time. But Python cannot stop a thread: the hung call would go on taking a
core, the GIL and its artifacts while the next cases run. So, under xdist:

- the worker writes what it knows (the stage and the stack) to the case's
  note, in a directory the controller gives every worker, and ends itself;
  xdist starts a new worker for the tests left;
- the controller attaches the note to the crash report xdist makes for the
  test that was running (``pytest_handlecrashitem``), and the report records
  the case as hung, with how its worker ended;
- the case's later tests read the note instead of running the case again.

A hang that holds the GIL keeps even the watchdog from running: then
faulthandler's deadline (a C thread, :data:`GRACE` seconds after the
timeout) writes every thread's stack to the case's note and ends the
process. Without xdist (``-n 0``) the watchdog's failure is all there is (the
hung thread stays behind), and the same deadline ends a run that a GIL-holding
hang would otherwise hold forever, its report marked partial.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

#: The key of the notes directory in an xdist worker's ``workerinput``.
NOTES_KEY = "vgf_hang_notes"
#: Seconds after the case timeout before the hard deadline ends the process,
#: at most: the watchdog's own way (the stage and the stack, then the worker
#: ends) comes first. A short timeout gets a grace as long as itself (at least
#: :data:`MIN_GRACE`): the watchdog needs well under a second to write its note.
GRACE = 10.0
MIN_GRACE = 2.0
#: The exit status of a worker that ended itself for a hung case (faulthandler's).
EXIT_STATUS = 1
#: The stage a report names for a hang that held the GIL (no watchdog could say).
UNKNOWN_STAGE = "unknown"
#: How much of a GIL-holding hang's stack trace the note keeps (faulthandler
#: allows 100 threads of 100 frames): its start, where the case's thread is.
TRACE_CHARS = 20_000


def _head(trace: str) -> str:
    """The start of a stack trace: faulthandler lists the newest thread (the
    case's own, started for its run) first, the worker's plumbing after it."""
    if len(trace) <= TRACE_CHARS:
        return trace
    return f"{trace[:TRACE_CHARS]}\n[... {len(trace) - TRACE_CHARS} more characters of the trace cut]"


def grace(timeout: float) -> float:
    """Seconds between a case's timeout and its hard deadline."""
    return min(GRACE, max(MIN_GRACE, timeout))


def _name(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", case_id)


class Notes:
    """The hang notes of one run's cases: ``<case>.json`` (the watchdog's:
    stage and message) and ``<case>.trace`` (the hard deadline's: every
    thread's stack). ``directory`` None: no notes (a run without xdist)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    @classmethod
    def of_worker(cls, config) -> "Notes":
        directory = getattr(config, "workerinput", {}).get(NOTES_KEY)
        return cls(Path(directory) if directory else None)

    @classmethod
    def for_controller(cls) -> "Notes":
        return cls(Path(tempfile.mkdtemp(prefix="vgf-hangs-")))

    def remove(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def read(self, case_id: str) -> tuple[str | None, str] | None:
        """``(stage, message)`` of the case's hang (stage None: not known, the
        hang held the GIL), or None if it did not hang."""
        if self.directory is None:
            return None
        note, trace = (self.directory / f"{_name(case_id)}{suffix}" for suffix in (".json", ".trace"))
        if note.exists():
            data = json.loads(note.read_text())
            return data["stage"], data["message"]
        if trace.exists() and trace.stat().st_size:
            return None, ("the case hung holding the GIL (the watchdog could not run): its process "
                          "was ended at its hard deadline, after --vgf-case-timeout; every thread's stack:\n"
                               f"{_head(trace.read_text(errors='replace'))}")
        return None

    @contextlib.contextmanager
    def deadline(self, case_id: str, timeout: float | None):
        """The hard deadline of one case's run: ``timeout`` + :func:`grace`
        seconds, then faulthandler writes every thread's stack (to the
        case's trace, or to stderr without notes) and ends the process."""
        if timeout is None:
            yield
            return
        trace = None if self.directory is None else (self.directory / f"{_name(case_id)}.trace").open("w")
        faulthandler.dump_traceback_later(timeout + grace(timeout), exit=True, file=trace or sys.stderr)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            if trace is not None:
                trace.close()
                path = Path(trace.name)
                if not path.stat().st_size:
                    path.unlink()

    def stop(self, case_id: str, stage: str, message: str) -> None:
        """End this process for the case that hung, after writing its note
        (without notes: return, and the hung thread stays behind)."""
        if self.directory is None:
            return
        note = self.directory / f"{_name(case_id)}.json"
        note.with_suffix(".part").write_text(json.dumps({"stage": stage, "message": message}))
        note.with_suffix(".part").replace(note)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_STATUS)
