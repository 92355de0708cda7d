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
Each model's bounds are measured (``python -m vgf_conformance.cases.families.models
[CASE_ID...]`` prints the worst over three input seeds and the bounds the rule
gives) and stated in
:data:`vgf_conformance.cases.tolerances.MODEL_BOUNDS` (its trait ``model-<name>``);
Vulkan stays bit-exact with the TOSA-reference path.
"""

from __future__ import annotations

from typing import Callable

from torch import nn

from vgf_conformance.cases import zoo
from vgf_conformance.cases.case import Case, Expectation, InputSpec
from vgf_conformance.cases.family import Family

# The pull-request tier, chosen by coverage (python -m vgf_conformance.harness.coverage
# --from-scratch; tests/test_coverage.py): with the other families' quick cases,
# every lowering feature of the full matrix at the least recorded time. Each
# case with the features only it brings to the tier.
QUICK = frozenset({
    "model-affine-stabilize-rgba-96x128",  # CAST FP32->INT16, REDUCE_SUM
    "model-ifnet-64x96-int8io",  # strided CONV2D, TABLE, RESHAPE INT8 and INT32
    "model-unet-64x64-int8io",  # MAX_POOL2D, CLAMP INT8
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


# ---------------------------------------------------------------------------
# Measuring the bounds: python -m vgf_conformance.cases.families.models [ID...]
# ---------------------------------------------------------------------------
#: Input seeds a model's bounds are measured over: the case's own inputs and
#: two other draws (each calibrates its own quantization).
MEASURE_SEEDS = ("", "-seed1", "-seed2")


def propose_bounds(worst: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The rule of :data:`vgf_conformance.cases.tolerances.MODEL_BOUNDS` applied to
    the worst statistics of one model (comparison -> max_lsb, p99_lsb,
    bias_lsb, snr_db): LSB bounds 1.5x the worst, rounded down to 0.01 (a
    bias: to 0.001; below the slack table's resolution, 0.01, counts as it); SNR floors
    the worst minus 3.5 dB (1.5x the error's amplitude), rounded up to 0.1.
    Each is at most 1.5x the worst (:mod:`vgf_conformance.cases.slack`)."""
    import math

    from vgf_conformance.cases.slack import BIAS_RESOLUTION

    def down(lsb: float, step: float = 0.01) -> float:
        return math.floor(round(lsb * 1.5 / step, 6)) * step

    return {what: {"max_lsb": round(down(w["max_lsb"]), 2), "p99_lsb": round(down(w["p99_lsb"]), 2),
                   "bias_lsb": round(down(max(w["bias_lsb"], BIAS_RESOLUTION), 0.001), 3),
                   "min_snr_db": math.ceil(round((w["snr_db"] - 3.5) * 10, 6)) / 10}
            for what, w in worst.items()}


def measure_bounds(case_ids=(), artifacts=None) -> dict[str, dict]:
    """Export each model case on :data:`MEASURE_SEEDS` and return, per case,
    the worst statistics of each comparison over its seeds and outputs, and
    the bounds :func:`propose_bounds` derives from them."""
    import dataclasses
    import math
    import tempfile
    from pathlib import Path

    from vgf_conformance.harness.runner import run_case

    root = Path(artifacts or tempfile.mkdtemp(prefix="model-bounds-"))
    found = {}
    for case in FAMILY.build():
        if case_ids and case.id not in case_ids:
            continue
        worst: dict[str, dict[str, float]] = {}
        for suffix in MEASURE_SEEDS:
            run = run_case(dataclasses.replace(case, id=case.id + suffix), root)  # the id seeds the inputs
            if run.numerics is None:
                raise RuntimeError(f"{case.id}{suffix}: {run.failure.describe() if run.failure else 'no numerics'}")
            for name, comparisons in run.numerics.comparisons.items():
                for c in comparisons:
                    w = worst.setdefault(name, {"max_lsb": 0.0, "p99_lsb": 0.0, "snr_db": math.inf, "bias_lsb": 0.0})
                    w.update(max_lsb=max(w["max_lsb"], c.max_lsb), p99_lsb=max(w["p99_lsb"], c.p99_lsb),
                             snr_db=min(w["snr_db"], c.snr_db), bias_lsb=max(w["bias_lsb"], abs(c.bias_lsb)))
        found[case.id] = {"worst": worst, "proposed": propose_bounds(worst)}
    return found


if __name__ == "__main__":
    import json
    import sys

    from vgf_conformance.text import round_floats

    print(json.dumps(round_floats(measure_bounds(tuple(sys.argv[1:]))), indent=1, sort_keys=True))
