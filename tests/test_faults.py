"""Fault injection: break one thing beneath the suite, show which conformance
check catches it, and that its message names the case, the stage and what
changed. Each fault is a plausible regression of ExecuTorch, the converter or
the runtime; the checks called are the suite's own test functions. The
numerics faults (a one-LSB shift, a +0.5 LSB bias within the max bound, a few
10-LSB outliers, 16-bit activations computed at 8 bits, an SNORM16 grid at
8 bits, a code below quant_min) call only the numerics tests: no golden is
read, so each shows that the bounds alone stand guard."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from vgf_conformance.oracles import delegates as delegates_module
from vgf_conformance import test_cases as suite
from vgf_conformance.cases import CASES
from vgf_conformance.harness.execution.runner import CaseFailure, run_case
from vgf_conformance.oracles.vulkan import check_case
from vgf_export import snorm_qspec
from vgf_export.partitioner import VgfPartitionerWrapper
from vgf_export.quantizer import VgfQuantizerWrapper


def _request():
    return SimpleNamespace(node=SimpleNamespace(user_properties=[]),
                           config=SimpleNamespace(getoption=lambda name: False))


def _failures(run, tests) -> dict[str, str]:
    """The failure message of each of ``tests`` (suite test functions) on ``run``."""
    failed = {}
    for test in tests:
        try:
            test(run, _request())
        except (AssertionError, CaseFailure) as error:
            failed[test.__name__] = str(error)
    return failed


NUMERICS = (suite.test_numerics_vs_fake_quant, suite.test_numerics_vs_float_dq,
            suite.test_numerics_vs_float)


def test_unbroken_cases_pass_the_checks(tmp_path):
    for case_id in ("resize-bilinear-ac0-up2-int8io", "grid-rgba-bilinear-zeros-ac0-random-int8io"):
        run = run_case(CASES[case_id], tmp_path)
        assert _failures(run, NUMERICS + (suite.test_delegation,)) == {}


def test_a_one_lsb_shift_in_a_delegate_fails_vs_fake_quant(tmp_path, monkeypatch):
    real = delegates_module.run_tosa_in_child_ex

    def shifted(flatbuffer, inputs, timeout, **options):
        result = real(flatbuffer, inputs, timeout, **options)
        outputs = [np.clip(o.astype(np.int32) + 1, -127, 127).astype(o.dtype) for o in result.outputs]
        return dataclasses.replace(result, outputs=outputs)

    monkeypatch.setattr(delegates_module, "run_tosa_in_child_ex", shifted)
    case_id = "resize-bilinear-ac0-up2-int8io"
    failed = _failures(run_case(CASES[case_id], tmp_path), NUMERICS)
    message = failed["test_numerics_vs_fake_quant"]
    assert case_id in message and "stage 'run'" in message and "bias +" in message


def _patch_delegate_outputs(monkeypatch, change) -> None:
    """Every delegate's int8 outputs (from the TOSA reference model) through ``change``."""
    real = delegates_module.run_tosa_in_child_ex

    def patched(flatbuffer, inputs, timeout, **options):
        result = real(flatbuffer, inputs, timeout, **options)
        return dataclasses.replace(result, outputs=[change(o) if o.dtype == np.int8 else o for o in result.outputs])

    monkeypatch.setattr(delegates_module, "run_tosa_in_child_ex", patched)


def test_a_half_lsb_bias_within_the_max_bound_fails_vs_fake_quant(tmp_path, monkeypatch):
    """Every other element one step up: each within the 1-LSB max bound, the
    mean shifted by +0.5 LSB. The golden is not consulted: the bias bound
    (0.3 LSB, measured 0.215 at worst) stands guard alone."""
    def every_other_up(o):
        flat = o.astype(np.int32).reshape(-1)
        flat[::2] += 1
        return np.clip(flat, -127, 127).reshape(o.shape).astype(o.dtype)

    _patch_delegate_outputs(monkeypatch, every_other_up)
    case_id = "resize-nearest-up2-int8io"  # equal to fake-quant; held to 1 LSB, bias 0.3
    failed = _failures(run_case(CASES[case_id], tmp_path), NUMERICS)
    message = failed["test_numerics_vs_fake_quant"]
    assert "bias +0.4" in message or "bias +0.5" in message, message
    assert "max error" not in message.split("(tolerance")[0]  # within the max bound: the bias alone catches it


def test_a_few_10_lsb_outliers_fail_every_comparison(tmp_path, monkeypatch):
    """Three elements of 1152 ten steps off: the mean hardly moves (+0.03 LSB),
    every per-element bound catches it, with the golden not consulted."""
    def three_outliers(o):
        flat = o.astype(np.int32).reshape(-1)
        picked = [5, 500, 1000]
        flat[picked] += np.where(flat[picked] > 0, -10, 10)
        return flat.reshape(o.shape).astype(o.dtype)

    _patch_delegate_outputs(monkeypatch, three_outliers)
    case_id = "resize-bilinear-ac0-up2-int8io"
    failed = _failures(run_case(CASES[case_id], tmp_path), NUMERICS)
    assert set(failed) == {t.__name__ for t in NUMERICS}, failed
    assert "max error 10.000 LSB > 1 LSB" in failed["test_numerics_vs_fake_quant"]


