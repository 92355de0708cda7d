"""Child processes are killed with their children (vgf_conformance/process.py):
``subprocess.run(timeout=...)`` killed the child alone and left a grandchild
(the TOSA reference model under the .pte child, say) running."""

import os
import subprocess
import sys
import time

import pytest

from vgf_conformance import process

SPAWNS = """
import subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(helper.pid))
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_a_timeout_kills_the_child_and_its_children(tmp_path):
    pidfile = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        process.run([sys.executable, "-c", SPAWNS, str(pidfile)], timeout=2, capture_output=True)
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_run_returns_as_subprocess_run_does():
    done = process.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=60,
                       capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, "out\n")
    with pytest.raises(subprocess.CalledProcessError):
        process.run([sys.executable, "-c", "raise SystemExit(1)"], timeout=60, check=True)


# ---------------------------------------------------------------------------
# The served-child protocol (process.ServedChild): every long-lived child of
# the suite (the .pte runtime child, the explorer's and the native path's
# workers) speaks it; a stand-in child here, seconds.
# ---------------------------------------------------------------------------
SERVED = """
import os, sys, time
from vgf_conformance import process
answers = process.answer_channel()
def handle(request):
    what = request["what"]
    print("log of", what, flush=True)
    if what == "hang":
        time.sleep(600)
    if what == "crash":
        os.abort()
    if what == "exit":
        os._exit(3)
    return {"echo": what, "pid": os.getpid()}
process.serve(handle, answers)
"""


def _served(tmp_path):
    script = tmp_path / "served.py"
    script.write_text(SERVED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    child = process.ServedChild([sys.executable, str(script)], env=env)
    assert child.wait_ready(60)["ready"] is True
    return child


@pytest.mark.parametrize("what, kind, exit_text, reason", [
    ("hang", "timeout", "unknown", "timed out after 1 s (killed)"),
    ("crash", "crash", "SIGABRT", "crashed (SIGABRT)"),
    ("exit", "exit", "exit-3", "exited with status 3 and no answer"),
])
def test_a_served_child_that_gives_no_answer_says_how(tmp_path, what, kind, exit_text, reason):
    child = _served(tmp_path)
    try:
        first = child.request({"what": "a"}, timeout=30)
        assert first["echo"] == "a" and child.pid == first["pid"]
        with pytest.raises(process.ChildFailed) as info:
            child.request({"what": what}, timeout=1)
        lost = info.value
        assert (lost.kind, lost.exit, lost.reason) == (kind, exit_text, reason)
        assert lost.log == f"log of {what}"  # this request's log, not the first one's
        assert child.pid is None  # killed or found dead
    finally:
        child.close()


def test_a_served_child_closes_its_private_log(tmp_path):
    child = _served(tmp_path)
    log = child.log_path
    assert child.request({"what": "b"}, timeout=30)["echo"] == "b"
    child.close()
    assert child.pid is None and not log.exists()


@pytest.mark.parametrize("code, kind, message", [
    ("import time; time.sleep(600)", "timeout", r"^tool timed out after 1 s \(killed\)"),
    ("import os; print('boom', flush=True); os.abort()", "crash", r"^tool crashed \(SIGABRT\)\nboom"),
    ("import sys; print('no', file=sys.stderr); sys.exit(2)", "exit", r"^tool exited with status 2\nno"),
])
def test_a_failing_tool_is_one_error_naming_it(code, kind, message):
    with pytest.raises(process.ChildFailed, match=message) as info:
        process.run_tool([sys.executable, "-c", code], what="tool", timeout=1 if kind == "timeout" else 60)
    assert info.value.kind == kind
    assert process.run_tool([sys.executable, "-c", "print('ok')"], what="tool", timeout=60).stdout == "ok\n"


def test_a_timeout_returns_when_a_descendant_left_the_group_holding_the_pipes(monkeypatch):
    """After the group kill, run read the pipes until they closed: a
    descendant in a session of its own (out of reach of the kill) held them
    for as long as it lived, and the run hung with it. (The pipes are read
    for REAP_TIMEOUT after the kill: half a second here, not 5.)"""
    import threading

    from vgf_export import process_group

    monkeypatch.setattr(process_group, "REAP_TIMEOUT", 0.5)

    lasting = "117.3"  # seconds the descendant lives: a number no other sleep here uses
    command = [sys.executable, "-c", "import subprocess, time; "
               f"subprocess.Popen(['sleep', '{lasting}'], start_new_session=True); time.sleep(120)"]
    outcome = {}

    def call():
        try:
            process.run(command, timeout=1, capture_output=True)
        except subprocess.TimeoutExpired as error:
            outcome["error"] = error

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(30)
    waiting = thread.is_alive()
    subprocess.run(["pkill", "-f", f"sleep {lasting}"], check=False)
    assert not waiting, "process.run still waits on the pipes a descendant holds"
    assert isinstance(outcome.get("error"), subprocess.TimeoutExpired)


@pytest.mark.parametrize("venv_on_path", [True, False], ids=["venv-bin-on-PATH", "venv-bin-not-on-PATH"])
def test_a_tool_resolves_as_the_shell_would(venv_on_path, monkeypatch, tmp_path):
    """A bare name is looked up on PATH; a path is taken as it is; nothing
    else is guessed relative to the working directory."""
    from pathlib import Path

    tool = tmp_path / "bin" / "a-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}/usr/bin" if venv_on_path else "/usr/bin")
    monkeypatch.chdir(tmp_path)
    assert process.resolve_tool("a-tool") == (str(tool) if venv_on_path else None)
    assert process.resolve_tool(str(tool)) == str(tool)
    assert process.resolve_tool(str(Path("bin") / "missing")) is None and process.resolve_tool(None) is None

