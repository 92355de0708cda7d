"""What a candidate's stack changed and how much of it the run reaches
(vgf_conformance/harness/candidates/stack_changes.py), on two tiny source
trees and coverage data written by coverage.py itself."""

from __future__ import annotations

import json

import coverage
import pytest

from vgf_conformance.harness.candidates import compat, stack_changes
from vgf_conformance.harness.measurements.stack_coverage import reached

PASS = "executorch/backends/arm/_passes/rewrite.py"

# Line numbers differ between the sides: the candidate's module gains two
# statements at the top, so every function below moves down by 3 lines.
OLD_PASS = '''\
"""Rewrite."""


class RewritePass:
    def ratio(self, a, b):
        return a / b

    def params(self, size):
        if size > 1:
            return size * 2
        return size

    def unused(self):
        return 0


def helper(x):
    return x


def stable(x):
    x += 1
    return x


def dropped():
    return None
'''
NEW_PASS = '''\
"""Rewrite."""

import math
SCALE = 2


class RewritePass:
    def ratio(self, a, b):
        return a / b

    def params(self, size):
        if size > 1:
            return size * SCALE
        return size

    def unused(self):
        return 1


def helper(x):
    y = math.floor(x)
    return y


def stable(x):
    return x
'''
# The candidate's lines each case reaches (its numbering): case-a takes
# params's other branch, case-b runs helper's new lines, both reach the new file.
REACH = {"case-a": {PASS: [9, 12, 14, 26], "executorch/backends/arm/added.py": [2]},
         "case-b": {PASS: [21, 22], "executorch/backends/arm/added.py": [2]}}


def _tree(root, files):
    for where, text in files.items():
        (root / where).parent.mkdir(parents=True, exist_ok=True)
        (root / where).write_text(text)
    return root


@pytest.fixture
def sides(tmp_path):
    """Two site-packages and the candidate run's coverage data (contexts are run keys)."""
    same = "def keep():\n    return 1\n"
    base = _tree(tmp_path / "base" / "site-packages", {
        PASS: OLD_PASS, "executorch/exir/same.py": same, "executorch/exir/comments.py": "x = 1  # old\n",
        "executorch/backends/arm/removed.py": "def gone():\n    return 0\n",
        "executorch/backends/arm/test/test_rewrite.py": "def test_a():\n    pass\n",
        "executorch/exir/tests/helpers.py": "A = 1\n"})
    cand = _tree(tmp_path / "cand" / "site-packages", {
        PASS: NEW_PASS, "executorch/exir/same.py": same, "executorch/exir/comments.py": "x = 1  # new\n",
        "executorch/backends/arm/added.py": "def fresh():\n    return 2\n",
        "executorch/backends/arm/test/test_rewrite.py": "def test_a():\n    assert 1\n",
        "executorch/exir/tests/helpers.py": "A = 2\n", "executorch/backends/arm/test_new.py": "B = 1\n"})
    data_dir = tmp_path / "out" / "stack-coverage"
    data_dir.mkdir(parents=True)
    data = coverage.CoverageData(str(data_dir / ".coverage.gw0"))
    for case, files in REACH.items():
        data.set_context(case)
        data.add_lines({str(cand / where): lines for where, lines in files.items()})
    data.write()
    return base, cand, data_dir


def _by_function(changes):
    return {(f["file"], f["function"]): f for f in changes["functions"]}


def test_files_added_removed_changed_and_test_files_skipped(sides):
    base, cand, data_dir = sides
    changes = stack_changes.compare([base], [cand], reached(data_dir))
    assert changes["files"] == {"added": ["executorch/backends/arm/added.py"],
                                "removed": ["executorch/backends/arm/removed.py"],
                                "changed": [PASS], "unchanged": 2}  # same.py; comments.py changed a comment only
    assert changes["removed_functions"] == [f"{PASS}:dropped", "executorch/backends/arm/removed.py:gone"]
    assert "vgf_export" in changes["packages_not_found"]["candidate"]
    assert not any("test" in f["file"] for f in changes["functions"])


