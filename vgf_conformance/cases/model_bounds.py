"""The model tier's measured statistical bounds, as data: per model, why and
the fields it states per comparison (each becomes the trait ``model-<name>``
of :mod:`vgf_conformance.cases.tolerances`)."""

from __future__ import annotations

from vgf_conformance.oracles.compare import Bound


def _statistical(max_lsb: float, p99_lsb: float, min_snr_db: float | None = None,
                 bias_lsb: float | None = None) -> dict:
    """The fields a model states for one comparison (None: not stated)."""
    stated = dict(max_lsb=max_lsb, p99_lsb=p99_lsb, min_snr_db=min_snr_db, bias_lsb=bias_lsb)
    Bound(**stated)  # refused here if it could never fail
    return {k: v for k, v in stated.items() if v is not None}


#: The model tier (family ``models``): per model, its measured statistical
#: bounds (mode "statistical", see :mod:`vgf_conformance.oracles.compare`).
#: Measured on the pinned stack over three input seeds (the case's own and two
#: others; each seed calibrates its own quantization; the worst values are in
#: docs/slack/model-seeds.json, written by ``python -m
#: vgf_conformance.harness.measurements.model_bounds``): each LSB bound is 1.5x the worst
#: observed, rounded down to 0.01 (a bias below 0.01 counts as 0.01); each SNR
#: floor is the worst observed minus 3.5 dB (1.5x the error's amplitude),
#: rounded up to 0.1. A model states every field of every comparison (the
#: family has no default): against the fake-quantized program max, p99 and
#: bias; against the float model (raw and on dequantized inputs) SNR, p99 and
#: bias, with a max cap. Why deep graphs need this: each requantizing op
#: may round a value 1 LSB apart in TOSA and in torch, and later convs carry
#: and amplify that difference; the worst element grows with depth, the bulk
#: of the distribution does not.
MODEL_BOUNDS: dict[str, tuple[str, dict[str, dict]]] = {
    "ifnet": (
        "IFNet-style frame interpolation (2 flow blocks of 4 convs, 5 bilinear resizes, 4 grid_sample "
        "warps through base grid + computed flow, a sigmoid mask blend): measured vs fake-quant max 4, "
        "p99 1; vs the float model on dequantized inputs max 4.14, p99 2.26, SNR >= 34.1 dB; vs float "
        "max 4.40, p99 2.27, SNR >= 34.0 dB (the computed flow is an int8 activation, so sample "
        "positions move by up to half its step)",
        {"vs_fake_quant": _statistical(6, 1.5, bias_lsb=0.015),
         "vs_float_dq": _statistical(6.21, 3.38, 30.7, bias_lsb=0.102),
         "vs_float": _statistical(6.6, 3.4, 30.5, bias_lsb=0.1)}),
    "superres": (
        "x2 super-resolution (3 convs, pixel_shuffle, a bilinear skip, a clamp): measured vs fake-quant "
        "max 3, p99 1; vs dequantized-input float max 1.62, p99 1.26, SNR >= 40.1 dB; vs float max "
        "1.88, p99 1.36, SNR >= 39.7 dB",
        {"vs_fake_quant": _statistical(4.5, 1.5, bias_lsb=0.084),
         "vs_float_dq": _statistical(2.42, 1.88, 36.7, bias_lsb=0.083),
         "vs_float": _statistical(2.82, 2.03, 36.2, bias_lsb=0.082)}),
    "laplacian-blend": (
        "a 3-level Laplacian pyramid blend (9 bilinear downscales, 9 size-given upscales, about 30 "
        "requantizing adds, subs and muls): measured vs fake-quant max 4, p99 2; vs dequantized-input "
        "float max 3.53, p99 1.99, SNR >= 35.6 dB; vs float max 3.44, p99 2.06, SNR >= 35.4 dB",
        {"vs_fake_quant": _statistical(6, 3, bias_lsb=0.074),
         "vs_float_dq": _statistical(5.29, 2.98, 32.2, bias_lsb=0.074),
         "vs_float": _statistical(5.15, 3.08, 31.9, bias_lsb=0.075)}),
    "affine-stabilize": (
        "an affine warp (affine_grid in the graph, float inside the VGF delegate, an SNORM16 grid, one "
        "grid_sample of an RGBA frame): measured vs fake-quant max 1, p99 0 (errors are whole LSB: a "
        "p99 of 0.5 allows 1 % off by one); vs dequantized-input float max 2.01, p99 1.33, "
        "SNR >= 40.4 dB; vs float max 2.12, p99 1.37, SNR >= 40.1 dB",
        {"vs_fake_quant": _statistical(1.5, 0, bias_lsb=0.015),
         "vs_float_dq": _statistical(3.01, 1.99, 37, bias_lsb=0.016),
         "vs_float": _statistical(3.17, 2.05, 36.7, bias_lsb=0.015)}),
    "segmentation": (
        "a segmentation head (5 convs, 3 of them stride 2, logits at 1/8 resized to the input with "
        "align_corners False and True; float outputs, in units of 1/127, the logits' int8 step is about "
        "1.4 of them): the lowered program is farther from fake-quant (measured max 12.12, p99 8.66, "
        "bias +0.90) than fake-quant is from float (max 4.94, p99 2.89): each conv+ReLU's folded "
        "RESCALE saturates at -128 instead of the ReLU's zero point -127 (docs/divergences.md, "
        "'ReLU folded into a narrow-range RESCALE'), a shift the next convs carry and amplify; a fix "
        "upstream shows as a numerics change in the golden; vs dequantized-input float max 11.55, p99 8.50, SNR >= "
        "24.6 dB; vs float max 11.37, p99 8.48, SNR >= 24.6 dB",
        {"vs_fake_quant": _statistical(18.17, 12.98, bias_lsb=1.359),
         "vs_float_dq": _statistical(17.32, 12.74, 21.1, bias_lsb=1.514),
         "vs_float": _statistical(17.05, 12.72, 21.1, bias_lsb=1.504)}),
    "unet": (
        "a two-level U-Net (6 convs, max-pools, nearest x2 upsampling, skip concatenations, a clamp): "
        "measured vs fake-quant max 9, p99 6, bias 0.43 (five conv+ReLUs, each 1 LSB below its zero "
        "on negative inputs, as in the segmentation head); vs dequantized-input float max 10.03, p99 "
        "5.83, SNR >= 28.2 dB; vs float max 10.07, p99 5.94, SNR >= 28.1 dB",
        {"vs_fake_quant": _statistical(13.5, 9, bias_lsb=0.639),
         "vs_float_dq": _statistical(15.04, 8.74, 24.8, bias_lsb=0.473),
         "vs_float": _statistical(15.1, 8.91, 24.7, bias_lsb=0.449)}),
}
