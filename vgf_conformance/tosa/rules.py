"""RESIZE legality, in one place.

* :func:`resize_spec_errors`: the TOSA 1.0 ERROR_IF rules, restated
  statically. The reference model rejects an operator that breaks one of
  these at run time; stating them here lets a golden say which operators of a
  lowered graph are invalid without running anything (``tosa.spec_errors``).
* :func:`tosa_resize_error`: the VGF partitioner's support check, which
  keeps a RESIZE it would refuse on the CPU (the case table declares which).
* :func:`tosa_resize_1d`: the RESIZE parameters ExecuTorch computes for one
  axis, which both judge.
"""

from __future__ import annotations

from fractions import Fraction as F


def resize_spec_errors(in_shape, out_shape, scale, offset, border) -> list[str]:
    """Static re-statement of the TOSA 1.0 RESIZE ERROR_IF rules (reference
    model src/ops/image.cpp). Empty list == valid."""
    errs = []
    if len(scale) != 4 or len(offset) != 2 or len(border) != 2:
        return ["scale/offset/border not constant or wrong length"]
    yn, yd, xn, xd = scale
    oy, ox = offset
    by, bx = border
    ih, iw = in_shape[1], in_shape[2]
    oh, ow = out_shape[1], out_shape[2]
    if max(ih, iw, oh, ow) >= 16384:
        errs.append("max(IH,IW,OH,OW) >= 16384")
    if min(yn, yd, xn, xd) <= 0:
        errs.append("scale values must be > 0")
    else:
        if yn > 2048 or xn > 2048:
            errs.append("scale_n > 2048")
        if yd >= 16 * yn or xd >= 16 * xn:
            errs.append(f"scale_d >= 16*scale_n (downscale <= 1/16): y={yn}/{yd} x={xn}/{xd}")
        if oy < -yn or oy >= 16 * yn or ox < -xn or ox >= 16 * xn:
            errs.append("offset out of [-scale_n, 16*scale_n)")
        if by < -16 * yn or by >= yn or bx < -16 * xn or bx >= xn:
            errs.append("border out of [-16*scale_n, scale_n)")
        for dim, i, o, n, d, off, b in (("H", ih, oh, yn, yd, oy, by), ("W", iw, ow, xn, xd, ox, bx)):
            num = (i - 1) * n - off + b
            if num % d != 0:
                errs.append(f"O{dim}: ((I{dim}-1)*n - offset + border) not divisible by scale_d")
            elif o != num // d + 1:
                errs.append(f"O{dim}={o} != expected {num // d + 1}")
    return errs


def tosa_resize_1d(in_size: int, out_size: int, align_corners: bool, nearest: bool,
                   factor: float | None) -> tuple[int, int, int, int]:
    """(scale_n, scale_d, offset, border) of one axis as ExecuTorch 1.5.1's
    ``RewriteUpsamplePass.get_resize_parameters_1d`` computes them (without
    vgf_export's bilinear-scale-factor patch): nearest with a factor samples
    with the factor (pytorch/executorch#22437), everything else with the
    size ratio ((out-1)/(in-1) with align_corners=True and both sizes > 1)."""
    corners = align_corners and in_size > 1 and out_size > 1
    if nearest and factor is not None:
        ratio = F(factor).limit_denominator(10**6)  # ExecuTorch: sympy.nsimplify(tolerance=1e-6)
    else:
        ratio = F(out_size - 1, in_size - 1) if corners else F(out_size, in_size)
    n, d = 2 * ratio.numerator, 2 * ratio.denominator
    if nearest:
        offset = d // 2 - n // 2 if ratio.denominator == 1 else -(n // 2)
    else:
        offset = 0 if align_corners else d // 2 - n // 2
    return n, d, offset, d * (out_size - 1) - n * (in_size - 1) + offset


def tosa_resize_error(axes) -> str | None:
    """The VGF partitioner's support check of a RESIZE (ExecuTorch 1.5.1's
    ``get_tosa_resize_validation_error``) on the (n, d, offset, border) of the
    H and W axes: its message, or None where the RESIZE is legal."""
    (yn, yd, oy, by), (xn, xd, ox, bx) = axes
    if yd >= 16 * yn or xd >= 16 * xn:
        return f"RESIZE downscale must be strictly greater than 1/16; got y={yn}/{yd}, x={xn}/{xd}"
    if max(yn, xn) > 2048 or max(yd, xd) > 2**15 - 1:
        return f"RESIZE scale out of range; got y={yn}/{yd}, x={xn}/{xd}"
    for axis, n, offset, border in (("y", yn, oy, by), ("x", xn, ox, bx)):
        if not -n <= offset < 16 * n:
            return f"RESIZE offset_{axis} must be in [{-n}, {16 * n}); got {offset}"
        if not -16 * n <= border < n:
            return f"RESIZE border_{axis} must be in [{-16 * n}, {n}); got {border}"
    return None
