"""Child processes of the suite: each in its own process group, killed with it.

Native tools crash and hang, and some start children of their own (the
``.pte`` runtime child runs the TOSA reference model in grandchildren; the
model converter runs under ExecuTorch). ``subprocess.run(timeout=...)`` kills
only the direct child and leaves the rest running. :func:`run` starts the
child as the leader of a new session (process group) and, on a timeout or
any interruption, kills the whole group; :func:`kill_group` does the same
for a long-lived :class:`subprocess.Popen` started with
``start_new_session=True``. Every native tool of the suite goes through here.
"""

from __future__ import annotations

import os
import signal
import subprocess


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (it leads its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL does not end
        pass


def run(command, *, timeout: float | None, input=None, capture_output: bool = False, text: bool = False,
        check: bool = False, **popen) -> subprocess.CompletedProcess:
    """``subprocess.run`` with the child in its own process group, the whole
    group killed on a timeout (:class:`subprocess.TimeoutExpired`, as run
    raises it) or when the caller is interrupted."""
    if capture_output:
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    proc = subprocess.Popen(command, start_new_session=True, text=text, **popen)
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        kill_group(proc)
        stdout, stderr = proc.communicate()
        # As subprocess.run raises it: what the child wrote, as bytes.
        stdout, stderr = (v.encode() if isinstance(v, str) else v for v in (stdout, stderr))
        raise subprocess.TimeoutExpired(command, timeout, output=stdout, stderr=stderr) from error
    except BaseException:
        kill_group(proc)
        raise
    done = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done
