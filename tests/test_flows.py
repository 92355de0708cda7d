"""Flows: one case table, several ways of lowering it (vgf_conformance/cases/flows.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from vgf_conformance.cases import CASES, TABLE
from vgf_conformance.cases.flows import FLOWS, GATING_FLOWS, PROJECT_GRID_OPTIONS, check_flows, expand
from vgf_conformance.goldens import store
from vgf_conformance.goldens.stale import golden_files, stale_goldens
from vgf_conformance.harness.plugin.recording import case_command
from vgf_conformance.harness.plugin.session import Session, skip_outside_flow
from vgf_conformance.harness.reporting.skips import declared_as
from vgf_conformance.review.sources import run_key_of
from vgf_conformance.text import DEFAULT_FLOW

WITHOUT = "without-bilinear-scale-factor"
NATIVE = "upstream-grid-sampler"
RESIZE = "resize-bilinear-ac0-in10x13-s7_10-int8io"
GRID = "grid-rgb-bilinear-zeros-ac0-identity-int8io"


def test_the_default_flow_is_the_table_itself_under_its_own_ids():
    default = FLOWS[DEFAULT_FLOW]
    assert default.gates and default.run(TABLE[RESIZE]) is TABLE[RESIZE]
    assert {key: case for key, case in CASES.items() if case.flow == DEFAULT_FLOW} == TABLE
    assert set(GATING_FLOWS) == {DEFAULT_FLOW, WITHOUT}


def test_a_run_of_another_flow_is_the_same_case_lowered_its_way():
    case, run = TABLE[RESIZE], CASES[f"{WITHOUT}/{RESIZE}"]
    assert run.id == f"{WITHOUT}/{RESIZE}" and run.case_id == RESIZE and run.flow == WITHOUT
    assert run.options["disable_workarounds"] == ("bilinear-scale-factor",)
    assert all(torch.equal(a, b) for a, b in zip(run.make_inputs(), case.make_inputs()))  # seeded by the case's id
    assert case.expect is None and run.expect.stage == "run" and run.quick and not case.quick
    assert {k: v for k, v in run.describe().items() if k not in ("flow", "options")} == \
        {k: v for k, v in case.describe().items() if k != "options"}


def test_a_flow_adds_its_workarounds_to_the_cases_own_and_drops_what_its_lowering_has_no_use_for():
    grid = TABLE[GRID]
    native = FLOWS[NATIVE].run(grid)
    assert native.options["grid_sampler_lowering"] == "upstream"
    assert not set(PROJECT_GRID_OPTIONS) & set(native.options)
    own = grid.__class__(**{**grid.__dict__, "options": {"disable_workarounds": ("resize-split",)}})
    assert FLOWS[WITHOUT].run(own).options["disable_workarounds"] == ("resize-split", "bilinear-scale-factor")


def test_flows_are_chosen_by_name_and_an_unknown_one_is_refused_with_the_list():
    assert check_flows(["all"]) == tuple(FLOWS)
    assert check_flows([NATIVE, NATIVE]) == (NATIVE,)
    with pytest.raises(ValueError, match=rf"--vgf-flow: no flow 'native'; the flows are vgf, {WITHOUT}, without-resize-split, {NATIVE}"):
        check_flows(["native"])
    runs = expand(TABLE, [NATIVE])
    assert runs and all(key == f"{NATIVE}/{case.case_id}" for key, case in runs.items())
    assert all(case.family == "grid_sample" or case.case_id.startswith(("flow-warp-", "basegrid-flow-"))
               for case in runs.values())


def _config(flows=(), case=()):
    values = {"--vgf-cases": [], "--vgf-flow": list(flows), "--vgf-case": list(case)}
    return SimpleNamespace(getoption=values.__getitem__, getini=lambda name: [], stash={})


def test_a_run_lowers_the_gating_flows_unless_told_and_a_case_of_another_flow_says_so():
    assert Session(_config()).cases() == CASES
    native = Session(_config([NATIVE])).cases()
    assert native and all(case.flow == NATIVE for case in native.values())
    assert set(Session(_config()).cases(whole=True)) == set(expand(TABLE, FLOWS))
    with pytest.raises(pytest.UsageError, match="no flow 'nope'"):
        Session(_config(["nope"])).cases()
    with pytest.raises(pytest.UsageError, match="a run of a flow this run does not lower: add --vgf-flow"):
        Session(_config(case=[f"{NATIVE}/{GRID}"])).cases()


def test_a_check_outside_a_flow_skips_with_a_declared_reason():
    cases = expand(TABLE, [NATIVE])
    key = f"{NATIVE}/{GRID}"

    def item(name):
        marks = []
        return SimpleNamespace(originalname=name, callspec=SimpleNamespace(params={"case_run": key}),
                               add_marker=marks.append, marks=marks)

    golden, export = item("test_golden"), item("test_export")
    skip_outside_flow([golden, export], cases)
    assert not export.marks and golden.marks[0].name == "skip"
    reason = golden.marks[0].kwargs["reason"]
    assert reason.startswith(f"{key}: does not apply in the {NATIVE} flow: ") and declared_as(reason) == "not-in-flow"


def test_each_gating_run_of_another_flow_has_its_golden_in_the_flows_folder():
    runs = [key for key, case in CASES.items() if case.flow != DEFAULT_FLOW]
    assert len(runs) == 7 and all(store.golden_path(key).is_file() for key in runs)
    assert all(json.loads(store.golden_path(key).read_text())["case"]["flow"] == WITHOUT for key in runs)
    assert "flow" not in json.loads(store.golden_path(RESIZE).read_text())["case"]


def test_a_flows_goldens_are_found_in_its_folder_and_nothing_else_there_is_touched(tmp_path):
    golden = json.dumps({"case": {}})
    (tmp_path / WITHOUT).mkdir()
    (tmp_path / "notes").mkdir()
    for path in (tmp_path / "a-int8io.json", tmp_path / WITHOUT / "a-int8io.json", tmp_path / WITHOUT / "b-int8io.json",
                 tmp_path / "notes" / "a-int8io.json"):
        path.write_text(golden)
    assert set(golden_files(tmp_path, {WITHOUT})) == {"a-int8io", f"{WITHOUT}/a-int8io", f"{WITHOUT}/b-int8io"}
    # b left the flow: stale; a flow no key runs in, or a folder that is no flow, is not looked at
    assert stale_goldens(tmp_path, ["a-int8io", f"{WITHOUT}/a-int8io"]) == [tmp_path / WITHOUT / "b-int8io.json"]
    assert stale_goldens(tmp_path, ["a-int8io"]) == []
    assert [run_key_of(p) for p in ("a.json", f"{WITHOUT}/a.json", "a/b/c.json", "A/b.json")] == \
        ["a", f"{WITHOUT}/a", None, None]


def test_the_rerun_command_of_a_flows_run_lowers_it_in_that_flow():
    config = SimpleNamespace(getoption=lambda name: None)
    assert case_command(config, RESIZE) == f"scripts/conformance.sh --vgf-case {RESIZE}"
    assert case_command(config, f"{WITHOUT}/{RESIZE}") == \
        f"scripts/conformance.sh --vgf-flow {WITHOUT} --vgf-case {WITHOUT}/{RESIZE}"


def test_a_flows_golden_is_stored_and_found_under_its_run_key(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "GOLDEN_DIR", tmp_path)
    key = f"{WITHOUT}/{RESIZE}"
    location = store.golden_path(key)
    assert location == tmp_path / WITHOUT / f"{RESIZE}.json"
    snapshot = store.GoldenExtension().read_snapshot_collection(snapshot_location=str(location))
    assert [s.name for s in snapshot] == [f"test_golden[{key}]"]
    test = SimpleNamespace(nodename=f"test_golden[{key}]")
    assert store.GoldenExtension.matches_test_location(test_location=test, snapshot_location=str(location))
    assert not store.GoldenExtension.matches_test_location(test_location=test,
                                                           snapshot_location=str(tmp_path / f"{RESIZE}.json"))
    assert Path(location).parent.name == WITHOUT


def test_a_flow_that_answers_for_a_workaround_runs_its_probes():
    from vgf_export.names import WORKAROUNDS

    answering = {name: flow for name, flow in FLOWS.items() if flow.answers_for is not None}
    assert {flow.answers_for for flow in answering.values()} == {"bilinear-scale-factor", "resize-split",
                                                                 "grid-sampler-routing"}
    for flow in answering.values():
        assert all(flow.applies(TABLE[probe]) for probe in WORKAROUNDS[flow.answers_for].probes), flow.name
        off = flow.options.get("disable_workarounds", ())
        assert not off or off == (flow.answers_for,), flow.name


def test_a_flow_that_leaves_a_case_on_the_cpu_declares_it_for_its_run_only():
    """Without the resize-split workaround, ExecuTorch's own RESIZE for a downscale
    by 32 is refused by the partitioner: the flow's run expects the CPU, the
    default run still expects the delegate."""
    flow, case = FLOWS["without-resize-split"], TABLE["resize-bilinear-ac0-down32-int8io"]
    run = flow.run(case)
    assert run.stays_on_cpu and "pytorch/executorch#19069" in run.stays_on_cpu
    assert run.describe()["expected_delegation"] == "cpu" and case.describe()["expected_delegation"] == "delegated"
    assert case.stays_on_cpu is None and run.options["disable_workarounds"] == ("resize-split",)



def test_each_flows_expectations_and_quick_set_name_cases_it_runs():
    """A flow's expectation or quick case for a case it never runs would be a
    declaration nothing checks."""
    for flow in FLOWS.values():
        declared = {*flow.expectations, *flow.quick, *flow.stays_on_cpu}
        assert declared <= {cid for cid, case in TABLE.items() if flow.applies(case)}, flow.name
    upstream = FLOWS[NATIVE]
    assert len(upstream.expectations) == 11 and upstream.quick
    assert all(e.stage == "lower" for e in upstream.expectations.values())