def test_each_changed_line_is_in_its_function_on_the_candidates_side(sides):
    """Line numbers are the candidate's (the old side's would put helper's
    change at 17-18 and params's at 10) and each change is in its own scope."""
    base, cand, data_dir = sides
    functions = _by_function(stack_changes.compare([base], [cand], reached(data_dir)))
    assert {key[1]: (f["changed_lines"], f["changed_executable"], f["lines_lost"], f["status"])
            for key, f in functions.items()} == {
        "<module>": ("3-4", 2, 0, "changed"),  # import math, SCALE = 2
        "RewritePass.params": ("13", 1, 0, "changed"),
        "RewritePass.unused": ("17", 1, 0, "changed"),
        "helper": ("21-22", 2, 0, "changed"),
        "stable": ("", 0, 1, "changed"),  # lost `x += 1`
        "fresh": ("1-2", 2, 0, "added")}
    assert (PASS, "RewritePass.ratio") not in functions  # moved down, not changed


def test_the_reach_of_each_changed_function(sides):
    base, cand, data_dir = sides
    changes = stack_changes.compare([base], [cand], reached(data_dir))
    functions = {key[1]: (f["reached"], f["changed_reached"], f["cases"], f["cases_named"], f["cases_entering"])
                 for key, f in _by_function(changes).items()}
    assert functions == {
        "<module>": (False, 0, 0, [], 0),  # import time: not recorded
        "RewritePass.params": (True, 0, 0, [], 1),  # case-a enters it, takes the other branch
        "RewritePass.unused": (False, 0, 0, [], 0),
        "helper": (True, 2, 1, ["case-b"], 1),
        "stable": (True, 0, 0, [], 1),
        "fresh": (True, 2, 2, ["case-a", "case-b"], 2)}  # its def line counts: the body is reached
    assert changes["summary"] == {"files changed": 1, "files added": 1, "files removed": 1, "functions changed": 6,
                                  "functions changed reached": 4, "changed executable lines": 8,
                                  "changed executable lines reached": 4, "cases": 2}


def test_the_command_writes_stable_json_and_the_unreached_first(sides, capsys, tmp_path):
    base, cand, _ = sides
    out = tmp_path / "out"
    argv = ["stack-changes", str(out), "--baseline", str(base), "--candidate", str(cand)]
    assert compat.main(argv) == 0
    assert "4 of them reached by the matrix (2 cases); changed executable lines reached: 4 / 8 (50.0 %)" in \
        capsys.readouterr().out
    text = (out / "stack-changes.json").read_text()
    assert str(tmp_path) not in text and json.loads(text)["summary"]["functions changed"] == 6
    assert json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n" == text
    compat.main(argv)
    assert (out / "stack-changes.json").read_text() == text
    md = (out / "stack-changes.md").read_text()
    missed, hit = md.index("## Changed functions the matrix does not reach (2)"), md.index(
        "## Changed functions the matrix reaches (4)")
    assert missed < md.index("`RewritePass.unused`") < hit and md.index("`<module>`") < hit
    # reached: the smallest share of changed lines reached first, lines removed only last
    rows = [line for line in md[hit:].splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `RewritePass.params`", "| `helper`",
                                                     "| `fresh` (not in the baseline)", "| `stable`"]
    assert rows[0].endswith("| 0 / 1 (13) | 0 (the function: 1) |")
    assert rows[2].endswith("| 2 / 2 (1-2) | 2: `case-a`, `case-b` |")
    assert rows[3].endswith("| 0 / 0, 1 removed | the function: 1 |")
    assert str(tmp_path) not in md


def test_the_tables_are_capped(sides, monkeypatch):
    base, cand, data_dir = sides
    monkeypatch.setattr(stack_changes, "TABLE_ROWS", 1)
    md = stack_changes.render(stack_changes.compare([base], [cand], reached(data_dir)))
    assert "+1 more (all in stack-changes.json)" in md and "+3 more (all in stack-changes.json)" in md


@pytest.mark.parametrize("which", ["--baseline", "--candidate", "--coverage"])
def test_a_bad_argument_is_named(sides, tmp_path, capsys, which):
    base, cand, _ = sides
    paths = {"--baseline": str(base), "--candidate": str(cand), "--coverage": str(tmp_path / "out" / "stack-coverage")}
    paths[which] = str(tmp_path / "missing")
    with pytest.raises(SystemExit):
        compat.main(["stack-changes", str(tmp_path / "out")] + [x for kv in paths.items() for x in kv])
    assert f"{which} {tmp_path / 'missing'}: no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    paths[which] = str(tmp_path / "empty")
    with pytest.raises(SystemExit):
        compat.main(["stack-changes", str(tmp_path / "out")] + [x for kv in paths.items() for x in kv])
    expected = "no .coverage.* data files" if which == "--coverage" else "holds none of executorch.backends.arm"
    assert f"{which} {tmp_path / 'empty'}: {expected}" in capsys.readouterr().err
