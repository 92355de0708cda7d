"""The model tier's statistical bounds: what they are, where they come from,
and that they fail on the faults they exist for (a delegate's output shifted
by a few LSB on 5 % of its elements; noise that lowers the SNR), which the
per-element max cap alone lets through."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from vgf_conformance import test_cases as suite
from vgf_conformance.cases import CASES
from vgf_conformance.cases.family import FAMILIES
from vgf_conformance.cases.model_bounds import MODEL_BOUNDS
from vgf_conformance.cases.tolerances import TRAITS, resolve
from vgf_conformance.harness.reporting.records import render_markdown
from vgf_conformance.harness.execution.runner import CaseFailure, run_case
from vgf_conformance.oracles import delegates as delegates_module
from vgf_conformance.oracles.compare import Bound, compare

CASE = "model-superres-x2-32x48-int8io"  # the cheapest model with a VGF delegate (about 4 s)
NUMERICS = (suite.test_numerics_vs_fake_quant, suite.test_numerics_vs_float_dq, suite.test_numerics_vs_float)


def _request():
    return SimpleNamespace(node=SimpleNamespace(user_properties=[]),
                           config=SimpleNamespace(getoption=lambda name: False))


def _failures(run) -> dict[str, str]:
    failed = {}
    for test in NUMERICS:
        try:
            test(run, _request())
        except (AssertionError, CaseFailure) as error:
            failed[test.__name__] = str(error)
    return failed


def _perturb_delegates(monkeypatch, change) -> None:
    """Every VGF delegate's int8 outputs go through ``change(array, rng)``."""
    real = delegates_module.run_tosa_in_child_ex
    rng = np.random.default_rng(0)

    def perturbed(flatbuffer, inputs, timeout, **options):
        result = real(flatbuffer, inputs, timeout, **options)
        outputs = [np.clip(change(o.astype(np.int32), rng), -127, 127).astype(o.dtype) for o in result.outputs]
        return dataclasses.replace(result, outputs=outputs)

    monkeypatch.setattr(delegates_module, "run_tosa_in_child_ex", perturbed)


# --- the bound itself --------------------------------------------------------
def test_a_statistical_bound_checks_p99_and_snr_beside_the_max_cap():
    expected = torch.linspace(-1, 1, 1000)
    unit = 1 / 127
    got = expected.clone()
    got[:50] += 3 * unit  # 5 % of the elements 3 LSB off
    comparison = compare(expected, got, unit)
    assert Bound(4.0).problems(comparison) == []  # the per-element cap lets it through
    problems = Bound(4.0, p99_lsb=2.0).problems(comparison)
    assert len(problems) == 1 and "99th-percentile error 3.000 LSB > 2 LSB" in problems[0]
    noisy = compare(expected, expected + torch.randn(1000, generator=torch.Generator().manual_seed(0)) * unit,
                    unit)
    assert Bound(5.0, min_snr_db=50.0).problems(noisy)[0].startswith("SNR ")
    assert Bound(5.0, min_snr_db=30.0).problems(noisy) == []


def test_a_p99_bound_above_the_max_cap_is_refused():
    with pytest.raises(ValueError, match="p99_lsb .* above max_lsb"):
        Bound(1.0, p99_lsb=2.0)


def test_every_model_case_states_its_measured_bounds():
    models = [c for c in CASES.values() if c.family == "models"]
    # Three quick by feature, the super-resolution model by the stack lines only it reaches (issue 45).
    assert {c.id for c in models if c.quick} == set(FAMILIES["models"].quick) and len(FAMILIES["models"].quick) == 4
    assert {t.removeprefix("model-") for c in models for t in c.traits} == set(MODEL_BOUNDS)
    for case in models:
        for output in range(len(case.output_qspecs)):
            tolerance = case.get_tolerance(output)
            for what in ("vs_float_dq", "vs_float"):
                bound = tolerance.bounds[what]
                assert bound.p99_lsb is not None and bound.min_snr_db is not None, (case.id, what)
                assert tolerance.sources[f"{what}.min_snr_db"].startswith("model-")
            assert tolerance.bounds["vs_fake_quant"].p99_lsb is not None


