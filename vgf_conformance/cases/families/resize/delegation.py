"""What the pinned stack does with a resize: whether the resize-split
workaround rewrites it, why the VGF partitioner keeps it on the CPU, and which
modes it delegates only in part."""

from __future__ import annotations

from vgf_conformance.tosa.rules import tosa_resize_1d, tosa_resize_error


def is_split(model_kwargs: dict, in_hw, out_hw) -> bool:
    """Whether the resize split pass rewrites this resize (bilinear,
    align_corners=False, a downscale by 16 or more on an axis)."""
    if (model_kwargs.get("mode") != "bilinear" or model_kwargs.get("align_corners")
            or model_kwargs.get("antialias")):
        return False
    return any(i >= 16 * o for i, o in zip(in_hw, out_hw))


def cpu_reason(model_kwargs: dict, in_hw, out_hw) -> str | None:
    """Why the VGF partitioner keeps this resize on the CPU on the pinned
    ExecuTorch, or None: its support check of the RESIZE ExecuTorch would emit
    (:func:`tosa_resize_error`). Bilinear with align_corners=False is never
    refused: downscales by 16 or more are split first (the resize-split
    workaround), and vgf_export's bilinear-scale-factor patch encodes the rest
    (where it cannot, the lowering fails: a case's expectation says so)."""
    mode = model_kwargs.get("mode")
    if model_kwargs.get("antialias"):
        return ("bilinear with antialias=True (aten._upsample_bilinear2d_aa): ExecuTorch 1.5.1 has "
                "no TOSA lowering of it and no decomposition, so the VGF partitioner claims nothing")
    if mode not in ("bilinear", "nearest") or (mode == "bilinear" and not model_kwargs.get("align_corners")):
        return None
    nearest = mode == "nearest"
    scale = None if model_kwargs.get("recompute_scale_factor") else model_kwargs.get("scale_factor")
    scales = scale if isinstance(scale, tuple) else (scale, scale)
    error = tosa_resize_error([tosa_resize_1d(i, o, bool(model_kwargs.get("align_corners")), nearest, s)
                               for i, o, s in zip(in_hw, out_hw, scales)])
    if error is None:
        return None
    what = "nearest" if nearest else "bilinear align_corners=True (no split for it)"
    return (f"{what}, {in_hw[0]}x{in_hw[1]} -> {out_hw[0]}x{out_hw[1]}: the VGF partitioner refuses "
            f"the TOSA RESIZE ExecuTorch 1.5.1 would emit ({error})")


#: Modes ExecuTorch 1.5.1 does not lower as a resize: torch decomposes them into
#: index arithmetic and gathers, which the VGF partitioner takes only in part.
#: mode -> (compute ops on the CPU, why).
PARTLY_DELEGATED = {
    "nearest-exact": (
        ("aten.index.Tensor", "aten.unsqueeze_copy.default", "dim_order_ops._to_dim_order_copy.default"),
        "nearest-exact: nothing in ExecuTorch 1.5.1's Arm backend handles it; torch decomposes it "
        "into source-index arithmetic (arange, add, mul) and a gather (aten.index.Tensor). The VGF "
        "delegate only dequantizes the image and computes the indices; the index casts and "
        "reshapes and the gather itself run on the CPU, in float"),
    "bicubic": (
        ("aten.add.Tensor", "aten.clamp.default", "aten.index.Tensor", "aten.sub.Tensor",
         "dim_order_ops._to_dim_order_copy.default"),
        "bicubic: ExecuTorch 1.5.1 has no TOSA lowering of upsample_bicubic2d; torch decomposes "
        "it into index arithmetic, gathers (aten.index.Tensor) and weighted sums. Two VGF "
        "delegates take the arithmetic; the gathers, the index clamps and casts and some "
        "adds/subs between them run on the CPU"),
}
