"""The error-statistics check (vgf_conformance.goldens.statistics): a drift of
the error distribution beyond the measured cross-machine band fails, says
which way and how far, and noise within the band does not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from vgf_conformance.goldens.compliance import BANDS
from vgf_conformance.goldens.statistics import statistics_drift

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "cases" / "a16w8-conv-resize-conv-up2-int16io.json"


def _numerics() -> dict:
    return json.loads(GOLDEN.read_text())["numerics"]


def test_a_golden_matches_itself():
    drifts, compared = statistics_drift(_numerics(), _numerics())
    assert drifts == [] and compared == 20  # 4 oracles x 5 statistics


def test_a_one_lsb_bias_shift_fails_and_says_which_way():
    shifted = copy.deepcopy(_numerics())
    shifted["outputs"][0]["vs_fake_quant"]["bias_lsb"] += 1.0
    (drift,), _ = statistics_drift(_numerics(), shifted)
    assert (drift.output, drift.oracle, drift.statistic) == (0, "vs_fake_quant", "bias_lsb")
    message = drift.describe()
    assert "bias_lsb 0.01 -> 1.01 (moved +1 LSB, beyond the band 0.008 LSB)" in message, message
    assert "moved up on average" in message and "stat_lsb" in message


def test_drift_inside_the_measured_band_passes_and_one_step_past_it_fails():
    band = BANDS["stat_lsb"].limit
    for moved, fails in ((band, False), (band + 0.001, True)):
        shifted = copy.deepcopy(_numerics())
        shifted["outputs"][0]["vs_float"]["mean_lsb"] = round(shifted["outputs"][0]["vs_float"]["mean_lsb"] + moved, 3)
        drifts, _ = statistics_drift(_numerics(), shifted)
        assert bool(drifts) is fails, (moved, drifts)


def test_an_exact_match_that_loses_its_infinite_snr_fails():
    stored = {"outputs": [{"vs_float": {"max_lsb": 0.0, "snr_db": "inf"}, "unit": 0.1}]}
    assert statistics_drift(stored, stored) == ([], 2)
    new = {"outputs": [{"vs_float": {"max_lsb": 1.0, "snr_db": 48.1}, "unit": 0.1}]}
    drifts, _ = statistics_drift(stored, new)
    assert [d.statistic for d in drifts] == ["max_lsb", "snr_db"]
    assert "the signal-to-noise ratio fell" in drifts[1].describe()


def test_nothing_to_compare_is_said_not_passed():
    assert statistics_drift({"error": "[run] ..."}, {"error": "[run] ..."}) == ([], 0)


def _failed_run(case_id: str, message: str):
    from vgf_conformance.cases import CASES
    from vgf_conformance.harness.execution.runner import CaseRun, StageFailure

    stored = json.loads((GOLDEN.parent / f"{case_id}.json").read_text())
    return CaseRun(CASES[case_id], Path("artifacts"), "run", failure=StageFailure("run", "LoweredRunError", message),
                   result=object(), golden={"numerics": stored["numerics"]})


def test_a_run_that_failed_as_expected_is_an_expected_failure_not_a_skip():
    """Where the run stage failed there are no statistics: the check says so
    as the numerics checks do (xfail under the case's expectation, else a
    failure), never as a skip, which hides a check (and fails a strict run)."""
    import pytest

    from vgf_conformance import checks
    from vgf_conformance.harness.execution.runner import CaseFailure, ExpectedStageFailure

    case_id = "resize-bicubic-ac0-up2-int8io"
    expected = ("delegate 0 (VgfBackend): TOSA reference model: BAD_INPUT; input[0] (x): "
                "dtype float32, graph wants INT8 (int8)")
    with pytest.raises(ExpectedStageFailure, match="BAD_INPUT"):
        checks.statistics(_failed_run(case_id, expected))
    with pytest.raises(CaseFailure, match="failed at stage 'run'"):
        checks.statistics(_failed_run(case_id, "delegate 0 (VgfBackend): TOSA reference model: ERROR"))
