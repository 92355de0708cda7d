"""TOSA 1.0 ERROR_IF rules, restated statically.

The reference model rejects an operator that breaks one of these at run
time; stating them here lets a golden say which operators of a lowered graph
are invalid without running anything (``tosa.spec_errors``).
"""

from __future__ import annotations


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
