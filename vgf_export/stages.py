"""The stages of ``export_model``: their tracking, timing and errors.

:class:`StageTracker` times each stage and turns a toolchain failure into an
:class:`ExportStageError` naming the stage (``vgf_export.names.STAGES``).
While an export runs, its tracker is registered for its thread, so that a
watchdog outside the export can ask :func:`current_stage` where it hangs.
"""

from __future__ import annotations

import subprocess
import threading
import time

from vgf_export.partitioner import VgfPartitionerWrapper


class ExportStageError(RuntimeError):
    """A toolchain failure, with the stage of the flow it happened in. For a
    child process that timed out, the message ends with its output's tail."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        self.stage = stage
        self.cause = cause
        message = f"[{stage}] {type(cause).__name__}: {cause}"
        if isinstance(cause, subprocess.TimeoutExpired):
            tail = _tail(cause.stdout) + _tail(cause.stderr)
            message += f"\n--- output tail ---\n{tail}" if tail else " (no output)"
        super().__init__(message)


def _tail(output: bytes | str | None, lines: int = 20) -> str:
    if not output:
        return ""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    return "\n".join(text.splitlines()[-lines:]) + "\n"


class StageTracker:
    """Tracks the stage of the flow and the seconds spent in each; wraps
    toolchain errors with the stage they happened in."""

    def __init__(self) -> None:
        self.current = "export"
        self.seconds: dict[str, float] = {}
        self._since = time.perf_counter()

    @property
    def current(self) -> str:
        return self._current

    @current.setter
    def current(self, name: str) -> None:
        now = time.perf_counter()
        if hasattr(self, "_current"):
            self.seconds[self._current] = self.seconds.get(self._current, 0.0) + now - self._since
        self._current, self._since = name, now

    def __call__(self, name: str) -> "StageTracker":
        self.current = name
        return self

    def stop(self) -> dict[str, float]:
        self.current = "done"
        self.seconds.pop("done", None)
        return self.seconds

    def __enter__(self) -> "StageTracker":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None or isinstance(exc, (ExportStageError, KeyboardInterrupt)):
            return False
        stage = self.current
        if stage == "lower" and (
            "Vgf compiler failed" in str(exc) or isinstance(exc, subprocess.TimeoutExpired)
        ):
            stage = "convert"
        raise ExportStageError(stage, exc) from exc


#: The stage of the export running on each thread (thread id -> its tracker):
#: a watchdog outside the export reads it (current_stage) to say where a hung
#: export is. Only start_tracking and stop_tracking change it.
_RUNNING: dict[int, StageTracker] = {}


def start_tracking() -> StageTracker:
    """A new tracker for the export on the calling thread, which
    :func:`current_stage` reads until :func:`stop_tracking`."""
    stage = StageTracker()
    _RUNNING[threading.get_ident()] = stage
    return stage


def stop_tracking() -> None:
    """The export on the calling thread is over (tracked or not)."""
    _RUNNING.pop(threading.get_ident(), None)


def current_stage(thread_id: int) -> str | None:
    """The stage of the flow the export on thread ``thread_id`` is in (None:
    no export running there)."""
    stage = _RUNNING.get(thread_id)
    return stage.current if stage is not None else None


class StageTrackingPartitioner(VgfPartitionerWrapper):
    """Marks the end of partitioning, so later errors count as lowering."""

    def __init__(self, *args, stage: StageTracker, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._stage = stage

    def partition(self, exported_program):
        self._stage.current = "partition"
        result = super().partition(exported_program)
        self._stage.current = "lower"
        return result
