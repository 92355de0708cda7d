"""The model tier's models: small, realistic architectures of the kind a team
ships to Vulkan, with seeded weights (nothing is downloaded).

Each is a plain ``nn.Module`` whose constructor arguments say everything
about it (``repr()`` states them, so a golden's ``case.model`` says what was
exported). Weights are drawn from a generator seeded by ``seed``, scaled so
that activations stay in a trained network's range (about [-1, 1]: He-like
initialisation scaled down) and image outputs within the SNORM range.

* :class:`IFNetLite`: frame interpolation in the style of RIFE's IFNet.
* :class:`SuperResolution`: conv features, ``pixel_shuffle``, a bilinear skip.
* :class:`LaplacianBlend`: a Laplacian pyramid blend of two images.
* :class:`AffineStabilize`: an affine warp built with ``affine_grid``.
* :class:`SegmentationHead`: a strided backbone, logits resized to the input.
* :class:`TinyUNet`: a two-level U-Net, nearest upsampling, skip concatenations.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vgf_conformance.cases.op_models import _Described


def _init(module: nn.Module, seed: int, gain: float = 0.5) -> nn.Module:
    """Seeded weights for every conv of ``module``: normal with std
    ``gain * sqrt(2 / fan_in)``, biases normal with std 0.02."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * gain * math.sqrt(2.0 / fan_in))
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.02)
    return module


def _conv(cin: int, cout: int, stride: int = 1, k: int = 3) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2)


def base_grid(h: int, w: int) -> torch.Tensor:
    """The identity sampling grid [1, h, w, 2] (x, y) of ``align_corners=False``."""
    xs = torch.linspace(-1 + 1 / w, 1 - 1 / w, w)
    ys = torch.linspace(-1 + 1 / h, 1 - 1 / h, h)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack((gx, gy), dim=-1).unsqueeze(0)


class _FlowBlock(nn.Module):
    """IFNet's IFBlock, small: two stride-2 convs, a conv, a stride-1 head
    predicting 4 flow channels (both frames' flows, in grid units) and a mask
    logit at 1/4 of its input's resolution; the flow is upsampled bilinearly
    back by 4."""

    def __init__(self, cin: int, width: int) -> None:
        super().__init__()
        self.down = nn.Sequential(_conv(cin, width, 2), nn.ReLU(), _conv(width, width, 2), nn.ReLU(),
                                  _conv(width, width), nn.ReLU())
        self.head = _conv(width, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.head(self.down(x))
        out = F.interpolate(out, scale_factor=4.0, mode="bilinear", align_corners=False)
        return torch.tanh(out[:, :4]) * 0.1, out[:, 4:5]


class IFNetLite(_Described):
    """Frame interpolation in the style of RIFE's IFNet, at two scales.

    Scale 1: both frames downscaled by 2 (bilinear), a flow block (strided
    convs) predicts both frames' flows and a mask at 1/8 and upsamples them
    bilinearly; they are upsampled again (x2, bilinear) to full resolution.
    Both frames are warped backwards with ``grid_sample`` through a constant
    base grid (a buffer) plus the flow. Scale 2: a second block sees the
    frames, the warped frames and the flow at full resolution and refines
    flow and mask. The result: the two final warps blended by the sigmoid
    of the mask."""

    PARAMS = ("size", "width", "seed")

    def __init__(self, size: tuple[int, int] = (64, 96), width: int = 16, seed: int = 0) -> None:
        super().__init__()
        self.size, self.width, self.seed = tuple(size), width, seed
        self.block0 = _FlowBlock(6, width)
        self.block1 = _FlowBlock(6 + 6 + 4 + 1, width)
        _init(self, seed)
        self.register_buffer("grid", base_grid(*self.size))

    def _warp(self, image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        grid = self.grid + flow.permute(0, 2, 3, 1)
        return F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)

    def forward(self, img0: torch.Tensor, img1: torch.Tensor) -> torch.Tensor:
        half = F.interpolate(torch.cat((img0, img1), 1), scale_factor=0.5, mode="bilinear", align_corners=False)
        flow, mask = self.block0(half)
        flow = F.interpolate(flow, scale_factor=2.0, mode="bilinear", align_corners=False)
        mask = F.interpolate(mask, scale_factor=2.0, mode="bilinear", align_corners=False)
        warped0, warped1 = self._warp(img0, flow[:, :2]), self._warp(img1, flow[:, 2:])
        delta, dmask = self.block1(torch.cat((img0, img1, warped0, warped1, flow, mask), 1))
        flow, mask = flow + delta, torch.sigmoid(mask + dmask)
        warped0, warped1 = self._warp(img0, flow[:, :2]), self._warp(img1, flow[:, 2:])
        return warped0 * mask + warped1 * (1 - mask)


class SuperResolution(_Described):
    """x``scale`` super-resolution (ESPCN-like): conv feature extraction,
    a conv to ``channels * scale**2`` and ``pixel_shuffle``, plus the input
    upscaled bilinearly (the skip); clamped to the image range."""

    PARAMS = ("channels", "scale", "width", "seed")

    def __init__(self, channels: int = 3, scale: int = 2, width: int = 16, seed: int = 1) -> None:
        super().__init__()
        self.channels, self.scale, self.width, self.seed = channels, scale, width, seed
        self.features = nn.Sequential(_conv(channels, width, k=5), nn.ReLU(), _conv(width, width), nn.ReLU(),
                                      _conv(width, channels * scale * scale))
        _init(self, seed, gain=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = F.pixel_shuffle(self.features(x), self.scale)
        skip = F.interpolate(x, scale_factor=float(self.scale), mode="bilinear", align_corners=False)
        return torch.clamp(skip + residual, -1.0, 1.0)


class LaplacianBlend(_Described):
    """Blend two images with a mask through Laplacian pyramids of ``levels``
    levels: Gaussian levels by bilinear downscales by 2, each Laplacian level
    the difference to the next level upscaled to its size (``size=``), the
    levels blended with the mask's own pyramid, then collapsed by size-given
    upscales. The mask is an SNORM image: -1 takes ``b``, 1 takes ``a``."""

    PARAMS = ("levels",)

    def __init__(self, levels: int = 3) -> None:
        super().__init__()
        self.levels = levels

    @staticmethod
    def _up(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=tuple(like.shape[-2:]), mode="bilinear", align_corners=False)

    def _pyramid(self, x: torch.Tensor) -> list[torch.Tensor]:
        levels = [x]
        for _ in range(self.levels):
            levels.append(F.interpolate(levels[-1], scale_factor=0.5, mode="bilinear", align_corners=False))
        return levels

    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        ga, gb, gm = self._pyramid(a), self._pyramid(b), self._pyramid((mask + 1) * 0.5)
        out = ga[-1] * gm[-1] + gb[-1] * (1 - gm[-1])
        for i in reversed(range(self.levels)):
            la = ga[i] - self._up(ga[i + 1], ga[i])
            lb = gb[i] - self._up(gb[i + 1], gb[i])
            out = self._up(out, ga[i]) + la * gm[i] + lb * (1 - gm[i])
        return out


class AffineStabilize(_Described):
    """Video stabilisation's warp: the stabiliser's per-frame correction
    ``delta`` [n, 2, 3] (an input), scaled by 1/4 and added to the identity
    transform, turned into a sampling grid by ``affine_grid`` inside the
    graph; the RGBA frame resampled bilinearly with border padding."""

    PARAMS = ("size",)

    def __init__(self, size: tuple[int, int] = (96, 128)) -> None:
        super().__init__()
        self.size = tuple(size)
        self.register_buffer("identity", torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]))

    def forward(self, image: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        theta = self.identity + delta * 0.25
        grid = F.affine_grid(theta, [image.shape[0], image.shape[1], *self.size], align_corners=False)
        return F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)


