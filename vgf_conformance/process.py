"""Child processes of the suite: each in its own process group, killed with it.

Native tools crash and hang, and some start children of their own (the
``.pte`` runtime child runs the TOSA reference model in grandchildren; the
model converter runs under ExecuTorch). ``subprocess.run(timeout=...)`` kills
only the direct child and leaves the rest running. ``run`` starts the
child as the leader of a new session (process group) and, on a timeout or
any interruption, kills the whole group; ``kill_group`` does the same
for a long-lived :class:`subprocess.Popen` started with
``start_new_session=True`` (both in :mod:`vgf_export.process_group`, which
runs the model converter under ExecuTorch the same way). Every native tool
of the suite goes through here.

A child kept up between requests (its imports take seconds: the ``.pte``
runtime child, the explorer's and the native path's workers) speaks one
protocol, :class:`ServedChild`: a JSON line in on its stdin, a JSON line back
on a private pipe (:func:`answer_channel` on the child's side; its stdout and
stderr go to a log, since the stack is noisy), a timeout per request. A
request that gets no answer raises :class:`ChildFailed`, saying whether the
child hung (its process group killed), crashed (the signal) or exited, with
its log of that request; a one-shot tool that fails raises the same
(:func:`run_tool`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from vgf_conformance.text import tail
from vgf_export.process_group import kill_group, run

#: The environment variable naming the pipe a served child answers on.
ANSWER_FD_ENV = "VGF_CHILD_ANSWER_FD"
#: Lines of a served child's log kept in a :class:`ChildFailed`.
LOG_TAIL_LINES = 15


def exit_text(returncode: int | None) -> str:
    """A child's exit status as words: ``SIGSEGV``, ``exit-3``, ``unknown``."""
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal-{-returncode}"
    return f"exit-{returncode}"


def resolve_tool(value: str | None) -> str | None:
    """A native tool as the shell would run it: a bare name looked up on
    ``PATH`` (``shutil.which``), a path as it is; None when neither names an
    executable file. (ExecuTorch's model-converter lookup returns the bare
    name when the venv's ``bin`` is on ``PATH``.)"""
    if not value:
        return None
    if os.sep not in value:
        return shutil.which(value)
    return value if os.path.isfile(value) and os.access(value, os.X_OK) else None


class ChildFailed(RuntimeError):
    """A native tool or a served child gave no result. ``kind``: ``timeout``
    (it outlived its timeout and was killed with its process group),
    ``crash`` (a signal ended it) or ``exit`` (it exited, with an error for a
    one-shot tool, with no answer for a served child); ``returncode`` its exit
    status (None after a timeout), ``exit`` that status as words, ``seconds``
    the wait, ``log`` the tail of its output (a served child's: since the
    request). The message is ``what``, the reason and the log."""

    def __init__(self, kind: str, *, returncode: int | None, timeout: float, seconds: float, log: str,
                 what: str = "", served: bool = False) -> None:
        self.kind, self.returncode, self.timeout, self.seconds, self.log = kind, returncode, timeout, seconds, log
        self.exit, self.served = exit_text(returncode), served
        super().__init__(" ".join(filter(None, [what, self.reason])) + (f"\n{log}" if log and what else ""))

    @property
    def reason(self) -> str:
        """What happened, as the end of a sentence about the tool or child."""
        if self.kind == "timeout":
            return f"timed out after {self.timeout:g} s (killed)"
        if self.kind == "crash":
            return f"crashed ({self.exit})"
        return f"exited with status {self.returncode}" + (" and no answer" if self.served else "")


def _failure_kind(returncode: int) -> str:
    return "crash" if returncode < 0 else "exit"


def run_tool(command, *, what: str, timeout: float, **popen) -> subprocess.CompletedProcess:
    """A one-shot native tool, its output captured as text: :func:`run`, and
    a timeout, a crash or a non-zero exit raised as :class:`ChildFailed`
    (message: ``what``, the reason, the tail of its output)."""
    started = time.monotonic()
    try:
        done = run(command, timeout=timeout, capture_output=True, text=True, **popen)
    except subprocess.TimeoutExpired as error:
        output = b"".join(v for v in (error.stdout, error.stderr) if v).decode(errors="replace")
        raise ChildFailed("timeout", returncode=None, timeout=timeout, seconds=time.monotonic() - started,
                          log=tail(output), what=what) from None
    if done.returncode != 0:
        raise ChildFailed(_failure_kind(done.returncode), returncode=done.returncode, timeout=timeout,
                          seconds=time.monotonic() - started, log=tail(done.stdout + done.stderr), what=what)
    return done


