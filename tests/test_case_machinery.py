"""The case table's machinery: expectations (strict xfails) and determinism."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cases import CASES, Expectation, STAGES
from conformance.plugin import case_params
from conformance.runner import CaseFailure, CaseRun, ExpectedStageFailure, StageFailure

REPO = Path(__file__).resolve().parent.parent


def _run(expect):
    case = CASES["resize-bilinear-ac0-down2-int8io"]
    case = type(case)(**{**case.__dict__, "expect": expect})
    return CaseRun(case=case, artifacts=Path("/nowhere"), stage="lower",
                   failure=StageFailure("lower", "RuntimeError", "RESIZE: scale_d >= 16 * scale_n"))


def test_matching_expectation_is_an_expected_failure():
    run = _run(Expectation("lower", r"scale_d >= 16", "pytorch/executorch#19069"))
    with pytest.raises(ExpectedStageFailure, match="expected: pytorch/executorch#19069"):
        run.require_export()


@pytest.mark.parametrize("expect", [
    None,
    Expectation("convert", r"scale_d", "wrong stage"),
    Expectation("lower", r"something else", "wrong error"),
])
def test_other_failures_fail_and_name_stage_and_artifacts(expect):
    with pytest.raises(CaseFailure, match=r"failed at stage 'lower'[\s\S]*artifacts: /nowhere") as info:
        _run(expect).require_export()
    if expect is not None:
        assert "expected instead" in str(info.value)


def test_expectation_must_name_a_known_stage():
    with pytest.raises(ValueError, match="Expectation.stage must be one of"):
        Expectation("linking", "x", "y")
    assert STAGES[0] == "export" and STAGES[-1] == "run"


def test_expected_cases_become_strict_xfails_and_all_are_grouped():
    case = CASES["resize-nearest-up4-int8io"]
    expected = type(case)(**{**case.__dict__, "expect": Expectation("lower", "x", "known bug")})
    (param,) = case_params({case.id: expected}, {case.id: "quick-batch01"})
    marks = {m.name: m for m in param.marks}
    assert marks["xdist_group"].args == ("quick-batch01",)
    assert marks["xfail"].kwargs["strict"] is True
    assert marks["xfail"].kwargs["raises"] is ExpectedStageFailure
    assert "[lower] known bug" in marks["xfail"].kwargs["reason"]


_GOLDEN = """
import sys, tempfile
from pathlib import Path
from conformance.cases import CASES
from conformance.golden import serialize
from conformance.runner import run_case
print(serialize(run_case(CASES[sys.argv[1]], Path(tempfile.mkdtemp())).golden))
"""


def test_goldens_do_not_depend_on_the_hash_seed():
    # flow-warp-rgb lowers two VGF partitions; their order used to follow PYTHONHASHSEED.
    outputs = []
    for seed in ("0", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", _GOLDEN, "flow-warp-rgb-border-int8io"],
                              capture_output=True, text=True, env=env, timeout=600, check=True)
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
