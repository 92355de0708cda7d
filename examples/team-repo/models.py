"""The team's models: what it ships to Vulkan through ExecuTorch's VGF path.

Plain PyTorch modules; nothing here knows about the conformance suite.
``extra_repr`` states each model's parameters, so the golden of a case says
which model it exported.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Thumbnailer(nn.Module):
    """A camera thumbnail: a 3x3 binomial blur per channel (so the downscale
    does not alias), then a resize by ``scale``."""

    def __init__(self, scale: float = 0.25, mode: str = "bilinear") -> None:
        super().__init__()
        self.scale, self.mode = scale, mode
        taps = torch.tensor([1.0, 2.0, 1.0])
        kernel = (taps[:, None] * taps[None, :]) / 16
        self.blur = nn.Conv2d(3, 3, 3, padding=1, groups=3, bias=False)
        with torch.no_grad():
            self.blur.weight.copy_(kernel.expand(3, 1, 3, 3))

    def extra_repr(self) -> str:
        return f"scale={self.scale}, mode={self.mode!r}"

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        align_corners = False if self.mode == "bilinear" else None
        return F.interpolate(self.blur(image), scale_factor=self.scale, mode=self.mode,
                             align_corners=align_corners)


class BackwardWarp(nn.Module):
    """Frame interpolation's backward warp: ``grid_sample(image, base + flow)``,
    the flow predicted at the image's resolution, in grid units ([-1, 1] is
    the image's width and height), the base grid a buffer of pixel centres."""

    def __init__(self, height: int, width: int, padding_mode: str = "border") -> None:
        super().__init__()
        self.padding_mode = padding_mode
        xs = torch.linspace(-1 + 1 / width, 1 - 1 / width, width)
        ys = torch.linspace(-1 + 1 / height, 1 - 1 / height, height)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        self.register_buffer("base", torch.stack((gx, gy), dim=-1).unsqueeze(0))

    def extra_repr(self) -> str:
        return f"size={tuple(self.base.shape[1:3])}, padding_mode={self.padding_mode!r}"

    def forward(self, image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        grid = self.base + flow.permute(0, 2, 3, 1)
        return F.grid_sample(image, grid, mode="bilinear", padding_mode=self.padding_mode, align_corners=False)
