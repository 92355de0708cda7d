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
        process.run([sys.executable, "-c", SPAWNS, str(pidfile)], timeout=5, capture_output=True)
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
