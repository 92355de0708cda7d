"""Realistic models (the model tier): frame interpolation (RIFE-style IFNet),
super-resolution, a Laplacian pyramid blend, an affine stabilisation warp, a
segmentation head and a small U-Net, with seeded weights at small but
realistic resolutions (:mod:`vgf_conformance.cases.zoo`).

Per-element max LSB does not scale with depth: each requantizing op may
round differently, and a deep graph accumulates that. So against the float
model (raw and on the dequantized inputs) these cases are held to
*statistical* bounds: a minimum SNR in dB and a 99th-percentile error in
LSB, with a max-error cap; against the fake-quantized program to a max LSB,
a p99 and a bias bound.
Each model's bounds are measured (``python -m vgf_conformance model-bounds
[CASE_ID...]`` prints the worst over three input seeds and the bounds the rule
gives) and stated in
:data:`vgf_conformance.cases.model_bounds.MODEL_BOUNDS` (its trait ``model-<name>``);
Vulkan stays bit-exact with the TOSA-reference path.
"""

from __future__ import annotations

from typing import Callable

from torch import nn

import vgf_conformance.cases.zoo as zoo
from vgf_conformance.cases.case import Case, Expectation
from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.cases.family import Family

# The pull-request tier, chosen by coverage (python -m vgf_conformance coverage
# --from-scratch; tests/test_coverage.py): with the other families' quick cases,
# every lowering feature of the full matrix at the least recorded time. Each
# case with the features only it brings to the tier.
QUICK = frozenset({
    "model-affine-stabilize-rgba-96x128",  # CAST FP32->INT16, REDUCE_SUM
    "model-ifnet-64x96-int8io",  # strided CONV2D, TABLE, RESHAPE INT8 and INT32
    "model-unet-64x64-int8io",  # MAX_POOL2D, CLAMP INT8
    "model-superres-x2-32x48-int8io",  # stack: high-rank singleton permutes, clone_dim_order support
})


def _smooth(c: int, h: int, w: int) -> InputSpec:
    return InputSpec("smooth", (1, c, h, w))


def model_case(case_id: str, name: str, model: Callable[[], nn.Module], inputs, io) -> Case:
    """One model; ``name`` is its bounds' entry (trait ``model-<name>``)."""
    return Case(id=case_id, family="models", model=model, inputs=tuple(inputs), input_qspecs=io[0],
                output_qspecs=io[1], traits=frozenset({f"model-{name}"}))


def _cases() -> list[Case]:
    return [
        model_case("model-ifnet-64x96-int8io", "ifnet", lambda: zoo.IFNetLite((64, 96)),
                   [_smooth(3, 64, 96), _smooth(3, 64, 96)], (("int8", "int8"), ("int8",))),
        model_case("model-superres-x2-32x48-int8io", "superres", lambda: zoo.SuperResolution(3, 2),
                   [_smooth(3, 32, 48)], (("int8",), ("int8",))),
        model_case("model-laplacian-blend-64x96-int8io", "laplacian-blend", lambda: zoo.LaplacianBlend(3),
                   [_smooth(3, 64, 96), _smooth(3, 64, 96), _smooth(1, 64, 96)],
                   (("int8", "int8", "int8"), ("int8",))),
        # The stabiliser's correction delta [1, 2, 3] is a float input (quantized
        # inside), drawn like a flow: small values in [-0.25, 0.25].
        model_case("model-affine-stabilize-rgba-96x128", "affine-stabilize", lambda: zoo.AffineStabilize((96, 128)),
                   [_smooth(4, 96, 128), InputSpec("flow", (1, 2, 3))], (("int8", "float"), ("int8",))),
        # Logits leave the program in float (an argmax or a softmax follows on the CPU).
        model_case("model-segmentation-64x96", "segmentation", lambda: zoo.SegmentationHead(6),
                   [_smooth(3, 64, 96)], (("int8",), ("float", "float"))),
        model_case("model-unet-64x64-int8io", "unet", lambda: zoo.TinyUNet(3, 8),
                   [_smooth(3, 64, 64)], (("int8",), ("int8",))),
    ]


#: Known failures on the pinned stack (docs/divergences.md, "Base grid + flow").
EXPECTATIONS = {
    "model-ifnet-64x96-int8io": Expectation(
        # Each of the two tensors named: a third tensor off, or a second element, fails.
        "run", r"v_getitem_1[35] \(int8\): 1 of 24576 elements differ from the TOSA-reference path \(max 1 steps",
        "Vulkan: two of the four grid-sampler warps (through base grid + computed flow) each write one "
        "element of 24576 one step from the TOSA-reference path: llvmpipe's hardware bilinear "
        "filtering and the payload's numpy reference round one sample apart, as in "
        "basegrid-flow-linspace n2 (docs/divergences.md). Every other tensor, the output included, "
        "is bit-exact",
        checks=("vulkan",)),
}

#: No default tolerance: each model states its measured bounds (trait
#: ``model-<name>``); a model without them is refused when the table is built.
FAMILY = Family("models", __doc__, _cases, None, QUICK, EXPECTATIONS)