class SegmentationHead(_Described):
    """Semantic segmentation: a strided backbone (three stride-2 convs, to
    1/8), a 1x1 classifier to ``classes`` logits, upsampled bilinearly to the
    input's size twice: with ``align_corners=False`` and ``True`` (two
    outputs, as DeepLab-style and older FCN-style heads do)."""

    PARAMS = ("classes", "width", "seed")

    def __init__(self, classes: int = 6, width: int = 16, seed: int = 2) -> None:
        super().__init__()
        self.classes, self.width, self.seed = classes, width, seed
        self.backbone = nn.Sequential(_conv(3, width, 2), nn.ReLU(), _conv(width, width, 2), nn.ReLU(),
                                      _conv(width, 2 * width, 2), nn.ReLU(), _conv(2 * width, 2 * width), nn.ReLU())
        self.classifier = _conv(2 * width, classes, k=1)
        _init(self, seed, gain=1.0)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.classifier(self.backbone(x))
        size = tuple(x.shape[-2:])
        return (F.interpolate(logits, size=size, mode="bilinear", align_corners=False),
                F.interpolate(logits, size=size, mode="bilinear", align_corners=True))


class TinyUNet(_Described):
    """A two-level U-Net: conv blocks, 2x2 max-pool downsampling, nearest x2
    upsampling, skip connections concatenated with the upsampled features,
    a 1x1 conv to the output image; clamped to the image range."""

    PARAMS = ("channels", "width", "seed")

    def __init__(self, channels: int = 3, width: int = 8, seed: int = 3) -> None:
        super().__init__()
        self.channels, self.width, self.seed = channels, width, seed
        w = width
        self.enc0 = nn.Sequential(_conv(channels, w), nn.ReLU())
        self.enc1 = nn.Sequential(_conv(w, 2 * w), nn.ReLU())
        self.mid = nn.Sequential(_conv(2 * w, 4 * w), nn.ReLU())
        self.dec1 = nn.Sequential(_conv(4 * w + 2 * w, 2 * w), nn.ReLU())
        self.dec0 = nn.Sequential(_conv(2 * w + w, w), nn.ReLU())
        self.out = _conv(w, channels, k=1)
        _init(self, seed, gain=1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e0 = self.enc0(x)
        e1 = self.enc1(F.max_pool2d(e0, 2))
        m = self.mid(F.max_pool2d(e1, 2))
        d1 = self.dec1(torch.cat((F.interpolate(m, scale_factor=2.0, mode="nearest"), e1), 1))
        d0 = self.dec0(torch.cat((F.interpolate(d1, scale_factor=2.0, mode="nearest"), e0), 1))
        return torch.clamp(self.out(d0), -1.0, 1.0)