def test_a_code_below_quant_min_fails_vs_fake_quant_within_every_lsb_bound(tmp_path, monkeypatch):
    """The narrow-range saturation class (a RESCALE clamping at the dtype's -128
    instead of quant_min -127): one step, inside every LSB bound of the case,
    yet a code the quantized program cannot produce."""
    real = delegates_module.run_tosa_in_child_ex

    def saturated(flatbuffer, inputs, timeout, **options):
        result = real(flatbuffer, inputs, timeout, **options)
        outputs = [np.where(o == -127, -128, o).astype(o.dtype) if o.dtype == np.int8 else o
                   for o in result.outputs]
        return dataclasses.replace(result, outputs=outputs)

    monkeypatch.setattr(delegates_module, "run_tosa_in_child_ex", saturated)
    case_id = "resize-bilinear-ac0-up2-int8io"  # its output reaches -127
    failed = _failures(run_case(CASES[case_id], tmp_path), NUMERICS)
    assert set(failed) == {"test_numerics_vs_fake_quant"}, failed
    message = failed["test_numerics_vs_fake_quant"]
    assert case_id in message and "codes outside the output's quantization range [-127, 127]: [-128]" in message
    assert "max error" not in message  # within the LSB bound: only the range check sees it


def test_an_snorm16_grid_quantized_as_snorm8_fails_vs_float(tmp_path, monkeypatch):
    real_init = VgfQuantizerWrapper.__init__

    def eight_bit(spec):
        return snorm_qspec(8) if spec is not None and spec.quant_max == 32767 else spec

    def init(self, compile_spec, *, input_qspecs, output_qspecs, **grid):
        real_init(self, compile_spec, input_qspecs=[eight_bit(q) for q in input_qspecs],
                  output_qspecs=output_qspecs, **{k: eight_bit(v) for k, v in grid.items()})

    monkeypatch.setattr(VgfQuantizerWrapper, "__init__", init)
    for case_id in ("grid-rgba-bilinear-zeros-ac0-random-int8io", "grid-rgba-nearest-zeros-ac0-random-int8io"):
        failed = _failures(run_case(CASES[case_id], tmp_path), NUMERICS)
        assert set(failed) == {"test_numerics_vs_float"}, failed  # the program is self-consistent
        assert case_id in failed["test_numerics_vs_float"]


def test_a_case_that_stops_being_delegated_fails_delegation(tmp_path, monkeypatch):
    real = VgfPartitionerWrapper.partition

    def refuse(self, program):
        result = real(self, program)
        for node in result.tagged_exported_program.graph_module.graph.nodes:
            node.meta.pop("delegation_tag", None)
        result.partition_tags.clear()
        return result

    monkeypatch.setattr(VgfPartitionerWrapper, "partition", refuse)
    case_id = "resize-bilinear-ac0-down2-int8io"
    failed = _failures(run_case(CASES[case_id], tmp_path), (suite.test_delegation,))
    message = failed["test_delegation"]
    assert case_id in message and "nothing was delegated" in message and "stays_on_cpu" in message


def test_a_case_declared_on_the_cpu_that_gets_delegated_fails(tmp_path):
    case = dataclasses.replace(CASES["resize-bilinear-ac0-down2-int8io"], stays_on_cpu="for the test")
    failed = _failures(run_case(case, tmp_path), (suite.test_delegation,))
    assert "declared to stay on the CPU (for the test), but it is now delegated" in failed["test_delegation"]


def _fake_builder(tmp_path, expected: dict, got: dict):
    return SimpleNamespace(scenario=tmp_path / "scenario.json", outputs=lambda: got,
                           expected=lambda: expected, layouts={k: (0, 2, 3, 1) for k in expected})


def test_an_int8_vulkan_output_off_by_two_fails_in_a_mixed_io_case(tmp_path):
    """two-in-two-out-mixed: an int16 and an int8 output; its float bound must
    not leak into the integer tensors (it used to allow 2 int8 steps)."""
    rng = np.random.default_rng(0)
    expected = {"v_down": rng.integers(-32767, 32767, (1, 4, 6, 4), dtype=np.int16),
                "v_up": rng.integers(-127, 127, (1, 16, 24, 4), dtype=np.int8)}
    got = {k: v.copy() for k, v in expected.items()}
    got["v_up"][0, 3, 5, 1] += 2
    check = check_case(_fake_builder(tmp_path, expected, got), seconds=0.1)
    float_bound = CASES["two-in-two-out-mixed"].get_tolerance().vulkan_float_lsb
    assert float_bound > 0  # the case has float IO, so a float bound exists
    (problem,) = check.problems(float_bound)
    assert "v_up (int8): 1 of 1536 elements differ" in problem and "bit-exact" in problem
    assert "[0, 3, 5, 1]" in problem


