"""Stack coverage: the lines and branches of the stack each case's export reaches
(vgf_conformance/harness/measurements/stack_coverage.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vgf_conformance.harness.schedule import stack_reach
from vgf_conformance.harness.schedule.coverage import pick
from vgf_conformance.harness.measurements.stack_coverage import StackCoverage, reached, summary
from vgf_export import names

REPO = Path(__file__).resolve().parent.parent


def test_each_cases_lines_are_recorded_under_its_run_key_and_nothing_outside_a_case(tmp_path):
    recorder = StackCoverage(tmp_path, "gw0")
    with recorder.context("case-a"):
        names.delegate_file_name(1, names.VGF_BACKEND, "vgf")
    names.DelegateFile.parse("07_grid_sampler.json")  # outside any case: not recorded
    with recorder.context("flow/case-b"):
        names.DelegateFile.parse("01_vgf.vgf")
    recorder.save()
    by_case = reached(tmp_path)
    assert set(by_case) == {"case-a", "flow/case-b"}
    a, b = by_case["case-a"]["lines"], by_case["flow/case-b"]["lines"]
    assert a and b and all(line.startswith("vgf_export/names.py:") for line in a | b)
    assert not a & b and by_case["flow/case-b"]["arcs"]  # each case's own lines, and its branches
    assert summary(by_case)["lines"] == {"reached": len(a | b), "by every case": 0, "by one case": len(a | b),
                                        "by 2 to 5 cases (not every)": 0}


def test_recording_before_the_stack_is_imported_leaves_torch_importable(tmp_path):
    """coverage.py imports its source packages to look them up and drops them
    again; torch, imported with them, could then not be imported (its C
    extension twice in one process). A fresh process: here torch is imported."""
    code = ("import sys\nfrom pathlib import Path\n"
            "from vgf_conformance.harness.measurements.stack_coverage import StackCoverage\n"
            "from vgf_export import names\nassert 'torch' not in sys.modules\n"
            "recorder = StackCoverage(Path(sys.argv[1]), 'gw0')\n"
            "with recorder.context('case-a'):\n    names.delegate_file_name(1, names.VGF_BACKEND, 'vgf')\n"
            "import torch\nprint(torch.ones(1).item())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "1.0", done.stderr[-2000:]


def test_a_directory_without_data_says_how_to_make_it(tmp_path):
    with pytest.raises(ValueError, match="a run with --vgf-stack-coverage"):
        reached(tmp_path)


# ---------------------------------------------------------------------------
# The recorded reach (vgf_conformance/stack_coverage.json) and the tier it chooses
# ---------------------------------------------------------------------------
def _by_case(**lines):
    """Run key -> its lines ("f.py:N") and no branches, from ``a="f.py:1 f.py:2"``."""
    return {case.replace("_", "-"): {"lines": set(text.split()), "arcs": set()} for case, text in lines.items()}


def test_line_ranges_round_trip():
    units = ["b.py:3", "a/x.py:10", "a/x.py:11", "a/x.py:12", "a/x.py:15", "b.py:1"]
    assert stack_reach.line_ranges(units) == ["a/x.py:10-12,15", "b.py:1,3"]
    assert sorted(stack_reach.lines_of(stack_reach.line_ranges(units))) == sorted(units)


def test_lines_reached_by_every_case_weigh_nothing_and_the_rest_are_grouped_by_who_reaches_them(tmp_path):
    by_case = _by_case(a="f.py:1 f.py:2 f.py:3", b="f.py:1 f.py:2 f.py:4", c="f.py:1 f.py:4 f.py:5")
    recorded = stack_reach.record(by_case, {"executorch": "1"})
    assert recorded["by_every_case"] == {"lines": 1, "arcs": 0}  # f.py:1
    groups = {tuple(g["lines"]): g for g in recorded["groups"]}
    assert recorded["cases"] == ["a", "b", "c"]  # groups name them by index
    assert groups[("f.py:2",)]["all_but"] == [2]  # more than half of the cases: the others named
    assert groups[("f.py:4",)]["all_but"] == [0] and groups[("f.py:3",)]["cases"] == [0]
    path = tmp_path / "stack_coverage.json"
    path.write_text(json.dumps(recorded))
    reach = stack_reach.load(path)
    assert reach.total == 5 and reach.reached_by({"a"}) == 3 and reach.reached_by({"a", "c"}) == 5
    assert [g.lines for g in reach.left_out({"a"})] == [("f.py:4",), ("f.py:5",)]
    assert reach.elements()["c"] == {f"stack#{i}" for i, g in enumerate(reach.groups) if "c" in g.cases}
    # Every line the matrix reaches, what every case reaches included (the explorer's reference).
    assert recorded["every_case_lines"] == ["f.py:1"]
    assert reach.lines() == {f"f.py:{n}" for n in range(1, 6)}


def test_a_bad_recorded_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="no such file .* --record"):
        stack_reach.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"cases": []}')
    with pytest.raises(ValueError, match="bad.json: not a recorded stack coverage"):
        stack_reach.load(tmp_path / "bad.json")


def test_the_cover_takes_the_features_whatever_they_cost_and_the_stack_within_the_budget():
    seconds = {"cheap": 1.0, "feature": 50.0, "stack-a": 10.0, "stack-b": 30.0}.get
    by_case = {"cheap": frozenset({"f1"}), "feature": frozenset({"f2"}),
               "stack-a": frozenset({"stack#0"}), "stack-b": frozenset({"stack#1"})}
    weights = {"stack#0": 5, "stack#1": 100}
    weight = lambda name: weights.get(name, 1.0)  # noqa: E731
    picked = pick(by_case, seconds, weight=weight, optional=lambda name: name.startswith("stack#"), budget=70)
    assert picked == ["cheap", "feature", "stack-a"]  # stack-b would pass 70 s (51 + 10 + 30)
    assert pick(by_case, seconds, weight=weight, optional=lambda name: name.startswith("stack#"),
                budget=100) == ["cheap", "feature", "stack-a", "stack-b"]
