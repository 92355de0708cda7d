"""Whole exports on the real toolchain, asserting the delegate structure."""

import json

import pytest
import torch

from vgf_conformance.cases.op_models import ConvRelu, GridSample, Resize
from vgf_export import export_model, grid_qspec, image_qspec
from vgf_export.grid_sampler_backend import GridSamplerPayload
from vgf_export.qdq import is_dq_op, is_q_op
from vgf_export.artifacts import call_functions

INT8 = [image_qspec()]

CASES = {
    "resize-half-int8io": dict(
        model=Resize(scale_factor=0.5, align_corners=False),
        inputs=(torch.rand(1, 4, 16, 16) * 2 - 1,),
        kwargs=dict(quantized_input_qspecs=INT8, quantized_output_qspecs=INT8),
        delegates=[("VgfBackend", ["aten.upsample_bilinear2d.vec"])],
    ),
    "resize-1_32-int8io": dict(
        model=Resize(scale_factor=1 / 32, align_corners=False),
        inputs=(torch.rand(1, 4, 128, 128) * 2 - 1,),
        kwargs=dict(quantized_input_qspecs=INT8, quantized_output_qspecs=INT8),
        delegates=[("VgfBackend", ["aten.upsample_bilinear2d.vec"] * 2)],
        rewritten_resizes=1,  # 128 -> 63 -> 4, both stages legal TOSA
    ),
    "grid-rgb-int8io": dict(
        model=GridSample(),
        inputs=(torch.rand(1, 3, 16, 16) * 2 - 1, torch.rand(1, 8, 8, 2) * 2 - 1),
        kwargs=dict(quantized_input_qspecs=[image_qspec(), grid_qspec()], quantized_output_qspecs=INT8),
        delegates=[
            ("VgfBackend", ["aten.pad.default"]),
            ("GridSamplerBackend", ["aten.grid_sampler_2d.default"]),
            ("VgfBackend", ["aten.slice_copy.Tensor"]),
        ],
    ),
    "grid-rgba-int8io": dict(
        model=GridSample(),
        inputs=(torch.rand(1, 4, 16, 16) * 2 - 1, torch.rand(1, 8, 8, 2) * 2 - 1),
        kwargs=dict(quantized_input_qspecs=[image_qspec(), grid_qspec()], quantized_output_qspecs=INT8),
        delegates=[("GridSamplerBackend", ["aten.grid_sampler_2d.default"])],
    ),
    "conv3x3-relu-int8io": dict(
        model=ConvRelu(),
        inputs=(torch.rand(1, 4, 8, 8) * 2 - 1,),
        kwargs=dict(quantized_input_qspecs=INT8, quantized_output_qspecs=INT8),
        delegates=[("VgfBackend", ["aten.convolution.default", "aten.relu.default"])],
    ),
    "resize-half-float": dict(
        model=Resize(scale_factor=0.5, align_corners=False),
        inputs=(torch.rand(1, 4, 16, 16),),
        kwargs=dict(enable_pt2e_quantization=False),
        delegates=[("VgfBackend", ["aten.upsample_bilinear2d.vec"])],
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request, tmp_path_factory):
    case = CASES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    result = export_model(case["model"], case["inputs"], artifacts_root=root, **case["kwargs"])
    return case, result


def _compute_ops(ops):
    return [op for op in ops if "quantized_decomposed" not in op]


def test_delegate_structure(exported):
    case, result = exported
    got = [(d.backend, _compute_ops(d.ops)) for d in result.report.delegates]
    assert got == case["delegates"]
    assert result.report.cpu_ops == []


def test_unpacks_like_the_seed(exported):
    _, result = exported
    edge_program, example_inputs, io_quant_params = result
    assert edge_program is result.edge_program
    assert set(io_quant_params) == {"inputs", "outputs"}


def test_io_quantization_stripped_to_integer_boundary(exported):
    case, result = exported
    graph = result.edge_program.exported_program().graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder" and n.users]
    quantized = case["kwargs"].get("enable_pt2e_quantization", True)
    expected = [q.dtype if quantized else torch.float32 for q in case["kwargs"].get("quantized_input_qspecs", [None] * len(placeholders))]
    assert [p.meta["val"].dtype for p in placeholders] == expected
    # No Q/DQ left on the CPU: every one sits inside a delegate or was stripped.
    assert not [n for n in call_functions(graph.owning_module) if is_q_op(n) or is_dq_op(n)]
    params = result.io_quant_params
    assert len(params["inputs"]) == (len(placeholders) if quantized else 0)
    for p in params["inputs"].values():
        assert p["zero_point"] == 0


def test_images_cross_delegates_channels_last(exported):
    _, result = exported
    graph = result.edge_program.exported_program().graph_module.graph
    for node in graph.nodes:
        if node.op == "placeholder" and node.meta["val"].ndim == 4 and node.meta["val"].shape[-1] != 2:
            assert node.meta["val"].dim_order() == (0, 2, 3, 1), node.name


def test_artifacts(exported):
    case, result = exported
    paths = result.artifacts
    assert paths.program.stat().st_size > 0
    expected = []
    for i, (backend, _) in enumerate(case["delegates"]):
        if backend == "VgfBackend":
            expected += [f"{i:02d}_vgf.tosa", f"{i:02d}_vgf.vgf"]
        else:
            expected += [f"{i:02d}_grid_sampler.json"]
    assert [f.path.name for f in paths.delegate_files()] == expected
    assert json.loads(paths.report.read_text())["delegates"][0]["backend"] == case["delegates"][0][0]
    assert set(json.loads(paths.io_quant_params.read_text())) == {"inputs", "outputs"}
    for f in paths.delegate_files("json"):
        payload = GridSamplerPayload.from_bytes(f.path.read_bytes())
        assert payload.image.shape[1] == 4 and payload.image.memory_format == "channels_last"
        assert payload.grid.dtype == "int16"


def test_split_recorded_in_report(exported):
    case, result = exported
    assert result.report.rewritten_resizes == case.get("rewritten_resizes", 0)
