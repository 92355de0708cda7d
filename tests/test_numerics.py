"""The numerics machinery: grid-sampler reference, comparisons, TOSA runs."""

import dataclasses
import struct

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vgf_conformance.oracles.grid_sampler_reference import grid_sample, run_payload
from vgf_conformance.cases.op_models import GridSample, Resize
from vgf_conformance.oracles.compare import BIAS_MIN_ELEMENTS, Bound, compare
from vgf_conformance.oracles.lowered import LoweredProgram, LoweredRunError, quantize_inputs
from vgf_conformance.oracles.numerics import codes_outside_range
from vgf_conformance.cases import FAMILIES
from vgf_conformance.oracles.tosa_reference import run_tosa_in_child_ex
from vgf_export import export_model, grid_qspec, image_qspec
from vgf_export.grid_sampler_backend import GridSamplerPayload

UNIT = 1 / 127
DEFAULT = FAMILIES["resize"].tolerance


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_reference_matches_torch(mode, padding, align_corners):
    gen = torch.Generator().manual_seed(7)
    image = torch.rand(2, 3, 9, 13, generator=gen) * 2 - 1
    grid = torch.rand(2, 5, 7, 2, generator=gen) * 2.6 - 1.3  # out of range too
    expected = F.grid_sample(image, grid, mode=mode, padding_mode=padding, align_corners=align_corners)
    got = grid_sample(image.numpy(), grid.numpy(), mode, padding, align_corners)
    np.testing.assert_allclose(got, expected.numpy(), atol=2e-6)


@pytest.fixture(scope="module")
def grid_export(tmp_path_factory):
    inputs = (torch.rand(1, 4, 12, 16) * 2 - 1, torch.rand(1, 6, 10, 2) * 2 - 1)
    result = export_model(
        GridSample("bilinear", "border", True), inputs,
        artifacts_root=tmp_path_factory.mktemp("grid"),
        quantized_input_qspecs=[image_qspec(), grid_qspec()],
        quantized_output_qspecs=[image_qspec()],
    )
    (path,) = [f.path for f in result.artifacts.delegate_files("json")]
    return inputs, result, GridSamplerPayload.from_bytes(path.read_bytes())


def _run_grid(grid_export, payload):
    inputs, result, _ = grid_export
    image_q, grid_q = quantize_inputs(inputs, result.edge_program, result.io_quant_params)
    out = run_payload(payload, image_q.numpy(), grid_q.numpy())
    return torch.from_numpy(out.astype(np.float32) * payload.output.quant.scale)


def test_payload_reference_matches_fake_quant(grid_export):
    inputs, result, payload = grid_export
    got = _run_grid(grid_export, payload)
    expected = result.quantized_module(*inputs)
    assert compare(expected, got, UNIT).max_lsb == 0


def test_comparison_passes_an_exact_match():
    x = torch.rand(1, 4, 8, 8)
    c = compare(x, x.clone(), UNIT)
    assert (c.max_lsb, c.mean_lsb, c.bias_lsb) == (0, 0, 0)
    assert DEFAULT.check(c, "vs_fake_quant") is None


def test_comparison_catches_a_one_lsb_shift():
    x = torch.round(torch.rand(1, 4, 8, 8) * 100) * UNIT
    c = compare(x, x + UNIT, UNIT)
    assert c.max_lsb == pytest.approx(1.0) and c.bias_lsb == pytest.approx(1.0)
    message = DEFAULT.check(c, "vs_fake_quant")  # within max, but biased
    assert message and "bias +1.000 LSB" in message
    assert "worst at index" in message and "expected" in message and "got" in message


def test_comparison_catches_a_wrong_align_corners(grid_export):
    inputs, result, payload = grid_export
    wrong = dataclasses.replace(payload, align_corners=not payload.align_corners)
    c = compare(result.quantized_module(*inputs), _run_grid(grid_export, wrong), UNIT)
    assert DEFAULT.check(c, "vs_fake_quant") is not None
    assert c.max_lsb > 5


def test_comparison_catches_a_transposed_layout():
    x = torch.rand(1, 4, 6, 6) * 2 - 1
    transposed = x.transpose(2, 3)  # H and W swapped: same shape, wrong layout
    c = compare(x, transposed, UNIT)
    assert DEFAULT.check(c, "vs_fake_quant") is not None


def test_comparison_refuses_shape_mismatch():
    with pytest.raises(ValueError, match="shape mismatch"):
        compare(torch.zeros(1, 2, 3), torch.zeros(1, 3, 2), UNIT)


