"""The small models the suite exports. Each is a plain ``nn.Module`` whose
constructor arguments say everything about it (they appear in case ids, and
``repr()`` states them, so a golden's ``case.model`` says what was exported)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _Described(nn.Module):
    """``repr()`` lists the constructor arguments named in ``PARAMS``."""

    PARAMS: tuple[str, ...] = ()

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self.PARAMS)


class Resize(_Described):
    """``F.interpolate`` by a scale factor or to a size."""

    PARAMS = ("mode", "align_corners", "scale_factor", "size", "recompute_scale_factor", "antialias")

    def __init__(
        self,
        mode: str = "bilinear",
        *,
        align_corners: bool | None = None,
        scale_factor: float | tuple[float, float] | None = None,
        size: tuple[int, int] | None = None,
        recompute_scale_factor: bool | None = None,
        antialias: bool = False,
    ) -> None:
        super().__init__()
        if (scale_factor is None) == (size is None):
            raise ValueError("Resize: give exactly one of scale_factor and size")
        self.mode = mode
        self.align_corners = align_corners if mode not in ("nearest", "nearest-exact") else None
        self.scale_factor = scale_factor
        self.size = size
        self.recompute_scale_factor = recompute_scale_factor
        self.antialias = antialias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(
            x,
            size=self.size,
            scale_factor=self.scale_factor,
            mode=self.mode,
            align_corners=self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
            antialias=self.antialias,
        )


class GridSample(_Described):
    PARAMS = ("mode", "padding_mode", "align_corners")

    def __init__(
        self, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool = False
    ) -> None:
        super().__init__()
        self.mode = mode
        self.padding_mode = padding_mode
        self.align_corners = align_corners

    def forward(self, image: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(
            image,
            grid,
            mode=self.mode,
            padding_mode=self.padding_mode,
            align_corners=self.align_corners,
        )


def _seeded_conv(cin: int, cout: int, seed: int) -> nn.Conv2d:
    conv = nn.Conv2d(cin, cout, 3, padding=1)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen) * 0.1)
        conv.bias.copy_(torch.randn(conv.bias.shape, generator=gen) * 0.05)
    return conv


class ConvRelu(_Described):
    """3x3 conv + relu with seeded weights."""

    PARAMS = ("channels", "seed")

    def __init__(self, channels: int = 4, seed: int = 0) -> None:
        super().__init__()
        self.channels, self.seed = channels, seed
        self.conv = _seeded_conv(channels, channels, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class ConvResizeConv(_Described):
    """conv + relu, a bilinear resize, conv (seeded weights)."""

    PARAMS = ("channels", "scale_factor", "seed")

    def __init__(self, channels: int = 4, scale_factor: float = 2.0, seed: int = 0) -> None:
        super().__init__()
        self.channels, self.seed = channels, seed
        self.pre = _seeded_conv(channels, channels, seed)
        self.post = _seeded_conv(channels, channels, seed + 1)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.pre(x))
        y = F.interpolate(y, scale_factor=self.scale_factor, mode="bilinear", align_corners=False)
        return self.post(y)


class ChainedResize(_Described):
    """Several bilinear resizes in a row, by the given factors."""

    PARAMS = ("factors",)

    def __init__(self, factors: tuple[float, ...] = (0.5, 2.0)) -> None:
        super().__init__()
        self.factors = tuple(factors)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for f in self.factors:
            x = F.interpolate(x, scale_factor=f, mode="bilinear", align_corners=False)
        return x


class FlowWarp(_Described):
    """Resize a low-resolution flow field to a sampling grid, warp the image."""

    PARAMS = ("mode", "padding_mode")

    def __init__(self, mode: str = "bilinear", padding_mode: str = "border") -> None:
        super().__init__()
        self.mode = mode
        self.padding_mode = padding_mode

    def forward(self, image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        n, _, h, w = image.shape
        flow = F.interpolate(flow, size=(h, w), mode="bilinear", align_corners=False)
        grid = flow.permute(0, 2, 3, 1)
        return F.grid_sample(
            image, grid, mode=self.mode, padding_mode=self.padding_mode, align_corners=False
        )


class TwoInTwoOut(nn.Module):
    """Two images in; their blend downscaled and the second upscaled out."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mixed = (a + b) * 0.5
        down = F.interpolate(mixed, scale_factor=0.5, mode="bilinear", align_corners=False)
        up = F.interpolate(b, scale_factor=2.0, mode="nearest")
        return down, up


def _base_grid(n: int, h: int, w: int) -> torch.Tensor:
    """The identity sampling grid [n, h, w, 2] (x, y) of align_corners=False:
    pixel centres, as frame-interpolation models build it."""
    xs = torch.linspace(-1 + 1 / w, 1 - 1 / w, w)
    ys = torch.linspace(-1 + 1 / h, 1 - 1 / h, h)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack((gx, gy), dim=-1).unsqueeze(0).expand(n, h, w, 2)


class BaseGridFlowWarp(_Described):
    """The frame-interpolation warp: a constant base grid plus a predicted
    flow at the image's resolution, ``grid_sample(image, base + flow.permute(0, 2, 3, 1))``.

    ``base``: "buffer" (a registered buffer built for ``size`` and ``batch``)
    or "linspace" (built in ``forward`` with ``torch.linspace``/``meshgrid``).
    """

    PARAMS = ("mode", "padding_mode", "base", "size", "batch")

    def __init__(self, mode: str = "bilinear", padding_mode: str = "border", base: str = "buffer",
                 size: tuple[int, int] = (12, 16), batch: int = 1) -> None:
        super().__init__()
        if base not in ("buffer", "linspace"):
            raise ValueError(f"BaseGridFlowWarp: base must be 'buffer' or 'linspace', got {base!r}")
        self.mode, self.padding_mode, self.base = mode, padding_mode, base
        self.size, self.batch = tuple(size), batch
        if base == "buffer":
            self.register_buffer("base_grid", _base_grid(batch, *size).contiguous())

    def forward(self, image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        n, _, h, w = flow.shape
        base = self.base_grid if self.base == "buffer" else _base_grid(n, h, w)
        grid = base + flow.permute(0, 2, 3, 1)
        return F.grid_sample(image, grid, mode=self.mode, padding_mode=self.padding_mode, align_corners=False)


class BaseGridPlusFlow(_Described):
    """The warp's grid alone: a constant base grid (a registered buffer) plus a
    flow, ``base + flow.permute(0, 2, 3, 1)``, as a program output (what a
    grid sampler would read)."""

    PARAMS = ("size",)

    def __init__(self, size: tuple[int, int] = (12, 16)) -> None:
        super().__init__()
        self.size = tuple(size)
        self.register_buffer("base_grid", _base_grid(1, *size).contiguous())

    def forward(self, flow: torch.Tensor) -> torch.Tensor:
        return self.base_grid + flow.permute(0, 2, 3, 1)


class ModeChain(_Described):
    """Resizes in a row, each with its own mode: ``steps`` of (mode, scale factor)."""

    PARAMS = ("steps",)

    def __init__(self, steps: tuple[tuple[str, float], ...] = (("bilinear", 2.0), ("nearest", 0.5))) -> None:
        super().__init__()
        self.steps = tuple((str(m), float(f)) for m, f in steps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for mode, factor in self.steps:
            ac = False if mode == "bilinear" else None
            x = F.interpolate(x, scale_factor=factor, mode=mode, align_corners=ac)
        return x
