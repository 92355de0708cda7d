"""The resize family's parameter tables: the modes, factors, sizes and shapes its builders walk."""

from __future__ import annotations

from fractions import Fraction as F

#: The modes of the full matrix (every factor, per-axis factor and size), by the
#: name the case ids use -> ``F.interpolate``'s arguments.
MODES = {
    "bilinear-ac0": dict(mode="bilinear", align_corners=False),
    "bilinear-ac1": dict(mode="bilinear", align_corners=True),
    "nearest": dict(mode="nearest"),
}
#: Scale factors on both axes, from 8 up to 1/64 down.
FACTORS = [
    F(8), F(4), F(2), F(3, 2), F(4, 3), F(1), F(3, 4), F(2, 3), F(1, 2),
    F(1, 3), F(1, 4), F(1, 8), F(1, 15), F(1, 16), F(1, 17), F(1, 32), F(1, 64),
]
#: (H factor, W factor): different per axis.
AXIS_FACTORS = [
    (F(2), F(1, 2)), (F(1, 2), F(1, 4)), (F(4), F(1, 16)), (F(1, 32), F(1, 2)), (F(3, 2), F(3, 4)),
]
#: (input HxW, output HxW) given as sizes, from odd input sizes.
SIZES = [
    ((37, 53), (16, 16)), ((37, 53), (64, 96)), ((17, 31), (8, 12)),
    ((53, 37), (5, 7)), ((31, 31), (1, 1)), ((64, 48), (3, 2)),
]
#: Input sizes and scale factors whose output floor(in * s) is not an exact
#: multiple of the input: PyTorch samples with the given factor, unless
#: recompute_scale_factor=True (then with out/in, as a size does).
NONEXACT = [((7, 7), F(3, 2)), ((9, 13), F(3, 2)), ((20, 17), F(3, 10)), ((10, 13), F(7, 10)),
            ((5, 7), F(5, 2)), ((10, 11), F(1, 3))]
#: (mode, factor, channels): channel counts other than 4.
CHANNELS = [
    ("bilinear-ac0", F(2), 1), ("bilinear-ac0", F(2), 2), ("bilinear-ac0", F(2), 3),
    ("bilinear-ac0", F(2), 8), ("bilinear-ac0", F(2), 16),
    ("bilinear-ac0", F(1, 2), 1), ("bilinear-ac0", F(1, 2), 3), ("bilinear-ac0", F(1, 2), 16),
    ("nearest", F(2), 1), ("nearest", F(2), 3), ("nearest", F(2), 8),
]
#: (mode, input HxW, output HxW): 1x1 inputs, 1x1 outputs of non-square inputs.
EDGE_SIZES = [
    ("bilinear-ac0", (1, 1), (5, 7)), ("bilinear-ac1", (1, 1), (5, 7)), ("nearest", (1, 1), (5, 7)),
    ("bilinear-ac0", (6, 10), (1, 1)), ("nearest", (6, 10), (1, 1)), ("bilinear-ac0", (13, 40), (1, 1)),
]
#: (mode, input HxW, factor): odd, non-square widths (no multiple of 4 or 16).
ODD_WIDTHS = [
    ("bilinear-ac0", (9, 31), F(2)), ("bilinear-ac0", (9, 31), F(1, 2)),
    ("bilinear-ac0", (13, 17), F(2)), ("bilinear-ac0", (13, 17), F(1, 2)),
    ("bilinear-ac0", (7, 45), F(2)), ("bilinear-ac0", (7, 45), F(1, 2)),
    ("nearest", (9, 31), F(2)), ("nearest", (13, 17), F(1, 2)), ("nearest", (7, 45), F(2)),
    ("bilinear-ac1", (13, 17), F(2)), ("bilinear-ac1", (7, 45), F(1, 2)),
]
#: (mode, input HxW, factor): 256x256 and 480x270 (HxW 270x480) thumbnails, and
#: the smallest split of a factor whose output is not an exact multiple (31x31).
LARGE = [
    ("bilinear-ac0", (31, 31), F(1, 16)),
    ("bilinear-ac0", (256, 256), F(1, 16)), ("bilinear-ac0", (256, 256), F(1, 64)),
    ("bilinear-ac0", (270, 480), F(1, 16)), ("bilinear-ac0", (270, 480), F(1, 64)),
    ("nearest", (256, 256), F(1, 16)), ("nearest", (270, 480), F(1, 64)),
    ("bilinear-ac1", (256, 256), F(1, 16)),
]
#: Modes beyond MODES, at a few factors.
OTHER_MODES = {
    "nearest-exact": dict(mode="nearest-exact"),
    "bicubic-ac0": dict(mode="bicubic", align_corners=False),
    "bicubic-ac1": dict(mode="bicubic", align_corners=True),
    "bilinear-ac0-aa": dict(mode="bilinear", align_corners=False, antialias=True),
}
MODE_FACTORS = [
    ("nearest-exact", F(2)), ("nearest-exact", F(1, 2)), ("nearest-exact", F(2, 3)),
    ("bicubic-ac0", F(2)), ("bicubic-ac0", F(1, 2)), ("bicubic-ac1", F(2)),
    ("bilinear-ac0-aa", F(1, 2)), ("bilinear-ac0-aa", F(1, 4)), ("bilinear-ac0-aa", F(2)),
]
