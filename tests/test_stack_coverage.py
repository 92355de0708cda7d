"""Stack coverage: the lines and branches of the stack each case's export reaches
(vgf_conformance/harness/measurements/stack_coverage.py)."""

from __future__ import annotations

import pytest

from vgf_conformance.harness.measurements.stack_coverage import StackCoverage, reached, summary
from vgf_export import names


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


def test_a_directory_without_data_says_how_to_make_it(tmp_path):
    with pytest.raises(ValueError, match="a run with --vgf-stack-coverage"):
        reached(tmp_path)
