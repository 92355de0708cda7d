"""Error maps (vgf_conformance/harness/reporting/errormaps.py): the layout, the sign and the
scale of the error, the maps of a real case are of the data its check failed
on, only cases that need maps get them, and a map that cannot be drawn never
hides the failure it was drawn for."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from vgf_conformance import test_cases as suite
from vgf_conformance.cases import CASES
from vgf_conformance.harness.reporting import errormaps
from vgf_conformance.harness.reporting.errormaps import MAP_DIR, as_nchw, case_outputs, write_case_maps, write_maps
from vgf_conformance.harness.plugin.recording import REPORT_KEY
from vgf_conformance.harness.execution.runner import CaseFailure, run_case
from vgf_conformance.oracles import delegates as delegates_module
from vgf_conformance.oracles.compare import FLOAT_UNIT, compare

CASE = "resize-bilinear-ac0-up2-int8io"


def _pair(shape, shift_lsb: float, column: int = -1):
    torch.manual_seed(0)
    reference = torch.round((torch.rand(shape) * 2 - 1) * 127) / 127
    lowered = reference.clone()
    lowered[..., column] += shift_lsb * FLOAT_UNIT
    return reference, lowered


def test_a_2x4x12x16_output_is_one_map_of_8_rows_and_its_error_range_is_stated(tmp_path):
    reference, lowered = _pair((2, 4, 12, 16), 3.0)
    (m,) = write_maps(tmp_path, "output0", "t", reference, lowered, {"vs_float": reference}, FLOAT_UNIT)
    assert (m.file, m.channels, m.shape) == ("output0-c0-3.png", (0, 3), (2, 4, 12, 16))
    assert m.ranges == {"vs_float": {"range_lsb": 5, "max_lsb": 3.0}}  # 3 LSB on a +-5 scale
    image = pytest.importorskip("PIL.Image").open(tmp_path / m.file)
    width, height = image.size
    assert height > 1.5 * width  # 8 rows (batch x channel) of 3 columns: one picture


def test_channels_beyond_four_go_to_a_second_map_and_a_clean_output_keeps_a_1_lsb_scale(tmp_path):
    reference, lowered = _pair((1, 6, 5, 7), 0.0)
    maps = write_maps(tmp_path, "output1", "t", reference, lowered, {"vs_float": reference}, FLOAT_UNIT, output=1)
    assert [(m.file, m.channels) for m in maps] == [("output1-c0-3.png", (0, 3)), ("output1-c4-5.png", (4, 5))]
    assert maps[0].ranges["vs_float"] == {"range_lsb": 1.0, "max_lsb": 0.0}


def _red_minus_blue(path: Path) -> int:
    pixels = np.asarray(pytest.importorskip("PIL.Image").open(path).convert("RGB")).astype(int)
    red = ((pixels[..., 0] > 170) & (pixels[..., 2] < 110)).sum()
    blue = ((pixels[..., 2] > 150) & (pixels[..., 0] < 110)).sum()
    return int(red - blue)


def test_a_lowered_program_that_is_too_high_is_red_and_too_low_is_blue(tmp_path):
    """The sign: error = lowered - reference (the colour bars are symmetric and cancel out)."""
    reference, high = _pair((1, 1, 8, 8), 3.0)
    _, low = _pair((1, 1, 8, 8), -3.0)
    (up,) = write_maps(tmp_path / "up", "o", "t", reference, high, {"vs_float": reference}, FLOAT_UNIT)
    (down,) = write_maps(tmp_path / "down", "o", "t", reference, low, {"vs_float": reference}, FLOAT_UNIT)
    assert _red_minus_blue(tmp_path / "up" / up.file) > 50
    assert _red_minus_blue(tmp_path / "down" / down.file) < -50


def test_any_rank_is_laid_out_as_nchw():
    assert as_nchw(torch.zeros(5)).shape == (1, 1, 1, 5)
    assert as_nchw(torch.zeros(3, 5)).shape == (1, 1, 3, 5)
    assert as_nchw(torch.zeros(2, 3, 5)).shape == (1, 2, 3, 5)
    assert as_nchw(torch.zeros(2, 2, 3, 4, 5)).shape == (4, 3, 4, 5)


def test_bad_arguments_are_refused_by_name(tmp_path):
    reference, lowered = _pair((1, 1, 4, 4), 0.0)
    with pytest.raises(ValueError, match="reference 'vs_float' has shape"):
        write_maps(tmp_path, "o", "t", reference, lowered, {"vs_float": reference[..., :2]}, FLOAT_UNIT)
    with pytest.raises(ValueError, match="unit must be a positive LSB size"):
        write_maps(tmp_path, "o", "t", reference, lowered, {"vs_float": reference}, 0.0)


def _request():
    return SimpleNamespace(node=SimpleNamespace(user_properties=[]),
                           config=SimpleNamespace(getoption=lambda name: False))


def _recorded_maps(request) -> list:
    return [v["error_maps"] for k, v in request.node.user_properties if k == REPORT_KEY and "error_maps" in v]


@pytest.fixture
def shifted_delegate(monkeypatch):
    """A 1-LSB shift in every VGF delegate's outputs (tests/test_faults.py's fault)."""
    real = delegates_module.run_tosa_in_child_ex

    def shifted(flatbuffer, inputs, timeout, **options):
        result = real(flatbuffer, inputs, timeout, **options)
        outputs = [np.clip(o.astype(np.int32) + 1, -127, 127).astype(o.dtype) for o in result.outputs]
        return dataclasses.replace(result, outputs=outputs)

    monkeypatch.setattr(delegates_module, "run_tosa_in_child_ex", shifted)


def test_a_failing_numerics_check_records_maps_of_the_data_it_failed_on(tmp_path, shifted_delegate):
    run = run_case(CASES[CASE], tmp_path)
    request = _request()
    with pytest.raises(CaseFailure, match="bias \\+"):
        suite.test_numerics_vs_fake_quant(run, request)
    (maps,) = _recorded_maps(request)
    assert [m["file"] for m in maps] == [f"{MAP_DIR}/output0-c0-3.png"]
    assert (run.artifacts / maps[0]["file"]).stat().st_size > 10_000
    floats, lowered, references, units = case_outputs(run)
    for name, comparisons in run.numerics.comparisons.items():  # the map's data is the check's
        again = compare(references[name][0], lowered[0], units[0])
        assert again.max_lsb == pytest.approx(comparisons[0].max_lsb)
        assert maps[0]["ranges"][name]["max_lsb"] == pytest.approx(comparisons[0].max_lsb, abs=1e-3)
    assert write_case_maps(run) is write_case_maps(run)  # drawn once per case


def test_a_passing_case_gets_no_maps(tmp_path):
    run = run_case(CASES[CASE], tmp_path)
    request = _request()
    for test in (suite.test_numerics_vs_fake_quant, suite.test_numerics_vs_float_dq, suite.test_numerics_vs_float):
        test(run, request)
    assert _recorded_maps(request) == [] and not (run.artifacts / MAP_DIR).exists()


def test_a_map_that_cannot_be_drawn_never_hides_the_failure(tmp_path, shifted_delegate, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no fonts")

    monkeypatch.setattr(errormaps, "write_maps", broken)
    run = run_case(CASES[CASE], tmp_path)
    request = _request()
    with pytest.raises(CaseFailure, match="bias \\+"):  # the numerics failure, not the map's
        suite.test_numerics_vs_fake_quant(run, request)
    (maps,) = _recorded_maps(request)
    assert maps == [{"error": "error maps could not be drawn (a bug of vgf-conformance): RuntimeError: no fonts"}]
    assert write_case_maps(dataclasses.replace(run, numerics=None, artifacts=tmp_path / "x")) == []


def test_a_large_output_is_pooled_without_losing_a_one_pixel_error(tmp_path):
    reference, lowered = _pair((1, 1, 270, 480), 0.0)
    lowered[0, 0, 101, 201] -= 20 * FLOAT_UNIT
    (m,) = write_maps(tmp_path, "o", "t", reference, lowered, {"vs_float": reference}, FLOAT_UNIT)
    assert m.ranges["vs_float"] == {"range_lsb": 20, "max_lsb": 20.0}
    assert errormaps._pool(np.array([[0.0, -3.0, 1.0], [2.0, 0.0, 0.0]]), 2).tolist() == [[-3.0, 1.0]]
    assert errormaps._pool(np.array([[1.0, 3.0], [5.0, 7.0]]), 2, extreme=False).tolist() == [[4.0]]


def test_explorer_findings_show_the_maps_their_draws_drew(tmp_path):
    from vgf_conformance.explore.findings import write_findings

    artifacts = tmp_path / "artifacts" / "draw-00007" / "resize-x"
    (artifacts / MAP_DIR).mkdir(parents=True)
    (artifacts / MAP_DIR / "output0-c0-3.png").write_bytes(b"png")
    outcome = {"id": "resize-x", "draw": 7, "family": "resize", "params": {}, "status": "done",
               "signature": "hang", "artifacts": str(artifacts), "tests": [], "code": ""}
    group = {"signature": "hang", "family": "resize", "draws": 1, "minimal_from": "smallest seen",
             "found_in": "explore", "first": outcome, "minimal": outcome}
    summary = {"command": "python -m vgf_conformance explore", "seed": 1, "budget_seconds": 1, "families": ["resize"],
               "workarounds_off": [], "vulkan": False, "pte": False, "cases": 1, "seconds": 1,
               "cases_per_minute": 1.0, "explore_cases": 1, "explore_cases_per_minute": 1.0, "phase_seconds": {},
               "shrink_cases": 0, "mean_case_seconds": 1, "child_starts": 1, "child_start_seconds": 1,
               "outcomes": {}, "cache_hits": 0, "skipped_for_budget": 0, "notes": [], "groups": [group]}
    write_findings(tmp_path, summary)
    link = "artifacts/draw-00007/resize-x/error_maps/output0-c0-3.png"
    assert f"![error map output0-c0-3.png]({link})" in (tmp_path / "findings.md").read_text()
    assert json.loads((tmp_path / "findings.json").read_text())["groups"][0]["error_maps"] == [link]
