"""The slack table (python -m vgf_conformance slack): every numeric bound is
at most 1.5x the worst it was measured to need, none is dead, and the table
says so when a bound is loosened or stops deciding anything."""

from __future__ import annotations

import dataclasses

import pytest

from vgf_conformance.cases import BUILTIN_FAMILIES, build_table
from vgf_conformance.cases import family as family_module
from vgf_conformance.cases import tolerances
from vgf_conformance.harness.measurements.slack import MAX_RATIO, render, slack_table
from vgf_conformance.cases.tolerances import TRAITS, Trait, family_tolerance, resolve
from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR
from vgf_conformance.oracles.compare import Bound


def _rows(families=BUILTIN_FAMILIES):
    """The table over the cases ``families`` build now (tolerances resolve at build)."""
    cases = build_table(families).values()
    return {(r.source, r.comparison, r.field): r for r in slack_table(cases, families, BUILTIN_GOLDEN_DIR)}


def test_every_bound_is_at_most_1_5x_its_measured_worst_and_none_is_dead():
    rows = _rows()
    bad = [r for r in rows.values() if r.verdict in ("dead", "too loose", "exceeded")]
    assert not bad, (f"bounds that break the rule (ratio above {MAX_RATIO}, below 1, or dead); "
                     "python -m vgf_conformance slack prints the table:\n" + render(bad))
    assert rows[("grid_sample default", "vs_fake_quant", "max_lsb")].verdict == "exact"
    assert rows[("model-unet", "vs_fake_quant", "bias_lsb")].outputs == 1  # measured over seeds, bounded


def test_a_loosened_family_default_is_too_loose(monkeypatch):
    grid = family_module.FAMILIES["grid_sample"]
    loose = dataclasses.replace(grid, tolerance=family_tolerance(vs_fake_quant=Bound(0.0, bias_lsb=0.0),
                                                                 vs_float=Bound(3.0, bias_lsb=0.105)))
    monkeypatch.setitem(family_module.FAMILIES, "grid_sample", loose)
    row = _rows([loose if f.name == "grid_sample" else f for f in BUILTIN_FAMILIES])[
        ("grid_sample default", "vs_float", "max_lsb")]
    assert row.verdict == "too loose" and row.ratio > 3.0 / 0.93 - 0.01, row


def test_a_bound_tighter_than_its_measurement_is_exceeded(monkeypatch):
    split = TRAITS["split-resize"]
    monkeypatch.setitem(TRAITS, "split-resize", dataclasses.replace(
        split, loosen={**split.loosen, "vs_float_dq": dict(max_lsb=2.2)}))
    row = _rows()[("split-resize", "vs_float_dq", "max_lsb")]
    assert row.verdict == "exceeded" and row.worst == 2.5, row


def test_a_trait_that_decides_no_output_is_dead(monkeypatch):
    monkeypatch.setitem(TRAITS, "unused", Trait("decides nothing", loosen={"vs_float": dict(max_lsb=9.0)}))
    assert _rows()[("unused", "vs_float", "max_lsb")].verdict == "dead"


def test_a_stated_bound_narrows_the_fields_it_names_and_keeps_the_others(monkeypatch):
    monkeypatch.setitem(TRAITS, "stating", Trait("a model", states={
        "vs_fake_quant": dict(max_lsb=4.0, p99_lsb=1.0)}))
    base = family_tolerance(vs_fake_quant=Bound(1.0, bias_lsb=0.2))
    tolerance = resolve(base, "family default", {"stating"}, "int8")
    bound = tolerance.bounds["vs_fake_quant"]
    assert (bound.max_lsb, bound.p99_lsb, bound.bias_lsb) == (4.0, 1.0, 0.2)  # the bias stays bounded
    assert tolerance.sources["vs_fake_quant.bias_lsb"] == "family default"
    assert tolerance.sources["vs_fake_quant.max_lsb"] == "stating"


def test_a_family_without_a_default_needs_a_trait_stating_every_comparison(monkeypatch):
    monkeypatch.setitem(TRAITS, "partial", Trait("a model", states={"vs_float": dict(max_lsb=4.0)}))
    with pytest.raises(ValueError, match=r"leaves \['vs_fake_quant', 'vs_float_dq'\] unbounded"):
        resolve(None, "models default", {"partial"}, "int8")
    assert tolerances.resolve(None, "models default", {"model-unet"}, "int8").bounds["vs_float"].bias_lsb > 0


def test_two_int8_steps_off_in_an_int8_internal_pipeline_fail_its_measured_bound():
    """An int16 output of an int8 program that is 2 int8 steps (516 int16
    LSB) off fake-quant on one element: within its split-resize bound x258
    (516.02), beyond the bound measured on int16 outputs (387)."""
    import torch

    from vgf_conformance.cases import CASES
    from vgf_conformance.oracles.compare import compare

    tolerance = CASES["resize-bilinear-ac0-down16-int16io"].get_tolerance(0)
    expected = torch.zeros(1, 4, 4, 5)
    got = expected.clone()
    got[0, 1, 2, 3] = 516 / 32767  # one int16 LSB is 1/32767
    message = tolerance.check(compare(expected, got, 1 / 32767), "vs_fake_quant")
    assert message and "516" in message, message
    assert tolerance.sources["vs_fake_quant.max_lsb"] == f"int8-internal {tolerances.SCALED_MEASURED}"