@pytest.fixture(scope="module")
def resize_export(tmp_path_factory):
    x = (torch.rand(1, 4, 16, 16) * 2 - 1,)
    return x, export_model(
        Resize(scale_factor=0.5, align_corners=False), x,
        artifacts_root=tmp_path_factory.mktemp("resize"),
        quantized_input_qspecs=[image_qspec()], quantized_output_qspecs=[image_qspec()],
    )


def _tosa(result) -> bytes:
    (path,) = [f.path for f in result.artifacts.delegate_files("tosa")]
    return path.read_bytes()


def test_tosa_run_refuses_wrong_inputs_before_running(resize_export):
    x, result = resize_export
    (q,) = quantize_inputs(x, result.edge_program, result.io_quant_params)
    nchw = run_tosa_in_child_ex(_tosa(result), [q.numpy()])  # the graph wants NHWC
    assert nchw.status == "BAD_INPUT" and "NHWC" in " ".join(nchw.messages)
    nhwc = np.ascontiguousarray(q.permute(0, 2, 3, 1).numpy())
    wrong_dtype = run_tosa_in_child_ex(_tosa(result), [nhwc.astype(np.int16)])
    assert wrong_dtype.status == "BAD_INPUT" and "dtype" in " ".join(wrong_dtype.messages)
    assert run_tosa_in_child_ex(_tosa(result), [nhwc]).ok


def test_tosa_runs_are_reused_only_for_the_same_graph_options_and_bytes(resize_export, tmp_path):
    x, result = resize_export
    (q,) = quantize_inputs(x, result.edge_program, result.io_quant_params)
    nhwc = np.ascontiguousarray(q.permute(0, 2, 3, 1).numpy())
    runs = tmp_path / "tosa_runs"
    first = run_tosa_in_child_ex(_tosa(result), [nhwc], cache_dir=runs)
    assert first.ok and "cached" not in first.timings and len(list(runs.glob("*.npz"))) == 1
    again = run_tosa_in_child_ex(_tosa(result), [nhwc], cache_dir=runs)
    assert again.timings.get("cached") and np.array_equal(again.outputs[0], first.outputs[0])
    # Other input bytes, other options, another graph: each runs (and is kept).
    moved = nhwc.copy()
    moved.flat[0] ^= 1
    assert "cached" not in run_tosa_in_child_ex(_tosa(result), [moved], cache_dir=runs).timings
    assert "cached" not in run_tosa_in_child_ex(_tosa(result), [nhwc], cache_dir=runs,
                                                tosa_level="EIGHTK").timings
    assert len(list(runs.glob("*.npz"))) == 3
    # A failed run is not kept: it fails again, with its error.
    bad = _tosa(result).replace(struct.pack("<4q", 2, 4, 2, 4), struct.pack("<4q", 2, 32, 2, 32))
    for _ in range(2):
        failed = run_tosa_in_child_ex(bad, [nhwc], cache_dir=runs)
        assert not failed.ok and "cached" not in failed.timings
    assert len(list(runs.glob("*.npz"))) == 3


def test_tosa_error_if_names_the_operator(resize_export, tmp_path):
    x, result = resize_export
    flatbuffer = _tosa(result)
    legal = struct.pack("<4q", 2, 4, 2, 4)  # RESIZE scale of a 1/2 downscale
    assert flatbuffer.count(legal) == 1
    illegal = flatbuffer.replace(legal, struct.pack("<4q", 2, 32, 2, 32))  # 1/16: ERROR_IF
    (q,) = quantize_inputs(x, result.edge_program, result.io_quant_params)
    layout = np.ascontiguousarray(q.permute(0, 2, 3, 1).numpy())
    run = run_tosa_in_child_ex(illegal, [layout], timeout=60)
    assert not run.ok and run.status == "TOSA_ERROR"
    text = run.describe()
    assert "RESIZE" in text and "scale" in text and "32" in text


def test_lowered_program_reports_a_rejected_delegate(resize_export):
    x, result = resize_export
    flatbuffer = _tosa(result)
    illegal = flatbuffer.replace(struct.pack("<4q", 2, 4, 2, 4), struct.pack("<4q", 2, 32, 2, 32))
    program = LoweredProgram(result.edge_program, {0: illegal})
    with pytest.raises(LoweredRunError, match=r"delegate 0 \(VgfBackend\).*RESIZE"):
        program.run_program(*quantize_inputs(x, result.edge_program, result.io_quant_params))


