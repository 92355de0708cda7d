"""Each way the suite grows is one entry in one place: an oracle (here), a
family (tests/test_families.py), a golden section (tests/test_golden_sections.py);
and a failure says whose it is: the toolchain's, the case's or the harness's."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from vgf_conformance import test_cases as suite
from vgf_conformance.cases import CASES, FAMILIES, Expectation
from vgf_conformance.harness.reporting import records, summary
from vgf_conformance.harness.execution import runner
from vgf_conformance.harness.execution.runner import CaseFailure, run_case
from vgf_conformance.oracles.compare import Bound
from vgf_conformance.oracles.references import ORACLES, Oracle, float_model


def _request():
    return SimpleNamespace(node=SimpleNamespace(user_properties=[]),
                           config=SimpleNamespace(getoption=lambda name: False))


def _negated(subject):
    return [-x for x in float_model(subject)]


def test_an_oracle_is_one_entry(monkeypatch, tmp_path):
    """A toy oracle (the float model negated), added to ORACLES alone, gets a
    test, a bound, a report key, a golden entry and an Expectation check."""
    monkeypatch.setitem(ORACLES, "vs_negated", Oracle("vs_negated", "the float model negated", _negated,
                                                      Bound(1.0)))
    case = FAMILIES["resize"].finish(CASES["resize-bilinear-ac0-up2-int8io"])  # tolerances resolve at build
    assert "test_numerics_vs_negated" in suite.numerics_tests()
    assert case.get_tolerance().bounds["vs_negated"] == Bound(1.0)
    assert Expectation("run", "x", "y", checks=("vs_negated",)).applies_to("test_numerics_vs_negated")

    run = run_case(case, tmp_path)
    assert "vs_negated" in run.numerics.to_dict()["outputs"][0]
    assert "vs_negated" in run.golden["numerics"]["outputs"][0]
    with pytest.raises(CaseFailure, match=r"against the float model negated[\s\S]*vs_negated: max error"):
        suite.numerics_tests()["test_numerics_vs_negated"](run, _request())
    record = {**run.summary(), "tests": {"test_numerics_vs_negated": "failed"}}
    rows = summary.tolerance_margins([records.CaseRecord.from_dict(
        {**record, "outcome": "failed"}).__dict__])
    assert any(r["comparison"] == "vs_negated" for r in rows)


def test_a_case_that_cannot_be_built_is_the_cases_failure(tmp_path):
    def broken():
        raise RuntimeError("no such model")

    case = dataclasses.replace(CASES["resize-bilinear-ac0-up2-int8io"], model=broken)
    run = run_case(case, tmp_path)
    assert run.failure.origin == runner.CASE and run.failure.stage == "export"
    with pytest.raises(CaseFailure, match="the case's definition failed, not the toolchain"):
        run.require_export()
    assert run.summary()["origin"] == "case"


def test_a_harness_bug_in_the_numerics_is_not_blamed_on_executorch(tmp_path, monkeypatch):
    def broken(case, result, *built):
        raise KeyError("a bug of the oracles")

    monkeypatch.setattr(runner, "measure", broken)
    run = run_case(CASES["resize-bilinear-ac0-up2-int8io"], tmp_path)
    run.require_export()  # the export itself is fine
    assert run.failure.origin == runner.HARNESS and run.failure.stage == "run"
    with pytest.raises(CaseFailure, match="the suite's harness failed, not the toolchain"):
        run.require_numerics()


def test_a_golden_that_cannot_be_built_fails_test_golden_alone(tmp_path, monkeypatch):
    """The golden's builder breaking fails test_golden as a harness failure;
    the numerics still run and still decide their own tests."""
    def broken(*args, **kwargs):
        raise ValueError("golden builder bug")

    monkeypatch.setattr(runner, "build_golden", broken)
    run = run_case(CASES["resize-bilinear-ac0-up2-int8io"], tmp_path)
    assert run.failure is None and run.numerics is not None
    assert run.golden_failure.origin == runner.HARNESS
    with pytest.raises(CaseFailure, match="harness failed[\\s\\S]*golden builder bug"):
        run.require_golden()
    for test in suite.numerics_tests().values():
        test(run, _request())  # pass: the golden's failure does not mask them


def test_a_numerics_failure_stays_visible_when_the_golden_also_breaks(tmp_path, monkeypatch):
    def wrong(case, result, *built):
        raise KeyError("oracle bug")

    monkeypatch.setattr(runner, "measure", wrong)
    monkeypatch.setattr(runner, "build_golden", lambda *a, **k: (_ for _ in ()).throw(ValueError("golden bug")))
    run = run_case(CASES["resize-bilinear-ac0-up2-int8io"], tmp_path)
    with pytest.raises(CaseFailure, match="oracle bug"):
        run.require_numerics()
    with pytest.raises(CaseFailure, match="golden bug"):
        run.require_golden()


def test_the_report_schema_refuses_unknown_fields_and_merge_keeps_every_field():
    full = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(records.CaseRecord) if f.name != "id"}
    one = records.build_report({"a": {**full, "tests": {"test_export": "passed"}, "pte": {"delegates": []}}})
    merged = records.merge_reports([one])
    assert merged == one and set(merged["cases"][0]) == {f.name for f in dataclasses.fields(records.CaseRecord)}
    with pytest.raises(ValueError, match=r"unknown fields \['surprise'\]"):
        records.build_report({"a": {"surprise": 1}})
    with pytest.raises(ValueError, match="unknown fields"):
        records.merge_reports([{"cases": [{"id": "a", "surprise": 1}], "workarounds": []}])


def test_tolerance_sources_name_the_family_and_the_oracle_default():
    tolerance = CASES["grid-rgba-bilinear-zeros-ac0-identity-int8io"].get_tolerance()
    assert tolerance.bounds["vs_float"].max_lsb == 1.35  # the family's own
    assert tolerance.bounds["vs_float_dq"] == ORACLES["vs_float_dq"].default  # the oracle's
    assert tolerance.sources["vs_float.max_lsb"] == "grid_sample default"
    assert tolerance.sources["vs_float_dq.max_lsb"] == "oracle default"
    assert tolerance.bounds["vs_fake_quant"].exact  # measured bit-exact


def test_a_vulkan_divergence_can_be_a_strict_expectation():
    expect = Expectation("run", r"elements differ", "a known runtime difference", checks=("vulkan",))
    assert expect.applies_to("test_vulkan") and not expect.applies_to("test_numerics_vs_float")
    run = runner.CaseRun(case=dataclasses.replace(CASES["resize-bilinear-ac0-up2-int8io"], expect=expect),
                         artifacts=runner.Path("/nowhere"), stage="run")
    with pytest.raises(runner.ExpectedStageFailure, match="a known runtime difference"):
        run.fail_check("vulkan", "Vulkan", "v_out (int8): 3 of 96 elements differ")
    with pytest.raises(CaseFailure, match="stage 'run', Vulkan"):
        run.fail_check("vulkan", "Vulkan", "the runner crashed")
