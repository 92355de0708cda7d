"""The draw child: a process that runs draws one at a time, and its client.

The explorer never exports in its own process. :class:`DrawChild` starts
``python -m vgf_conformance.explore.worker`` in a new session (its own process
group, so a kill takes the converter and reference-model processes it
started with it), sends it one draw at a time as a JSON line on its stdin and
reads one JSON line back on a private pipe (the child's stdout and stderr go
to a log file: the export stack is noisy). The child stays up between draws
(its imports take seconds, a draw about two), so:

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

import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

#: Draws a child runs before it is replaced (bounds its memory).
RECYCLE_AFTER = 200
#: Seconds a new child may take to import the stack and say it is ready.
STARTUP_TIMEOUT = 300.0
#: The environment variable naming the fd the child answers on.
_ANSWER_FD_ENV = "VGF_EXPLORE_ANSWER_FD"


class ChildStartError(RuntimeError):
    """The draw child could not start (the message has the tail of its log)."""


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal-{-code}"
    return f"exit-{code}"


class _Child:
    """One child process: its Popen, the pipe it answers on, what it has sent."""

    def __init__(self, log_path: Path, env: dict, cwd, command) -> None:
        read_fd, write_fd = os.pipe()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE, stdout=log, stderr=log, env=dict(env, **{_ANSWER_FD_ENV: str(write_fd)}),
                cwd=cwd, pass_fds=(write_fd,), start_new_session=True)
        os.close(write_fd)
        self.answers: int | None = read_fd
        self.buffer = b""
        self.launched = time.monotonic()
        self.ready = False
        self.draws = 0
        self.timed_out = False

    def read(self, timeout: float) -> dict | None:
        """The next JSON line from the child, or None (timeout, or its end)."""
        deadline = time.monotonic() + timeout
        self.timed_out = False
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                return None
            ready, _, _ = select.select([self.answers], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def kill(self) -> int | None:
        """Kill the child's process group (it leads its own session); its exit code."""
        if self.answers is not None:
            os.close(self.answers)
            self.answers = None
        proc = self.proc
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdin:
            proc.stdin.close()
        return proc.returncode

    def close(self) -> None:
        """Ask the child to exit (end of its stdin); kill it if it does not."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


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
        self.child: _Child | None = None
        self.spare: _Child | None = None
        self.keep_spare = False
        self.starts = 0
        self.start_seconds = 0.0  # waited for children to be ready

    @property
    def draws(self) -> int:
        return self.child.draws if self.child else 0

    # -- lifecycle -----------------------------------------------------------
    def launch(self) -> None:
        """Start a child without waiting for it (it imports while the caller works)."""
        if self.child is None:
            self.child = _Child(self.log_path, self.env, self.cwd, self.command)

    def start(self) -> None:
        """Make a ready child current: the spare if there is one, else a new one."""
        started = time.monotonic()
        if self.child is None:
            self.child, self.spare = self.spare or _Child(self.log_path, self.env, self.cwd, self.command), None
        if self.keep_spare and self.spare is None:
            self.spare = _Child(self.log_path, self.env, self.cwd, self.command)
        child = self.child
        if not child.ready:
            answer = child.read(STARTUP_TIMEOUT)
            if answer is None or not answer.get("ready"):
                code = child.kill()
                self.child = None
                raise ChildStartError(f"the draw child did not start ({_exit_text(code)}); its log "
                                      f"{self.log_path} ends:\n{_log_tail(self.log_path)}")
            child.ready = True
            self.starts += 1
        self.start_seconds += time.monotonic() - started

    def close(self) -> None:
        for child in (self.child, self.spare):
            if child is not None and child.ready:
                child.close()
            elif child is not None:  # still importing: nothing to finish
                child.kill()
        self.child = self.spare = None

    # -- draws ---------------------------------------------------------------
    def run(self, request: dict, timeout: float) -> dict:
        """One draw's outcome: the child's answer, or a timeout/crash outcome."""
        if self.child is not None and self.child.draws >= RECYCLE_AFTER:
            self.child.close()
            self.child = None
        if self.child is None or not self.child.ready:
            self.start()
        child = self.child
        child.draws += 1
        try:
            child.proc.stdin.write((json.dumps(request) + "\n").encode())
            child.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: the read below sees the end of its pipe
        started = time.monotonic()
        answer = child.read(timeout)
        seconds = round(time.monotonic() - started, 3)
        if answer is not None:
            return answer
        alive = child.timed_out and child.proc.poll() is None
        code = child.kill()
        self.child = None
        self.keep_spare = True
        if alive:
            return {"status": "timeout", "seconds": seconds,
                    "message": f"no result within {timeout:g} s: the draw child was killed"}
        return {"status": "crash", "exit": _exit_text(code), "seconds": seconds,
                "message": f"the draw child died ({_exit_text(code)}); log: {self.log_path}",
                "log_tail": _log_tail(self.log_path, 15)}


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:])


# ---------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------
def main() -> int:
    answers = os.fdopen(int(os.environ[_ANSWER_FD_ENV]), "w", buffering=1)
    import logging

    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from vgf_conformance.explore.evaluate import evaluate, warm_up

    warm_up()
    answers.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        print(f"--- draw {request.get('draw')}: {request.get('family')} {json.dumps(request.get('params'))}",
              flush=True)
        try:
            outcome = evaluate(request)
        except Exception as error:  # noqa: BLE001 - the explorer's own evaluation broke: one draw
            outcome = {"status": "error", "error_type": type(error).__name__,
                       "message": traceback.format_exc()[-4000:]}
        answers.write(json.dumps(outcome, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