def test_the_bias_bound_applies_from_bias_min_elements():
    """One element's bias is its error (max_lsb bounds it); from
    BIAS_MIN_ELEMENTS on, a shift within max_lsb but systematic fails."""
    bound = Bound(1.0, bias_lsb=0.5)
    few = torch.zeros(BIAS_MIN_ELEMENTS - 1)
    assert bound.problems(compare(few, few + 0.86 * UNIT, UNIT)) == []  # held to max_lsb only
    assert bound.problems(compare(few, few + 1.5 * UNIT, UNIT))  # ... which still fails beyond it
    many = torch.zeros(BIAS_MIN_ELEMENTS)
    assert bound.problems(compare(many, many + 0.5 * UNIT, UNIT)) == []
    assert bound.problems(compare(many, many + 0.6 * UNIT, UNIT)) == ["bias +0.600 LSB beyond +-0.5 LSB"]


def test_an_exact_bound_fails_on_one_element_one_lsb_off():
    bound = Bound(0.0, bias_lsb=0.0)
    assert bound.exact
    many = torch.zeros(1, 4, 8, 8)
    assert bound.problems(compare(many, many.clone(), UNIT)) == []
    one_off = many.clone()
    one_off[0, 1, 2, 3] = UNIT
    assert "max error 1.000 LSB > 0 LSB" in bound.problems(compare(many, one_off, UNIT))


def test_the_grid_reference_reads_the_lowest_snorm16_code_as_minus_one():
    """A RESCALE before the sampler saturates at -32768 (below the SNORM16
    qspec's -32767); an SNORM texel reads it as -1.0, and so must the
    reference (else nearest at the -0.5 pixel tie picks the zero padding)."""
    from vgf_conformance.oracles.grid_sampler_reference import dequantize
    from vgf_export.grid_sampler_backend import QuantParams

    snorm16 = QuantParams(scale=1 / 32767, zero_point=0, quant_min=-32767, quant_max=32767)
    got = dequantize(np.array([-32768, -32767, 0, 32767], dtype=np.int16), snorm16)
    assert got.tolist() == pytest.approx([-1.0, -1.0, 0.0, 1.0], abs=1e-7)


def test_codes_outside_the_quantization_range_are_found():
    params = {"scale": 1 / 32767, "zero_point": 0, "quant_min": -32767, "quant_max": 32767}
    codes = torch.tensor([[-32767, 0], [32767, -32768]], dtype=torch.int16)
    outside = codes_outside_range(codes, params)
    assert (outside.count, outside.values, outside.first_index) == (1, (-32768,), (1, 1))
    assert "1 of 4 codes outside the output's quantization range [-32767, 32767]: [-32768]" in outside.describe()
    assert codes_outside_range(codes.clamp(-32767, 32767), params) is None
    assert codes_outside_range(codes.float(), None) is None  # a float output has no range


def test_every_backend_the_export_makes_has_one_reference_for_each_oracle():
    """The delegate references sit in one table (oracles/delegates.py): every
    backend id the export package names runs in the lowered program and in
    the .pte plan, and the Vulkan tier's scenario table has the same ids."""
    from vgf_conformance.oracles.delegates import DELEGATES
    from vgf_conformance.oracles.vulkan.scenario import DELEGATES as SCENARIO_DELEGATES
    from vgf_export.names import BACKEND_FILE_STEMS

    assert set(DELEGATES) == set(BACKEND_FILE_STEMS) == set(SCENARIO_DELEGATES)
    for reference in DELEGATES.values():
        assert all(callable(f) for f in (reference.layouts, reference.run, reference.execute))


def test_a_delegate_with_no_reference_fails_naming_its_backend(resize_export):
    """A lowered program given a table without the VGF backend (as a new
    backend would meet it) fails at the call, naming the backend and the
    known ones, instead of running the delegate on something else."""
    from vgf_conformance.oracles.delegates import DELEGATES, GRID_SAMPLER_BACKEND

    x, result = resize_export
    program = LoweredProgram(result.edge_program, {0: _tosa(result)},
                             delegates={GRID_SAMPLER_BACKEND: DELEGATES[GRID_SAMPLER_BACKEND]})
    with pytest.raises(LoweredRunError, match=r"delegate 0: no reference for backend VgfBackend "
                                              r"\(known: \['GridSamplerBackend'\]\)"):
        program.run_program(*quantize_inputs(x, result.edge_program, result.io_quant_params))
