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
