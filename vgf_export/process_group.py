"""A child process in its own process group, killed with it.

``subprocess.run(timeout=...)`` kills only the direct child: a tool that
started children of its own leaves them running, and they hold its output
pipes open, so the call waits for them after all. :func:`run` starts the
child as the leader of a new session (process group) and, on a timeout or
any interruption, kills the whole group. The export runs the model
converter through it (:mod:`vgf_export.patches`, ``model-converter-timeout``);
the conformance suite runs every native tool through it
(:mod:`vgf_conformance.process`).
"""

from __future__ import annotations

import os
import signal
import subprocess

#: Seconds to read what a killed child wrote: a descendant that left its
#: process group may hold the pipes open for as long as it lives.
REAP_TIMEOUT = 5


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
        try:
            stdout, stderr = proc.communicate(timeout=REAP_TIMEOUT)
        except subprocess.TimeoutExpired:  # a descendant that left the group still holds the pipes
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            stdout = stderr = None
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