def test_a_float_vulkan_tensor_is_held_to_its_own_bound(tmp_path):
    expected = {"v_out": np.zeros((1, 2, 2, 4), np.float32)}
    got = {"v_out": expected["v_out"] + np.float32(0.5 / 127)}
    check = check_case(_fake_builder(tmp_path, expected, got), seconds=0.1)
    assert check.problems(1.0) == []
    assert "max 0.5 LSB of 1/127 > 0.01" in check.problems(0.01)[0]


@pytest.mark.parametrize("field", ["max_lsb", "outliers"])
def test_an_outlier_allowance_caps_the_size_of_outliers(field):
    from vgf_conformance.oracles.compare import compare
    from vgf_conformance.oracles.compare import Bound
    import torch

    expected = torch.zeros(100)
    got = expected.clone()
    got[:3] = 200.0  # 3 % of elements, 200 LSB off
    comparison = compare(expected, got, 1.0)
    assert Bound(2.0, outliers=0.05, outlier_max_lsb=254).problems(comparison) == []
    problems = Bound(2.0, outliers=0.05, outlier_max_lsb=8).problems(comparison)
    assert problems == ["max error 200.000 LSB > the outlier cap 8 LSB"]
    with pytest.raises(ValueError, match="without a magnitude cap"):
        Bound(2.0, outliers=0.05)


def test_a_pte_whose_output_layout_is_flipped_fails_test_pte(tmp_path):
    """Without the pte-delegate-layouts workaround, ExecuTorch 1.5.1 itself
    writes such a program: the grid sampler writes NHWC, the .pte says NCHW."""
    case_id = "grid-rgba-bilinear-zeros-ac0-identity-int8io"
    fixed = run_case(CASES[case_id], tmp_path / "fixed")
    assert _failures(fixed, (suite.test_pte,)) == {}
    flipped = run_case(CASES[case_id], tmp_path / "flipped", disable_workarounds=("pte-delegate-layouts",))
    message = _failures(flipped, (suite.test_pte,))["test_pte"]
    assert case_id in message and "dim_order=[0, 1, 2, 3]" in message and "dim_order=[0, 2, 3, 1]" in message


def test_a_tosa_version_change_fails_the_golden_and_names_the_section(tmp_path, monkeypatch):
    """A new serializer that writes another TOSA version: the programs may be
    the same, the golden's tosa section says which version changed."""
    import json

    from vgf_conformance.goldens import golden_path
    from vgf_conformance.tosa import reader as tosa_reader

    case_id = "resize-bilinear-ac0-up2-int8io"
    real = tosa_reader.summarize_tosa

    def newer(data, **kwargs):
        return {**real(data, **kwargs), "tosa_version": "1.1.0"}

    monkeypatch.setattr(tosa_reader, "summarize_tosa", newer)
    run = run_case(CASES[case_id], tmp_path)
    stored = json.loads(golden_path(case_id).read_text())
    try:
        suite.test_golden(run, stored, _request())
    except AssertionError as error:
        message = str(error)
    else:
        raise AssertionError("test_golden passed with another TOSA version")
    assert f"golden of {case_id} changed in sections ['tosa']" in message
    assert f"--vgf-case {case_id} --snapshot-update" in message  # how to accept it
    assert run.golden["tosa"][0]["tosa_version"] == "1.1.0" != stored["tosa"][0]["tosa_version"]


def test_16bit_activations_that_fall_back_to_8_bits_fail_the_a16w8_bounds(tmp_path, monkeypatch):
    """If the a16w8 config silently stopped applying (activations back to int8
    while the IO stays int16), the a16w8 family's 16-bit bounds catch it."""
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config

    from vgf_conformance.cases import case as case_module

    case_id = "a16w8-resize-bilinear-ac0-up2-int16io"
    monkeypatch.setitem(case_module.QUANT_CONFIGS, "a16w8", (get_symmetric_quantization_config, "int16"))
    failed = _failures(run_case(CASES[case_id], tmp_path), NUMERICS)
    assert set(failed) >= {"test_numerics_vs_float_dq", "test_numerics_vs_float"}
    message = failed["test_numerics_vs_float"]
    assert case_id in message and "stage 'run'" in message and "vs_float: max error" in message


def test_a_partly_delegated_case_whose_cpu_ops_change_fails_delegation(tmp_path):
    """nearest-exact declares the gather it leaves on the CPU; if another op
    stayed there (or the gather were delegated), test_delegation says so."""
    case = CASES["resize-nearest-exact-up2-int8io"]
    run = run_case(case, tmp_path)
    assert _failures(run, (suite.test_delegation,)) == {}
    changed = dataclasses.replace(run, case=dataclasses.replace(case, cpu_ops=("aten.index.Tensor",)))
    message = _failures(changed, (suite.test_delegation,))["test_delegation"]
    assert "declared partly delegated with ['aten.index.Tensor']" in message and "the CPU ops are" in message
