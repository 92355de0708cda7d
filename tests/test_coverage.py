"""The pull-request tier holds every lowering feature of the full matrix
(python -m vgf_conformance coverage): a golden that brings a feature no
quick case has fails here, naming the case to mark quick."""

from __future__ import annotations

import json
import shutil

import pytest

from vgf_conformance.cases import CASES
from vgf_conformance.goldens.features import features, tosa_op_features
from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR
from vgf_conformance.harness.schedule import stack_reach
from vgf_conformance.harness.schedule.coverage import case_features, describe_missing, pick, stack_shortfall, uncovered
from vgf_conformance.harness.schedule.durations import load

SECONDS = load(None).restricted(CASES)
QUICK = {c for c, case in CASES.items() if case.quick}


@pytest.fixture(scope="module")
def by_case():
    return case_features(CASES, BUILTIN_GOLDEN_DIR)


def test_the_quick_tier_holds_every_feature_of_the_full_matrix(by_case):
    missing = uncovered(by_case, QUICK)
    assert not missing, (
        f"{len(missing)} lowering features of the full matrix are in no quick case, so no pull request "
        f"runs them; mark a case quick in its family's QUICK set (python -m vgf_conformance coverage "
        f"--pick for the cheapest set):\n{describe_missing(missing, SECONDS)}")
    assert len(by_case) >= len(CASES) - 2  # every case with a golden is read


def test_a_quick_case_dropped_loses_its_features_and_names_the_case_to_mark(by_case):
    missing = uncovered(by_case, QUICK - {"model-unet-64x64-int8io"})
    # (its CLAMP INT8 is model-superres-x2-32x48-int8io's too, quick for the stack lines it alone reaches)
    assert set(missing) == {"tosa MAX_POOL2D INT8->INT8", "tosa MAX_POOL2D strided"}
    message = describe_missing(missing, SECONDS)
    assert "tosa MAX_POOL2D strided: mark model-unet-64x64-int8io quick" in message, message


def test_a_golden_that_brings_a_new_feature_fails_naming_the_case(tmp_path):
    golden_dir = tmp_path / "golden"
    shutil.copytree(BUILTIN_GOLDEN_DIR, golden_dir)
    case_id = "resize-bilinear-ac0-down2-int8io"
    assert case_id not in QUICK
    path = golden_dir / f"{case_id}.json"
    golden = json.loads(path.read_text())
    golden["tosa"][0]["ops"] = [op.replace(" RESIZE(", " RESIZE_V2(") for op in golden["tosa"][0]["ops"]]
    path.write_text(json.dumps(golden))
    missing = uncovered(case_features(CASES, golden_dir), QUICK)
    assert list(missing) == ["tosa RESIZE_V2 INT8->INT32"] and missing["tosa RESIZE_V2 INT8->INT32"] == {case_id}
    assert f"mark {case_id} quick" in describe_missing(missing, SECONDS)


@pytest.mark.parametrize("op, expected", [
    ("op[0] CONV2D(pad=[1,1,1,1] stride=[2,2] dilation=[1,1] input_zp=0 weight_zp=0 acc_type=INT48 bias=[1,2]) "
     "INT16[1x8x12x4],weight:INT8[4x3x3x4] -> INT48[1x4x6x4] <- graph_input[0] weight#285c8c4f",
     {"tosa CONV2D INT16,INT8->INT48", "tosa CONV2D strided"}),
    ("op[3] RESIZE(mode=BILINEAR scale=[4,2,2,2] offset=[-1,-1] border=[1,1]) INT8[2x8x12x4] -> INT32[2x16x12x4] "
     "<- op[2].out[0]",
     {"tosa RESIZE INT8->INT32", "tosa RESIZE BILINEAR up", "tosa RESIZE BILINEAR same", "tosa RESIZE batch>1"}),
    ("op[7] CONCAT(axis=3) INT8[1x4x4x3],INT8[1x4x4x3],INT8[1x4x4x3] -> INT8[1x4x4x9] <- op[3].out[0]",
     {"tosa CONCAT INT8->INT8"}),
    ("op[1] RESCALE(multiplier=[20344,16401] shift=[23,22] input_zp=0 output_zp=0 rounding_mode=SINGLE_ROUND "
     "per_channel=True scale32=False input_unsigned=False output_unsigned=False) INT48[1x8x12x2] -> INT16[1x8x12x2] "
     "<- op[0].out[0]",
     {"tosa RESCALE INT48->INT16", "tosa RESCALE per_channel=True scale32=False rounding=SINGLE_ROUND"}),
])
def test_tosa_op_features(op, expected):
    assert tosa_op_features(op) == expected


def test_an_op_line_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="op: not a golden TOSA op line"):
        tosa_op_features("RESIZE INT8 -> INT8")


def test_a_golden_of_each_kind_yields_its_program_features():
    found = features(json.loads((BUILTIN_GOLDEN_DIR / "resize-bicubic-ac0-down2-int8io.json").read_text()))
    assert {"pte KernelCall aten::clamp.out", "cpu aten.clamp.default", "delegation partial",
            "input int8", "output int8", "precision int8"} <= found, sorted(found)
    found = features(json.loads((BUILTIN_GOLDEN_DIR / "grid-rgba-nearest-zeros-ac0-random-int8grid-int8io.json")
                                .read_text()))
    assert {"grid_sampler nearest zeros", "grid_sampler nearest align_corners=False", "grid_sampler image RGBA",
            'option grid_sampler_grid_input_qspec="int8"', "pte DelegateCall GridSamplerBackend"} <= found


def test_the_cover_takes_the_most_features_per_second_and_drops_what_others_make_redundant():
    by_case = {"slow-all": frozenset("abcd"), "a": frozenset("ab"), "c": frozenset("cd"), "ab": frozenset("ab"),
               "x": frozenset("a")}
    seconds = {"slow-all": 10.0, "a": 1.0, "c": 1.0, "ab": 3.0, "x": 0.1}.__getitem__
    assert pick(by_case, seconds) == ["a", "c"]
    assert pick(by_case, seconds, keep=["slow-all"]) == []
    assert pick(by_case, seconds, keep=["x"]) == ["a", "c"]  # kept, even where another case covers it


# ---------------------------------------------------------------------------
# The stack's lines and branches (vgf_conformance/stack_coverage.json, recorded)
# ---------------------------------------------------------------------------
def test_the_quick_tier_reaches_the_stack_the_full_matrix_reaches():
    shortfall = stack_shortfall(stack_reach.load(), CASES, QUICK, SECONDS)
    assert shortfall is None, shortfall


def test_a_quick_case_dropped_leaves_its_stack_lines_out_and_names_the_case_to_mark():
    shortfall = stack_shortfall(stack_reach.load(), CASES, QUICK - {"resize-nearest-down64-int8io"}, SECONDS)
    assert shortfall and "mark quick: resize-nearest-down64-int8io" in shortfall, shortfall
    assert "executorch/exir/emit/_emitter.py:314" in shortfall  # the lines it alone brought, listed


def test_a_recorded_case_the_table_lost_makes_the_record_stale():
    shortfall = stack_shortfall(stack_reach.load(), set(CASES) - {"resize-nearest-down64-int8io"}, QUICK, SECONDS)
    assert shortfall and "refresh it" in shortfall and "resize-nearest-down64-int8io" in shortfall
