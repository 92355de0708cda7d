"""A numpy reference of the grid-sampler delegate, driven by its payload.

:func:`grid_sample` follows PyTorch's CPU ``grid_sampler_2d`` (coordinate
unnormalization, border clipping, reflection, bilinear weights, nearest with
round-half-to-even), in float32; ``nearest_ties="up"`` rounds nearest's ties
up instead, as a hardware NEAREST sampler does (it picks texel
``floor(x + 0.5)``: the Vulkan tier samples that way). :func:`run_payload` executes one delegate as
its :class:`~vgf_export.grid_sampler_backend.GridSamplerPayload` describes it:
it dequantizes the SNORM image texels and the grid with the payload's qparams,
samples, and quantizes the result to the payload's output format.

Arrays are in logical layout: image [N, C, H, W], grid [N, Ho, Wo, 2].
"""

from __future__ import annotations

import numpy as np

from vgf_export.grid_sampler_backend import GridSamplerPayload, QuantParams

_F32 = np.float32


def _unnormalize(coord: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return (coord + _F32(1)) / _F32(2) * _F32(size - 1)
    return ((coord + _F32(1)) * _F32(size) - _F32(1)) / _F32(2)


def _clip(coord: np.ndarray, size: int) -> np.ndarray:
    return np.minimum(_F32(size - 1), np.maximum(coord, _F32(0)))


def _reflect(coord: np.ndarray, twice_low: int, twice_high: int) -> np.ndarray:
    if twice_low == twice_high:
        return np.zeros_like(coord)
    low = _F32(twice_low / 2)
    span = _F32((twice_high - twice_low) / 2)
    coord = np.abs(coord - low)
    extra = np.fmod(coord, span)
    flips = np.floor(coord / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low).astype(_F32)


def _source_index(coord, size, padding_mode, align_corners):
    coord = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        coord = _clip(coord, size)
    elif padding_mode != "zeros":
        raise ValueError(f"padding_mode must be zeros, border or reflection, got {padding_mode!r}")
    return coord


def _gather(image: np.ndarray, iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
    """image[n, :, iy, ix] for integer coordinates; 0 where out of bounds.
    iy, ix: [N, Ho, Wo]. Returns [N, C, Ho, Wo]."""
    n, _, h, w = image.shape
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    yc, xc = np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)
    batch = np.arange(n)[:, None, None]
    values = image[batch, :, yc, xc]  # [N, Ho, Wo, C]
    values = np.where(inside[..., None], values, _F32(0))
    return np.moveaxis(values, -1, 1)


#: How nearest sampling rounds a source index to a texel: PyTorch rounds half
#: to even (``nearbyint``); a Vulkan NEAREST sampler takes ``floor(x + 0.5)``.
NEAREST_TIES = {"even": np.rint, "up": lambda x: np.floor(x + _F32(0.5))}


def grid_sample(
    image: np.ndarray, grid: np.ndarray, mode: str, padding_mode: str, align_corners: bool,
    nearest_ties: str = "even",
) -> np.ndarray:
    """``torch.nn.functional.grid_sample`` for 4-D inputs, in float32
    (``nearest_ties``: a key of :data:`NEAREST_TIES`)."""
    image = np.asarray(image, dtype=_F32)
    grid = np.asarray(grid, dtype=_F32)
    _, _, h, w = image.shape
    ix = _source_index(grid[..., 0], w, padding_mode, align_corners)
    iy = _source_index(grid[..., 1], h, padding_mode, align_corners)
    if mode == "nearest":
        if nearest_ties not in NEAREST_TIES:
            raise ValueError(f"nearest_ties must be one of {sorted(NEAREST_TIES)}, got {nearest_ties!r}")
        to_texel = NEAREST_TIES[nearest_ties]
        return _gather(image, to_texel(iy).astype(np.int64), to_texel(ix).astype(np.int64))
    if mode != "bilinear":
        raise ValueError(f"mode must be bilinear or nearest, got {mode!r}")
    x0, y0 = np.floor(ix), np.floor(iy)
    x1, y1 = x0 + 1, y0 + 1
    wx1, wy1 = ix - x0, iy - y0
    wx0, wy0 = x1 - ix, y1 - iy
    x0i, y0i, x1i, y1i = (a.astype(np.int64) for a in (x0, y0, x1, y1))
    out = (
        _gather(image, y0i, x0i) * (wx0 * wy0)[:, None]
        + _gather(image, y0i, x1i) * (wx1 * wy0)[:, None]
        + _gather(image, y1i, x0i) * (wx0 * wy1)[:, None]
        + _gather(image, y1i, x1i) * (wx1 * wy1)[:, None]
    )
    return out.astype(_F32)


def dequantize(q: np.ndarray, quant: QuantParams | None) -> np.ndarray:
    """``(q - zero_point) * scale`` of ``q`` clamped to the qspec's range: as an
    SNORM texel converts (Vulkan: ``max(c / (2^(b-1) - 1), -1.0)``, so the
    lowest code -2^(b-1) reads as -1.0). A RESCALE before the sampler may
    write that code: ExecuTorch lowers a requantization to SNORM16 as a
    RESCALE saturating at -32768, not at the qspec's -32767
    (docs/divergences.md, "Base grid + flow")."""
    if quant is None:
        return np.asarray(q, dtype=_F32)
    q = np.clip(np.asarray(q), quant.quant_min, quant.quant_max)
    return (q.astype(_F32) - _F32(quant.zero_point)) * _F32(quant.scale)


def quantize(x: np.ndarray, quant: QuantParams, dtype: str) -> np.ndarray:
    """As quantized_decomposed.quantize_per_tensor: round half to even of
    ``x * (1/scale)``, plus the zero point, clamped."""
    q = np.rint(np.asarray(x, dtype=_F32) * _F32(1.0 / quant.scale)) + quant.zero_point
    return np.clip(q, quant.quant_min, quant.quant_max).astype(np.dtype(dtype))


def run_payload(payload: GridSamplerPayload, image: np.ndarray, grid: np.ndarray,
                nearest_ties: str = "even") -> np.ndarray:
    """Execute one grid-sampler delegate on its (possibly quantized) inputs."""
    if tuple(image.shape) != payload.image.shape:
        raise ValueError(f"image: payload expects shape {payload.image.shape}, got {image.shape}")
    if tuple(grid.shape) != payload.grid.shape:
        raise ValueError(f"grid: payload expects shape {payload.grid.shape}, got {grid.shape}")
    out = grid_sample(
        dequantize(image, payload.image.quant),
        dequantize(grid, payload.grid.quant),
        payload.interpolation,
        payload.padding_mode,
        payload.align_corners,
        nearest_ties,
    )
    if payload.output.quant is None:
        return out
    return quantize(out, payload.output.quant, payload.output.dtype)