class ServedChild:
    """One long-lived child in its own session, answering requests one at a
    time: it says it is ready (its first JSON line), then answers each JSON
    line it reads on stdin with one JSON line on the pipe named by
    :data:`ANSWER_FD_ENV`. Its stdout and stderr are appended to ``log_path``
    (None: a private log, removed on :meth:`close`)."""

    def __init__(self, command, *, log_path: Path | None = None, env: dict | None = None, cwd=None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="child-") if log_path is None else None
        self.log_path = Path(self._tmp.name) / "log.txt" if self._tmp else Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        env = dict(os.environ if env is None else env, **{ANSWER_FD_ENV: str(write_fd)})
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, cwd=cwd, pass_fds=(write_fd,), start_new_session=True)
        os.close(write_fd)
        self._answers: int | None = read_fd
        self._buffer = b""
        self.ready = False
        self.requests = 0  # requests sent (the one that lost the child counts)

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self.proc.pid if self.proc.poll() is None else None

    def wait_ready(self, timeout: float) -> dict:
        """The child's first line, once its imports are done; ChildFailed if none."""
        answer = self._answer(timeout, log_offset=0)
        self.ready = True
        return answer

    def request(self, message: dict, timeout: float) -> dict:
        """Send ``message``; the child's answer, or ChildFailed (the child is then gone)."""
        offset = self.log_size()
        self.requests += 1
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: the read below sees the end of its pipe
        return self._answer(timeout, log_offset=offset)

    def log_size(self) -> int:
        """Bytes the child has logged so far (where a request's log starts)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        """The tail of what the child logged from byte ``offset`` on."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                return tail(log.read().decode(errors="replace"), lines=LOG_TAIL_LINES)
        except OSError:
            return "(no log)"

    def _answer(self, timeout: float, log_offset: int) -> dict:
        started = time.monotonic()
        deadline, ended = started + timeout, False
        while b"\n" not in self._buffer and not ended and time.monotonic() < deadline:
            ready, _, _ = select.select([self._answers], [], [], max(0.0, min(deadline - time.monotonic(), 1.0)))
            if ready:
                chunk = os.read(self._answers, 1 << 20)
                self._buffer += chunk
                ended = not chunk
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            return json.loads(line)
        seconds = time.monotonic() - started
        hung = not ended and self.proc.poll() is None
        if not hung:  # it closed its end: let it finish dying before its group is killed
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        returncode = self.kill()
        log = self.log_since(log_offset)
        kind = "timeout" if hung else _failure_kind(returncode if returncode is not None else 0)
        raise ChildFailed(kind, returncode=None if hung else returncode, timeout=timeout, seconds=seconds, log=log,
                          served=True)

    def kill(self) -> int | None:
        """Kill the child's process group now; its exit status."""
        if self._answers is not None:
            os.close(self._answers)
            self._answers = None
        kill_group(self.proc)
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        return self.proc.returncode

    def close(self, graceful: bool = True, wait: float = 15.0) -> None:
        """Stop the child: end of its input and ``wait`` seconds to exit (not
        ``graceful``, or still importing: a kill at once), then a kill of its
        group; a private log is removed."""
        if graceful and self.ready and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=wait)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def answer_channel() -> IO[str]:
    """The child's side of :class:`ServedChild`: the pipe it answers on, one
    JSON line each (line-buffered)."""
    return os.fdopen(int(os.environ[ANSWER_FD_ENV]), "w", buffering=1)


def serve(handle, answers: IO[str], *, announce=None) -> int:
    """The child's loop, once its imports are done: say it is ready, then
    answer each JSON line of stdin with ``handle``'s dict
    (``announce(request)``: a line printed to the log before it is handled)."""
    answers.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if announce is not None:
            print(announce(request), flush=True)
        answers.write(json.dumps(handle(request), default=str) + "\n")
    return 0
