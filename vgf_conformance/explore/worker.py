"""The draw child: a process that runs draws one at a time, and its client.

The explorer never exports in its own process. :class:`DrawChild` starts
``python -m vgf_conformance.explore.worker`` as a served child
(:class:`vgf_conformance.process.ServedChild`: its own process group, so a
kill takes the converter and reference-model processes it started with it;
one draw at a time as a JSON line on its stdin, one JSON line back on a
private pipe; its stdout and stderr go to a log file, since the export stack
is noisy). The child stays up between draws (its imports take seconds, a
draw about two), so:

* a draw that gives no answer within the draw timeout is a ``timeout``
  outcome: the child's process group is killed, and the next draw starts a
  new child;
* a child that dies (a native crash, an abort) is a ``crash`` outcome with its
  signal or exit code, and the next draw starts a new child;
* an exception in the explorer's own evaluation is an ``error`` outcome;

so a crash or a hang costs its draw, never the run. The child is also
replaced every :data:`RECYCLE_AFTER` draws. After the first hang or crash a
spare child is kept warming up, so later ones cost their draw, not a start.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

from vgf_conformance import process

#: Draws a child runs before it is replaced (bounds its memory).
RECYCLE_AFTER = 200
#: Seconds a new child may take to import the stack and say it is ready.
STARTUP_TIMEOUT = 300.0


class ChildStartError(RuntimeError):
    """The draw child could not start (the message has the tail of its log)."""


class DrawChild:
    """The parent's side: runs requests in a child with a timeout per draw.

    After the first child lost to a hang or a crash, a spare child is kept
    warming up, so that the next loss costs its draw and not another start."""

    #: The child's command line (tests run a light stand-in speaking the same protocol).
    COMMAND = (sys.executable, "-m", "vgf_conformance.explore.worker")

    def __init__(self, log_path: Path, env: dict | None = None, cwd: Path | None = None,
                 command=None) -> None:
        self.command = tuple(command or self.COMMAND)
        self.log_path = Path(log_path)
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.child: process.ServedChild | None = None
        self.spare: process.ServedChild | None = None
        self.keep_spare = False
        self.starts = 0
        self.start_seconds = 0.0  # waited for children to be ready

    @property
    def draws(self) -> int:
        return self.child.requests if self.child else 0

    # -- lifecycle -----------------------------------------------------------
    def _new(self) -> process.ServedChild:
        return process.ServedChild(self.command, log_path=self.log_path, env=self.env, cwd=self.cwd)

    def launch(self) -> None:
        """Start a child without waiting for it (it imports while the caller works)."""
        if self.child is None:
            self.child = self._new()

    def start(self) -> None:
        """Make a ready child current: the spare if there is one, else a new one."""
        started = time.monotonic()
        if self.child is None:
            self.child, self.spare = self.spare or self._new(), None
        if self.keep_spare and self.spare is None:
            self.spare = self._new()
        if not self.child.ready:
            try:
                self.child.wait_ready(STARTUP_TIMEOUT)
            except process.ChildFailed as lost:
                self.child = None
                raise ChildStartError(f"the draw child did not start (it {lost.reason}); its log "
                                      f"{self.log_path} ends:\n{lost.log}") from None
            self.starts += 1
        self.start_seconds += time.monotonic() - started

    def close(self) -> None:
        for child in (self.child, self.spare):
            if child is not None:
                child.close()
        self.child = self.spare = None

    # -- draws ---------------------------------------------------------------
    def run(self, request: dict, timeout: float) -> dict:
        """One draw's outcome: the child's answer, or a timeout/crash outcome."""
        if self.child is not None and self.child.requests >= RECYCLE_AFTER:
            self.child.close()
            self.child = None
        if self.child is None or not self.child.ready:
            self.start()
        try:
            return self.child.request(request, timeout)
        except process.ChildFailed as lost:
            self.child = None
            self.keep_spare = True
            seconds = round(lost.seconds, 3)
            if lost.kind == "timeout":
                return {"status": "timeout", "seconds": seconds,
                        "message": f"no result within {timeout:g} s: the draw child was killed"}
            return {"status": "crash", "exit": lost.exit, "seconds": seconds,
                    "message": f"the draw child died ({lost.exit}); log: {self.log_path}", "log_tail": lost.log}


# ---------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------
def serve_evaluations(module: str, announce) -> int:
    """A worker child's main: import ``module`` (its ``evaluate`` and
    ``warm_up``), say it is ready, then answer each request with
    ``evaluate(request)``; an exception in it is that request's ``error``
    outcome (this suite's own evaluation broke: one request, not the run)."""
    answers = process.answer_channel()
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    evaluator = importlib.import_module(module)
    evaluator.warm_up()

    def handle(request: dict) -> dict:
        try:
            return evaluator.evaluate(request)
        except Exception as error:  # noqa: BLE001 - the evaluation broke: one request
            outcome = {"status": "error", "error_type": type(error).__name__,
                       "message": traceback.format_exc()[-4000:]}
            return {"case": request["case"], **outcome} if "case" in request else outcome

    return process.serve(handle, answers, announce=announce)


def main() -> int:
    return serve_evaluations("vgf_conformance.explore.evaluate", lambda request: (
        f"--- draw {request.get('draw')}: {request.get('family')} {json.dumps(request.get('params'))}"))


if __name__ == "__main__":
    raise SystemExit(main())
