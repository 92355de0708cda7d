"""A hung case is stopped, not abandoned (vgf_conformance/harness/execution/hangs.py):
the worker ends itself after writing the case's note, and a hang that holds
the GIL is ended by faulthandler's deadline. Each in a child process: ending
is what they do. (The whole path under xdist, with a restarted worker and
the next cases running: tests/test_golden_keeping.py.)"""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vgf_conformance.harness.execution.batches import Batches
from vgf_conformance.harness.execution import hangs
from vgf_conformance.harness.execution.hangs import EXIT_STATUS, TRACE_CHARS, Notes
from vgf_conformance.harness.execution.runner import CaseTimeout

REPO = Path(__file__).resolve().parent.parent


def _child(code: str, notes: Path) -> subprocess.CompletedProcess:
    prelude = ("import time, ctypes\nfrom pathlib import Path\n"
               "from vgf_conformance.harness.execution import hangs\nfrom vgf_conformance.harness.execution.batches import Batches\n"
               f"notes = hangs.Notes(Path({str(notes)!r}))\n")
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_guarded_work_that_hangs_raises_where_no_worker_can_end():
    batches = Batches({}, {}, [], Path("unused"), case_timeout=0.5)
    with pytest.raises(CaseTimeout, match="did not finish within 0.5 s"):
        batches.guarded("a-case", "localize", time.sleep, 30)
    assert batches.guarded("a-case", "localize", sum, [1, 2]) == 3


def test_a_worker_ends_itself_for_a_hung_case_after_writing_its_note(tmp_path):
    done = _child("Batches({}, {}, [], Path('unused'), case_timeout=0.5, hangs=notes)"
                  ".guarded('a-case', 'localize', time.sleep, 30)\nprint('went on')", tmp_path)
    assert done.returncode == EXIT_STATUS and "went on" not in done.stdout, done.stderr
    stage, message = Notes(tmp_path).read("a-case")
    assert stage == "localize" and "had not finished after 0.5 s" in message
    assert Notes(tmp_path).read("another-case") is None


def test_a_hang_holding_the_gil_is_ended_with_every_threads_stack(tmp_path):
    # C's sleep() through PyDLL keeps the GIL: no Python watchdog can run.
    done = _child("hangs.GRACE = 0.5\n"
                  "def holds_the_gil():\n    ctypes.PyDLL(None).sleep(60)\n"
                  "with notes.deadline('a-case', 0.5):\n    holds_the_gil()\nprint('went on')", tmp_path)
    assert done.returncode == EXIT_STATUS and "went on" not in done.stdout, done.stderr
    stage, message = Notes(tmp_path).read("a-case")
    assert stage is None and "holding the GIL" in message and "holds_the_gil" in message, message


def test_a_case_that_ends_in_time_leaves_no_note(tmp_path):
    with Notes(tmp_path).deadline("a-case", 30):
        pass
    assert Notes(tmp_path).read("a-case") is None and not list(tmp_path.iterdir())


def test_a_long_stack_trace_keeps_the_cases_own_thread(tmp_path):
    # faulthandler lists the newest thread first: the case's, started for its run.
    # A worker's plumbing (pytest, execnet) follows, longer under a long install path.
    plumbing = "".join(f'  File "/a/long/install/path/site-packages/_pytest/m{i}.py", line 1 in f\n'
                       for i in range(600))
    (tmp_path / "a-case.trace").write_text('Thread 0x1 (most recent call first):\n'
                                           '  File "conftest.py", line 9 in _holds_the_gil\n\n'
                                           f'Thread 0x2 (most recent call first):\n{plumbing}')
    stage, message = Notes(tmp_path).read("a-case")
    assert stage is None and "in _holds_the_gil" in message
    assert "more characters of the trace cut" in message and len(message) < TRACE_CHARS + 500


def test_the_hard_deadline_follows_a_short_timeout():
    """A short --vgf-case-timeout gets a grace as short (a test's 5 s hang is
    ended in 10 s, not 15), never under MIN_GRACE; a long one GRACE."""
    assert hangs.grace(600) == hangs.GRACE
    assert hangs.grace(5) == 5
    assert hangs.grace(0.5) == hangs.MIN_GRACE


def test_the_controller_makes_its_notes_directory_only_for_workers(pytester):
    """A run without xdist has no worker to end: no directory is made (one
    was made for every configured run, and left behind by those that never
    finished, e.g. a killed run)."""
    from types import SimpleNamespace

    from vgf_conformance.harness.execution.hangs import NOTES_KEY
    from vgf_conformance.harness.plugin.recording import CaseReport

    report = CaseReport(pytester.parseconfig("-p", "vgf_conformance", "-p", "no:cacheprovider"))
    assert report.hangs.directory is None and report.hangs.read("a-case") is None
    nodes = [SimpleNamespace(workerinput={}) for _ in range(2)]
    for node in nodes:
        report.pytest_configure_node(node)
    directory = report.hangs.directory
    assert directory.is_dir() and {node.workerinput[NOTES_KEY] for node in nodes} == {str(directory)}
    report.hangs.remove()
    assert not directory.exists()