def test_a_case_may_have_only_one_trait_that_states_bounds():
    family = FAMILIES["models"]
    with pytest.raises(ValueError, match="each state bounds"):
        resolve(family.tolerance, "models default", {"model-unet", "model-ifnet"}, "int8")


def test_a_loosening_trait_lowers_an_snr_floor_only_downwards(monkeypatch):
    from vgf_conformance.cases.tolerances import Trait

    floor = TRAITS["model-unet"].states["vs_float"]["min_snr_db"]
    monkeypatch.setitem(TRAITS, "lower", Trait("test", loosen={"vs_float": dict(min_snr_db=floor - 5)}))
    monkeypatch.setitem(TRAITS, "higher", Trait("test", loosen={"vs_float": dict(min_snr_db=floor + 5)}))
    family = FAMILIES["models"].tolerance
    assert resolve(family, "d", {"model-unet", "higher"}, "int8").bounds["vs_float"].min_snr_db == floor
    lowered = resolve(family, "d", {"model-unet", "lower"}, "int8")
    assert lowered.bounds["vs_float"].min_snr_db == floor - 5 and lowered.sources["vs_float.min_snr_db"] == "lower"


def test_the_report_shows_each_models_statistics_against_its_bounds():
    tolerance = CASES[CASE].get_tolerance()
    stats = {"max_lsb": 1.9, "mean_lsb": 0.4, "p99_lsb": 1.3, "bias_lsb": 0.05, "snr_db": 41.0}
    case = {"id": CASE, "family": "models", "outcome": "passed", "golden_changed": [],
            "numerics": {"outputs": [{w: stats for w in ("vs_fake_quant", "vs_float_dq", "vs_float")}]},
            "tolerances": [tolerance.to_dict() | {"sources": tolerance.sources}]}
    text = render_markdown({"cases": [case]})
    assert "## Statistical bounds" in text
    bound = tolerance.bounds["vs_float"]
    assert (f"| {CASE}#0 | vs_float | 41.0 (>= {bound.min_snr_db:g}) | 1.3 (<= {bound.p99_lsb:g}) | "
            f"1.9 (<= {bound.max_lsb:g}) |") in text


# --- planted faults, through the suite's own tests ---------------------------
def test_the_unbroken_model_passes_and_its_golden_statistics_are_coarse(tmp_path):
    run = run_case(CASES[CASE], tmp_path)
    assert _failures(run) == {}
    assert run.numerics.statistical == [True]
    stats = run.numerics.to_dict()["outputs"][0]["vs_float"]
    assert stats["snr_db"] * 2 == int(stats["snr_db"] * 2) and round(stats["p99_lsb"], 1) == stats["p99_lsb"]


def test_a_few_lsb_on_five_percent_of_a_delegates_output_fails_the_p99_bounds(tmp_path, monkeypatch):
    def shift(values, rng):
        return values + 3 * (rng.random(values.shape) < 0.05)

    _perturb_delegates(monkeypatch, shift)
    run = run_case(CASES[CASE], tmp_path)
    failed = _failures(run)
    assert set(failed) == {t.__name__ for t in NUMERICS}, failed
    for message in failed.values():
        assert "99th-percentile error" in message and CASE in message and "stage 'run'" in message


def test_noise_that_lowers_the_snr_fails_the_snr_floor(tmp_path, monkeypatch):
    def noise(values, rng):
        return values + np.rint(rng.normal(0.0, 1.5, values.shape)).astype(np.int32)

    _perturb_delegates(monkeypatch, noise)
    run = run_case(CASES[CASE], tmp_path)
    failed = _failures(run)
    for test in ("test_numerics_vs_float_dq", "test_numerics_vs_float"):
        assert "SNR" in failed[test] and "dB <" in failed[test], failed
