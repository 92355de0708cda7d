"""NaN and infinity are values like any other: equal only to themselves and
outside every band otherwise, in the numerics bounds, the Vulkan check and
the golden comparison. An all-NaN float output fails all three."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from vgf_conformance.goldens import compliance
from vgf_conformance.oracles.compare import EXACT, FLOAT_UNIT, Bound, compare, signed_lsb
from vgf_conformance.oracles.vulkan.check import tensor_diff

NAN, INF = float("nan"), float("inf")
#: One bound of each mode: exact, per element with a bias bound, statistical.
BOUNDS = {"exact": EXACT, "per-element": Bound(1.0, bias_lsb=0.1),
          "outliers": Bound(1.0, outliers=0.05, outlier_max_lsb=3.0),
          "statistical": Bound(8.0, p99_lsb=2.0, min_snr_db=20.0)}


def _expected() -> torch.Tensor:
    return torch.linspace(-1, 1, 4 * 8 * 8).reshape(1, 4, 8, 8)


@pytest.mark.parametrize("bound", BOUNDS.values(), ids=BOUNDS.keys())
def test_an_all_nan_float_output_fails_every_bound(bound):
    expected = _expected()
    comparison = compare(expected, torch.full_like(expected, NAN), FLOAT_UNIT)
    assert comparison.max_lsb == INF and comparison.fraction_over(1e9) == 1.0
    assert bound.problems(comparison), comparison.describe()
    assert comparison.to_dict()["snr_db"] == "-inf"  # was recorded as "inf", the SNR of a bit-exact output


@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_one_nonfinite_element_fails_every_bound(value):
    expected = _expected()
    got = expected.clone()
    got[0, 1, 2, 3] = value
    comparison = compare(expected, got, FLOAT_UNIT)
    assert comparison.worst_index == (0, 1, 2, 3)
    assert all(bound.problems(comparison) for bound in BOUNDS.values())


def test_nonfinite_values_equal_themselves():
    values = np.array([NAN, INF, -INF, 0.5])
    assert not signed_lsb(values, values.copy(), FLOAT_UNIT).any()
    expected = torch.tensor([NAN, INF, -INF, 0.5])
    assert not EXACT.problems(compare(expected, expected.clone(), FLOAT_UNIT))
    assert math.isinf(signed_lsb(np.array([INF]), np.array([-INF]), FLOAT_UNIT)[0])


def test_an_all_nan_float_output_fails_the_vulkan_check():
    expected = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 8, 8, 1)
    diff = tensor_diff("v_out", np.full_like(expected, NAN), expected, "NHWC")
    assert diff.problem(float_bound=1.0) and diff.mismatches == expected.size
    both = tensor_diff("v_out", np.full_like(expected, NAN), np.full_like(expected, NAN), "NHWC")
    assert both.problem(float_bound=1.0) is None and both.mismatches == 0
    finite = tensor_diff("v_out", expected + FLOAT_UNIT * 0.5, expected, "NHWC")
    assert finite.problem(float_bound=1.0) is None


def _numerics(stats: dict) -> dict:
    return {"numerics": {"outputs": [{"unit": FLOAT_UNIT, "vs_float": stats}], "tosa_status": "TOSA_VALID"}}


def test_an_all_nan_float_output_fails_the_golden():
    """Against the golden of a bit-exact output (max 0, SNR "inf") too, which
    an all-NaN output matched when NaN was within every band."""
    expected = _expected()
    new = _numerics(compare(expected, torch.full_like(expected, NAN), FLOAT_UNIT).to_dict())
    new = json.loads(json.dumps(new))  # as the golden file holds it
    for got in (expected.clone(), expected + FLOAT_UNIT * 0.25):
        stored = json.loads(json.dumps(_numerics(compare(expected, got, FLOAT_UNIT).to_dict())))
        verdict = compliance.compare(stored, new)
        assert {f.path.rsplit(".", 1)[-1] for f in verdict.findings} >= {"max_lsb", "mean_lsb", "snr_db"}


@pytest.mark.parametrize("stored,new", [(1.0, NAN), (NAN, 1.0), (1.0, INF), (INF, 1.0), (-INF, INF)])
def test_a_nonfinite_statistic_is_outside_its_band(stored, new):
    verdict = compliance.compare(_numerics({"bias_lsb": stored}), _numerics({"bias_lsb": new}))
    assert [f.mode for f in verdict.findings] == ["stat_lsb"], verdict.messages()


def test_a_nan_statistic_matches_a_stored_nan():
    golden = json.loads(json.dumps(_numerics({"bias_lsb": NAN, "snr_db": INF})))
    assert compliance.compare(golden, json.loads(json.dumps(golden))).matches


@pytest.mark.parametrize("before,after", [("max_val=inf", "max_val=6.0"), ("min_val=0.0", "min_val=-inf"),
                                          ("max_val=inf", "max_val=nan")])
def test_a_float_attribute_that_becomes_or_leaves_infinity_is_a_change(before, after):
    """A ReLU that became a ReLU6 (a CLAMP's max from inf to 6.0); a lower
    bound that fell to -inf."""
    line = "op[0] CLAMP(min_val=0.0 max_val=inf) FP32[1x4] -> FP32[1x4] <- graph_input[0]"
    stored = {"tosa": [{"delegate": 0, "ops": [line]}]}
    new = {"tosa": [{"delegate": 0, "ops": [line.replace(before, after)]}]}
    verdict = compliance.compare(stored, new)
    assert not verdict.matches and verdict.findings[0].op == "CLAMP", verdict.messages()
    assert compliance.compare(stored, json.loads(json.dumps(stored))).matches
