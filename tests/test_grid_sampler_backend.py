"""Grid-sampler partitioner, payload and the RGB->RGBA pad pass."""

import json

import pytest
import torch

from vgf_conformance.cases.op_models import GridSample
from tests.helpers import calls, captured, quantized_edge
from vgf_export import grid_qspec, image_qspec
from vgf_export.grid_sampler_backend import (
    PAYLOAD_VERSION,
    GridSamplerOnlyPartitioner,
    GridSamplerPayload,
    QuantParams,
    pad_rgb_grid_sampler_channels_pass,
)
from vgf_export.passes import set_tensors_to_channels_last_pass
from vgf_export.artifacts import lowered_modules


def _edge(model=None, channels=4, grid_q=grid_qspec(), out_q=True):
    inputs = (torch.rand(1, channels, 8, 8) * 2 - 1, torch.rand(1, 4, 6, 2) * 2 - 1)
    return quantized_edge(
        model or GridSample(),
        inputs,
        [image_qspec(), grid_q],
        [image_qspec() if out_q else None],
        grid_sampler_grid_input_qspec=grid_q,
        quantize_grid_sample_output=out_q,
    )


def _payload(**kwargs) -> GridSamplerPayload:
    """Lower with the grid-sampler backend; decode the one delegate's payload."""
    edge = _edge(**kwargs)
    set_tensors_to_channels_last_pass(edge.exported_program().graph_module)
    lowered = edge.to_backend(GridSamplerOnlyPartitioner())
    (module,) = lowered_modules(lowered.exported_program().graph_module)
    assert module.backend_id == "GridSamplerBackend"
    return GridSamplerPayload.from_bytes(module.processed_bytes)


def test_payload_describes_the_quantized_sampler():
    payload = _payload(model=GridSample("nearest", "border", align_corners=True))
    assert payload.interpolation == "nearest"
    assert payload.padding_mode == "border"
    assert payload.align_corners is True
    assert payload.image.shape == (1, 4, 8, 8) and payload.image.dtype == "int8"
    assert payload.image.dim_order == (0, 2, 3, 1)
    assert payload.image.memory_format == "channels_last"
    assert payload.image.quant == QuantParams(pytest.approx(1 / 127), 0, -127, 127)
    assert payload.grid.shape == (1, 4, 6, 2) and payload.grid.dtype == "int16"
    assert payload.grid.memory_format == "contiguous"
    assert payload.grid.quant.scale == pytest.approx(1 / 32767)
    assert payload.output.shape == (1, 4, 4, 6) and payload.output.dtype == "int8"
    assert payload.inputs == ("image", "grid")


def test_payload_float_output():
    payload = _payload(out_q=False)
    assert payload.output.dtype == "float32" and payload.output.quant is None


def test_payload_round_trip():
    payload = _payload(grid_q=image_qspec())
    blob = payload.to_bytes()
    assert GridSamplerPayload.from_bytes(blob) == payload
    data = json.loads(blob)
    assert data["version"] == PAYLOAD_VERSION and data["grid"]["dtype"] == "int8"
    assert blob == GridSamplerPayload.from_bytes(blob).to_bytes()  # stable text


@pytest.mark.parametrize(
    "field, value, message",
    [("format", "other", "expected format"), ("version", 99, "expected version 1")],
)
def test_payload_rejects_unknown_format_or_version(field, value, message):
    data = _payload().to_dict()
    data[field] = value
    with pytest.raises(ValueError, match=message):
        GridSamplerPayload.from_dict(data)


def test_partitioner_takes_the_whole_qdq_chain():
    ep = _edge().exported_program()
    result = GridSamplerOnlyPartitioner().partition(ep)
    (sampler,) = calls(ep.graph_module, "grid_sampler_2d")
    tag = sampler.meta["delegation_tag"]
    members = {n for n in ep.graph_module.graph.nodes if n.meta.get("delegation_tag") == tag}
    assert members == {sampler, *sampler.args[:2], *sampler.users}
    assert result.partition_tags[tag].backend_id == "GridSamplerBackend"


def test_partitioner_leaves_bicubic_on_cpu():
    ep = _edge(GridSample("bicubic")).exported_program()
    result = GridSamplerOnlyPartitioner().partition(ep)
    assert result.partition_tags == {}


def test_pad_pass_pads_to_rgba_and_slices_back():
    model = GridSample("bilinear", "zeros")
    image, grid = torch.rand(1, 3, 8, 8), torch.rand(1, 5, 5, 2) * 2 - 1
    gm = captured(model, image, grid)
    assert pad_rgb_grid_sampler_channels_pass(gm) == 1
    (pad,) = calls(gm, "pad")
    (sampler,) = calls(gm, "grid_sampler")
    (sliced,) = calls(gm, "slice")
    assert sampler.args[0] is pad and sliced.args[0] is sampler
    assert list(sampler.meta["val"].shape) == [1, 4, 5, 5]
    assert list(sliced.meta["val"].shape) == [1, 3, 5, 5]
    torch.testing.assert_close(gm(image, grid), model(image, grid))


def test_pad_pass_leaves_rgba_alone():
    gm = captured(GridSample(), torch.rand(1, 4, 8, 8), torch.rand(1, 5, 5, 2))
    assert pad_rgb_grid_sampler_channels_pass(gm) == 0
    assert not calls(gm, "pad")
