"""Quantize/dequantize node predicates and the fixed qspecs of the image contract.

The seed quantizes images as int8 symmetric with scale 1/127, zero point 0 and
range [-127, 127]: exactly an SNORM8 texel, so a runtime can alias an int8
NHWC tensor with 4 channels as a ``VK_FORMAT_R8G8B8A8_SNORM`` image. Sampling
grids are int16 with scale 1/32767 over [-32767, 32767]: an SNORM16 value.
"""

from __future__ import annotations

import torch
from torchao.quantization.pt2e.observer import FixedQParamsObserver
from torchao.quantization.pt2e.quantizer import QuantizationSpec

_Q_TARGETS = (
    "quantized_decomposed.quantize_per_tensor",
    "quantized_decomposed.quantize_per_channel",
)
_DQ_TARGETS = (
    "quantized_decomposed.dequantize_per_tensor",
    "quantized_decomposed.dequantize_per_channel",
)


def is_q_op(node: torch.fx.Node) -> bool:
    """A quantize node, ATen or edge dialect."""
    target = str(node.target)
    return any(t in target for t in _Q_TARGETS)


def is_dq_op(node: torch.fx.Node) -> bool:
    """A dequantize node, ATen or edge dialect."""
    target = str(node.target)
    return any(t in target for t in _DQ_TARGETS)


def is_qdq_name(name: str) -> bool:
    """An op name (as reports list them) that is a quantize or dequantize."""
    return any(t in name for t in _Q_TARGETS + _DQ_TARGETS)


def snorm_qspec(bits: int) -> QuantizationSpec:
    """Fixed symmetric qspec matching an SNORM texel of ``bits`` (8 or 16):
    scale 1/(2**(bits-1)-1), zero point 0, range +-(2**(bits-1)-1)."""
    if bits not in (8, 16):
        raise ValueError(f"bits must be 8 or 16, got {bits!r}")
    qmax = 2 ** (bits - 1) - 1
    dtype = torch.int8 if bits == 8 else torch.int16
    return QuantizationSpec(
        dtype=dtype,
        observer_or_fake_quant_ctr=FixedQParamsObserver.with_args(
            scale=1.0 / qmax,
            zero_point=0,
            dtype=torch.qint8 if bits == 8 else torch.int16,
            qscheme=torch.per_tensor_symmetric,
            quant_min=-qmax,
            quant_max=qmax,
        ),
        quant_min=-qmax,
        quant_max=qmax,
        qscheme=torch.per_tensor_symmetric,
        is_dynamic=False,
    )


def image_qspec() -> QuantizationSpec:
    """int8 SNORM8 image qspec (scale 1/127): the seed's internal image domain."""
    return snorm_qspec(8)


def grid_qspec() -> QuantizationSpec:
    """int16 SNORM16 grid qspec (scale 1/32767): the seed's default grid."""
    return snorm_qspec(16)
