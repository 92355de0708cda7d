"""The quantizer wrapper's annotations, seen in the converted PT2E graph."""

import pytest
import torch

from vgf_conformance.cases.op_models import GridSample, Resize, TwoInTwoOut
from tests.helpers import calls, quantized, qparams
from vgf_export import grid_qspec, image_qspec, snorm_qspec

SNORM8 = (1 / 127, 0, -127, 127, torch.int8)
SNORM16 = (1 / 32767, 0, -32767, 32767, torch.int16)


def _approx(params):
    scale, *rest = params
    return (pytest.approx(scale, rel=1e-6), *rest)


def _quantize_after(gm, name):
    (node,) = [n for n in gm.graph.nodes if n.name == name]
    users = [u for u in node.users if "quantize_per_tensor" in str(u.target)]
    return users


def test_positional_io_qspecs():
    gm = quantized(
        TwoInTwoOut(),
        (torch.rand(1, 4, 8, 8) * 2 - 1, torch.rand(1, 4, 8, 8) * 2 - 1),
        [image_qspec(), snorm_qspec(16)],
        [snorm_qspec(16), image_qspec()],
    )
    (qa,) = _quantize_after(gm, "a")
    (qb,) = _quantize_after(gm, "b")
    assert qparams(qa) == _approx(SNORM8)
    assert qparams(qb) == _approx(SNORM16)
    out_a, out_b = gm.graph.output_node().args[0]
    assert "dequantize" in str(out_a.target) and qparams(out_a) == _approx(SNORM16)
    assert "dequantize" in str(out_b.target) and qparams(out_b) == _approx(SNORM8)


def test_none_leaves_io_float():
    gm = quantized(
        Resize(scale_factor=0.5, align_corners=False),
        (torch.rand(1, 4, 8, 8),),
        [None],
        [None],
    )
    # No SNORM8 boundary: input and output carry the resize's observed qparams.
    (out,) = gm.graph.output_node().args[0]
    assert qparams(out)[0] != pytest.approx(1 / 127)
    (q,) = _quantize_after(gm, "x")
    assert qparams(q)[0] != pytest.approx(1 / 127)
    assert qparams(q)[0] == pytest.approx(qparams(out)[0])


@pytest.mark.parametrize("channels", [3, 4])
def test_grid_sample_qspecs(channels):
    gm = quantized(
        GridSample(),
        (torch.rand(1, channels, 8, 8) * 2 - 1, torch.rand(1, 4, 4, 2) * 2 - 1),
        [image_qspec(), grid_qspec()],
        [image_qspec()],
    )
    (sampler,) = calls(gm, "grid_sampler")
    image_dq, grid_dq = sampler.args[:2]
    assert qparams(image_dq) == _approx(SNORM8)
    assert qparams(grid_dq) == _approx(SNORM16)
    (out_q,) = sampler.users
    assert qparams(out_q) == _approx(SNORM8)
    if channels == 3:
        # The pad shares the image qspec: no requantize between pad and sampler.
        pad_q = image_dq.args[0]
        pad = pad_q.args[0]
        assert "pad" in str(pad.target)
        assert qparams(pad_q) == _approx(SNORM8)
        assert qparams(pad.args[0]) == _approx(SNORM8)


def test_int8_grid_and_float_sampler_output():
    gm = quantized(
        GridSample(),
        (torch.rand(1, 4, 8, 8) * 2 - 1, torch.rand(1, 4, 4, 2) * 2 - 1),
        [image_qspec(), image_qspec()],
        [None],
        grid_sampler_grid_input_qspec=image_qspec(),
        quantize_grid_sample_output=False,
    )
    (sampler,) = calls(gm, "grid_sampler")
    assert qparams(sampler.args[1]) == _approx(SNORM8)
    assert all("quantize" not in str(u.target) for u in sampler.users)
