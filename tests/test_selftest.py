"""The self-test's faults (vgf_conformance/selftest): each patches the real
stack and is undone; the plugin applies the named one in a run, where the
suite catches it; python -m vgf_conformance selftest prints what caught each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vgf_conformance.selftest import faults
from vgf_conformance.selftest.__main__ import caught

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(faults.FAULTS))
def test_each_fault_patches_the_stack_and_is_undone(name):
    fault = faults.FAULTS[name]
    assert fault.layer in faults.LAYERS and fault.what
    if isinstance(fault.apply, faults.Patch):  # an attribute of the stack: replaced, then restored
        original = fault.apply.current()
        undo = fault.apply()
        patched = fault.apply.current()
        undo()
        assert patched is not original and fault.apply.current() is original
    else:  # the model converter: a shim named by MODEL_CONVERTER_PATH, then unset
        before = os.environ.get("MODEL_CONVERTER_PATH")
        undo = fault.apply()
        shim = Path(os.environ["MODEL_CONVERTER_PATH"])
        assert shim.is_file() and os.access(shim, os.X_OK)
        undo()
        assert os.environ.get("MODEL_CONVERTER_PATH") == before


def test_a_fault_that_makes_a_directory_removes_it_when_undone():
    """The runtime fault's sitecustomize directory goes with the fault (it was
    left in the temporary directory, one per apply)."""
    from vgf_conformance.oracles.pte import runtime

    undo = faults.FAULTS["runtime-rounds-upward"].apply()
    site = Path(runtime._child_env()["PYTHONPATH"].split(os.pathsep)[0])
    assert (site / "sitecustomize.py").is_file()
    undo()
    assert not site.exists()


CONVERTER_FAULTS = sorted(name for name, fault in faults.FAULTS.items() if fault.layer == "model-converter")


@pytest.mark.parametrize("venv_on_path", [True, False], ids=["activated-venv", "venv-bin-not-on-PATH"])
@pytest.mark.parametrize("name", CONVERTER_FAULTS)
def test_the_converter_faults_find_the_real_converter_either_way(name, venv_on_path, monkeypatch, tmp_path):
    """With the venv's bin first on PATH (an activated venv), ExecuTorch's
    lookup returns the bare name 'model-converter', which the fault took for
    a path relative to the working directory and refused; without it, the
    lookup returns None and the converter beside the interpreter is used."""
    venv_bin = str(Path(sys.executable).parent)
    rest = [d for d in os.environ["PATH"].split(os.pathsep) if d != venv_bin]
    monkeypatch.setenv("PATH", os.pathsep.join([venv_bin, *rest] if venv_on_path else rest))
    monkeypatch.delenv("MODEL_CONVERTER_PATH", raising=False)
    monkeypatch.delenv("VGF_INJECT_FAULT_REAL_MODEL_CONVERTER", raising=False)
    monkeypatch.chdir(tmp_path)  # nothing named model-converter here
    undo = faults.FAULTS[name].apply()
    shim = Path(os.environ["MODEL_CONVERTER_PATH"])
    real = os.environ["VGF_INJECT_FAULT_REAL_MODEL_CONVERTER"]
    assert Path(real).is_absolute() and Path(real).name == "model-converter" and os.access(real, os.X_OK)
    assert f'exec "{real}"' in shim.read_text()
    undo()
    assert not shim.exists(), "the shim was left behind"


def test_the_self_test_refuses_to_write_goldens_and_kills_a_run_past_its_timeout(tmp_path, capsys):
    from vgf_conformance.selftest import __main__ as selftest

    with pytest.raises(SystemExit):
        selftest.main(["--", "--snapshot-update"])
    assert "--snapshot-update would write the goldens of a faulted stack" in capsys.readouterr().err
    status, report, _ = selftest.run(None, tmp_path / "run", ["vgf_conformance/test_cases.py"], timeout=0.5)
    assert (status, report) == (-1, None)


def test_an_unknown_fault_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"VGF_INJECT_FAULT: unknown fault 'nope'; known: .*clamp-min-raised"):
        faults.get("nope")


def _suite(tmp_path: Path, fault: str, case: str) -> tuple[int, dict]:
    """A run of the suite on ``case`` with ``fault`` injected by the plugin
    (test_pte left out: 5 s of the .pte runtime child, and not what catches
    the faults these tests inject)."""
    env = {k: v for k, v in os.environ.items() if k != faults.ENV}
    env[faults.ENV] = fault
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "vgf_conformance.selftest.inject", "-p",
                           "no:cacheprovider", "-n", "0", "-q", "vgf_conformance/test_cases.py", "--vgf-case", case,
                           "-k", "not test_pte", "--vgf-report", str(tmp_path / fault)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    report = json.loads((tmp_path / fault / "report.json").read_text())
    return proc.returncode, report


def _checks_pass(case: str, artifacts: Path) -> None:
    """Without a fault, the suite's checks (vgf_conformance/checks.py, what
    its tests call) pass on the case's run, exported in this process: its
    export, its golden (compared as test_golden compares it), its error
    statistics, its delegation and its outputs against every oracle."""
    from vgf_conformance import checks
    from vgf_conformance.cases import CASES
    from vgf_conformance.goldens import golden_path
    from vgf_conformance.goldens.store import verdict
    from vgf_conformance.harness.execution.runner import run_case
    from vgf_conformance.oracles.references import ORACLES

    run = run_case(CASES[case], artifacts)
    checks.export(run)
    assert verdict(golden_path(case).read_text(), checks.built_golden(run)).matches, f"{case}: golden changed"
    checks.statistics(run)
    checks.delegation(run)
    for oracle in ORACLES.values():
        checks.outputs(run, oracle)


def test_an_injected_fault_is_caught_where_the_run_without_it_passes(tmp_path):
    case = "conv-relu-int8io"
    _checks_pass(case, tmp_path / "none")  # the control, in this process
    status, report = _suite(tmp_path, "conv2d-pad-shifted", case)
    cases, checks = caught(report)
    assert status == 1 and cases == [case]
    assert {"test_golden", "test_numerics_vs_fake_quant"} <= set(checks), checks
    # The failure says which op: the convolution's requantized output, in the report too.
    (record,) = report["cases"]
    first = record["localization"]["first"]
    assert (first["op"], first["source"]) == ("RESCALE", "conv2d") and first["local_lsb"] > 100, record["localization"]
    assert "| conv-relu-int8io | delegate 0 op[" in (tmp_path / "conv2d-pad-shifted" / "report.md").read_text()
    assert "Where it diverges" in (tmp_path / "conv2d-pad-shifted" / "report.html").read_text()


def test_every_layer_of_the_stack_has_a_fault():
    assert {f.layer for f in faults.FAULTS.values()} == set(faults.LAYERS)
