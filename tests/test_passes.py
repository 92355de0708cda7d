"""The resize split helpers and pass, and the channels-last pass."""

import pytest
import torch
import torch.nn.functional as F
from executorch.exir import EdgeCompileConfig, to_edge

from vgf_conformance.cases.op_models import GridSample, Resize
from tests.helpers import captured
from vgf_export.passes import (
    build_bilinear_resize_axis_sizes,
    make_bilinear_resize_stage_shapes,
    min_bilinear_resize_stage_count,
    rewrite_large_bilinear_downsample_pass,
    set_tensors_to_channels_last_pass,
)


@pytest.mark.parametrize(
    "size_in, size_out, stages",
    [
        (8, 16, 1),  # upscale
        (16, 16, 1),  # identity
        (60, 4, 1),  # 1/15: legal as is
        (64, 4, 2),  # 1/16: the exact boundary TOSA rejects
        (68, 4, 2),  # 1/17
        (128, 4, 2),  # 1/32
        (256, 4, 2),  # 1/64
        (1024, 4, 3),  # 1/256
        (1023, 4, 2),  # just under 1/256
    ],
)
def test_min_stage_count(size_in, size_out, stages):
    assert min_bilinear_resize_stage_count(size_in, size_out) == stages


@pytest.mark.parametrize(
    "size_in, size_out, stages, sizes",
    [
        (64, 4, 2, [63, 4]),  # 64 -> 63 (1.016x) -> 4 (15.75x)
        (68, 4, 2, [63, 4]),
        (128, 4, 2, [63, 4]),
        (1024, 4, 3, [1023, 63, 4]),
        (16, 4, 2, [16, 4]),  # an axis needing fewer stages waits
        (8, 16, 3, [8, 8, 16]),
        (5, 5, 1, [5]),
    ],
)
def test_axis_sizes(size_in, size_out, stages, sizes):
    assert build_bilinear_resize_axis_sizes(size_in, size_out, stage_count=stages) == sizes


def test_stage_shapes_combine_axes():
    # H needs two stages (1/16), W only one (1/2): W resizes in the last stage.
    assert make_bilinear_resize_stage_shapes((64, 8), (4, 4)) == [(63, 8), (4, 4)]
    assert make_bilinear_resize_stage_shapes((8, 8), (4, 4)) == [(4, 4)]
    assert make_bilinear_resize_stage_shapes((8, 8), (32, 32)) == [(32, 32)]


@pytest.mark.parametrize("bad", [(0, 4), (4, 0), (-1, 4)])
def test_stage_count_rejects_non_positive_sizes(bad):
    with pytest.raises(ValueError, match="must be positive"):
        min_bilinear_resize_stage_count(*bad)


def test_axis_sizes_rejects_non_positive_stage_count():
    with pytest.raises(ValueError, match="stage_count must be positive"):
        build_bilinear_resize_axis_sizes(64, 4, stage_count=0)


def _resize_nodes(gm):
    return [
        n
        for n in gm.graph.nodes
        if n.op == "call_function" and n.target == torch.ops.aten.upsample_bilinear2d.vec
    ]




def test_split_pass_rewrites_1_32_into_legal_stages():
    x = torch.rand(1, 4, 128, 128)
    gm = captured(Resize(scale_factor=1 / 32, align_corners=False), x)
    (original,) = _resize_nodes(gm)
    name = original.name
    result, count = rewrite_large_bilinear_downsample_pass(gm)
    assert count == 1 and result.modified
    stages = _resize_nodes(gm)
    assert [n.args[1] for n in stages] == [[63, 63], [4, 4]]
    assert stages[-1].name == name  # the final stage keeps the original's name
    assert list(stages[0].meta["val"].shape) == [1, 4, 63, 63]
    expected = F.interpolate(F.interpolate(x, size=(63, 63), mode="bilinear"), size=(4, 4), mode="bilinear")
    torch.testing.assert_close(gm(x), expected)


@pytest.mark.parametrize(
    "model",
    [
        Resize(scale_factor=1 / 8, align_corners=False),  # legal as is
        Resize(scale_factor=1 / 32, align_corners=True),  # align_corners: left alone
        Resize("nearest", scale_factor=1 / 32),
        Resize(scale_factor=2.0, align_corners=False),
    ],
    ids=["1/8", "align-corners", "nearest", "upscale"],
)
def test_split_pass_leaves_other_resizes_alone(model):
    gm = captured(model, torch.rand(1, 4, 128, 128))
    before = str(gm.graph)
    result, count = rewrite_large_bilinear_downsample_pass(gm)
    assert count == 0 and not result.modified
    assert str(gm.graph) == before


def _edge_graph(model, *inputs):
    ep = torch.export.export(model, inputs, strict=True)
    return to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).exported_program().graph_module


def _placeholder_vals(gm):
    return {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"}


def test_channels_last_marks_images_not_grids():
    gm = _edge_graph(GridSample(), torch.rand(1, 4, 8, 8), torch.rand(1, 4, 4, 2))
    set_tensors_to_channels_last_pass(gm)
    vals = _placeholder_vals(gm)
    assert vals["image"].dim_order() == (0, 2, 3, 1)
    assert vals["grid"].dim_order() == (0, 1, 2, 3)
    (sampler,) = [n for n in gm.graph.nodes if "grid_sampler_2d" in str(n.target)]
    assert sampler.meta["val"].dim_order() == (0, 2, 3, 1)


def test_channels_last_marks_image_outputs():
    gm = _edge_graph(Resize(scale_factor=0.5, align_corners=False), torch.rand(1, 4, 8, 8))
    set_tensors_to_channels_last_pass(gm)
    (out,) = gm.graph.output_node().args[0]
    assert out.meta["val"].dim_order() == (0, 2, 3, 1)
