"""Comparing two outputs: error statistics in quantization steps (LSB), and
the :class:`Bound` a comparison is held to.

Errors are in quantization steps of each output; a float output is measured
in :data:`FLOAT_UNIT` (one SNORM8 step of a [-1, 1] image).

A bound has one of three modes. **Exact** (``max_lsb`` 0): outputs measured
bit-exact with their reference stay so. **Per element** (``max_lsb``, with an
optional outlier allowance capped from measurement, and a bias bound): for one
or two ops, where each requantizing op adds at most about an LSB. **Statistical** (``p99_lsb`` and
``min_snr_db`` beside a ``max_lsb`` cap): for deep graphs (the model tier),
where rounding differences accumulate over many ops, so the worst element
says little and a regression shows as more large errors (the 99th
percentile) or more error energy (the SNR).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: torch is imported where tensors are computed on
    import torch

# torch is imported where tensors are computed on: the report (on the xdist
# controller, which runs no case) reads Bound without it.

#: The unit of error for float outputs: one SNORM8 step.
FLOAT_UNIT = 1.0 / 127.0
#: Slack for float rounding in the error itself (a 1-LSB difference can
#: measure 1.0000001 LSB after dequantization).
EPSILON = 1e-3
#: The fewest elements a bias bound applies to. The bias is the mean of the
#: signed errors: on one element it is that element's error (which ``max_lsb``
#: bounds), and a systematic shift can be told from per-element rounding only
#: over many (the mean of n errors within +-1 LSB spreads as 1/sqrt(n): 1/8 LSB
#: at 64). The table's smallest outputs (a resize to 1x1, 2x3) are below it.
BIAS_MIN_ELEMENTS = 64


@dataclasses.dataclass
class Comparison:
    """Error statistics of ``got`` against ``expected``, in ``unit`` steps."""

    max_lsb: float
    mean_lsb: float
    p99_lsb: float  # 99th percentile of |error|
    bias_lsb: float  # mean signed error: a systematic shift shows here
    snr_db: float
    worst_index: tuple[int, ...]
    worst_expected: float
    worst_got: float
    unit: float
    errors: torch.Tensor = dataclasses.field(repr=False, default=None)  # |error| in LSB

    def fraction_over(self, bound: float) -> float:
        """Fraction of elements whose error exceeds ``bound`` LSB."""
        if self.errors is None or not self.errors.numel():
            return 0.0
        return float((self.errors > bound).float().mean())

    def to_dict(self, statistical: bool = False) -> dict[str, Any]:
        """The rounded statistics (goldens, the report). ``statistical``: for an
        output held to a statistical bound (a deep graph), coarser, so that a
        last-bit change of a float reference does not churn the golden while a
        real change (a tenth of an LSB in the p99, half a dB) still shows."""
        if statistical:
            return {
                "max_lsb": round(self.max_lsb, 1),
                "mean_lsb": round(self.mean_lsb, 2),
                "p99_lsb": round(self.p99_lsb, 1),
                "bias_lsb": round(self.bias_lsb, 2),
                "snr_db": round(self.snr_db * 2) / 2 if math.isfinite(self.snr_db) else _nonfinite(self.snr_db),
            }
        return {
            "max_lsb": round(self.max_lsb, 2),
            "mean_lsb": round(self.mean_lsb, 3),
            "p99_lsb": round(self.p99_lsb, 2),
            "bias_lsb": round(self.bias_lsb, 3),
            "snr_db": round(self.snr_db, 1) if math.isfinite(self.snr_db) else _nonfinite(self.snr_db),
        }

    def describe(self) -> str:
        return (
            f"max {self.max_lsb:.3f} LSB, mean {self.mean_lsb:.3f} LSB, "
            f"bias {self.bias_lsb:+.3f} LSB, SNR {self.snr_db:.1f} dB; "
            f"worst at index {list(self.worst_index)}: expected {self.worst_expected:.6g}, "
            f"got {self.worst_got:.6g} (error {self.max_lsb:.3f} LSB of {self.unit:.6g})"
        )


def signed_lsb(expected: np.ndarray, got: np.ndarray, unit: float) -> np.ndarray:
    """``got - expected`` in steps of ``unit``, element by element, with NaN
    and infinity as values like any other: equal only to themselves (NaN to
    NaN, +inf to +inf: no error), and infinitely wrong against anything else
    (a NaN on one side is +inf), so no bound can hold them."""
    e, g = np.asarray(expected, dtype=np.float64), np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        signed = (g - e) / unit
    same = (g == e) | (np.isnan(g) & np.isnan(e))
    return np.where(same, 0.0, np.where(np.isnan(signed), np.inf, signed))


def _nonfinite(value: float) -> str:
    """How a golden records a statistic that is not a finite number: "inf"
    (a bit-exact output's SNR), "-inf" or "nan", each itself."""
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def compare(expected: torch.Tensor, got: torch.Tensor, unit: float) -> Comparison:
    """Compare two float tensors of the same logical shape (NaN and infinity
    as :func:`signed_lsb` counts them: a NaN output is infinitely wrong)."""
    import torch

    if tuple(expected.shape) != tuple(got.shape):
        raise ValueError(f"shape mismatch: expected {tuple(expected.shape)}, got {tuple(got.shape)}")
    e = expected.detach().to(torch.float64)
    g = got.detach().to(torch.float64)
    signed = torch.from_numpy(signed_lsb(e.numpy(), g.numpy(), unit))
    error = signed.abs()
    flat = int(torch.argmax(error)) if error.numel() else 0
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(e.shape)))
    noise = float(((signed * unit) ** 2).sum())
    signal = float(torch.nan_to_num(e, nan=0.0, posinf=0.0, neginf=0.0).pow(2).sum())
    if noise == 0:
        snr = math.inf
    elif signal > 0 and math.isfinite(noise):
        snr = 10 * math.log10(signal / noise)
    else:  # no signal, or an infinite error
        snr = -math.inf
    return Comparison(
        max_lsb=float(error.max()) if error.numel() else 0.0,
        mean_lsb=float(error.mean()) if error.numel() else 0.0,
        p99_lsb=float(torch.quantile(error.flatten(), 0.99)) if error.numel() else 0.0,
        bias_lsb=float(signed.mean()) if error.numel() else 0.0,
        snr_db=snr,
        worst_index=index,
        worst_expected=float(e.flatten()[flat]),
        worst_got=float(g.flatten()[flat]),
        unit=unit,
        errors=error,
    )


def output_units(params: list[dict | None]) -> list[float]:
    """The error unit of each output: its quantization step, or FLOAT_UNIT."""
    return [p["scale"] if p else FLOAT_UNIT for p in params]


def dequantize(q: torch.Tensor, params: dict | None) -> torch.Tensor:
    import torch

    if params is None:
        return q.to(torch.float32)
    return (q.to(torch.float32) - params["zero_point"]) * params["scale"]


@dataclasses.dataclass(frozen=True)
class Bound:
    """What one comparison of one output may show."""

    #: Limit of every element's error; 0: bit-exact (:attr:`exact`).
    max_lsb: float
    #: Limit of the mean signed error (a systematic shift) on outputs of at
    #: least :data:`BIAS_MIN_ELEMENTS` elements; None: not bounded.
    bias_lsb: float | None = None
    #: Fraction of elements allowed beyond ``max_lsb`` ...
    outliers: float = 0.0
    #: ... and the bound none of them may exceed (required with ``outliers``).
    outlier_max_lsb: float | None = None
    #: Statistical: limit of the 99th percentile of the error; None: not bounded.
    p99_lsb: float | None = None
    #: Statistical: the lowest signal-to-noise ratio (dB, the reference's
    #: energy over the error's); None: not bounded.
    min_snr_db: float | None = None

    def __post_init__(self) -> None:
        if self.outliers and self.outlier_max_lsb is None:
            raise ValueError("a Bound with outliers needs outlier_max_lsb: an outlier allowance "
                             "without a magnitude cap cannot fail")
        if self.p99_lsb is not None and self.p99_lsb > self.max_lsb:
            raise ValueError(f"Bound.p99_lsb ({self.p99_lsb:g}) above max_lsb ({self.max_lsb:g}) "
                             "could never fail: the 99th percentile is at most the max")

    @property
    def statistical(self) -> bool:
        """Whether the bound has a statistical part (p99 or SNR)."""
        return self.p99_lsb is not None or self.min_snr_db is not None

    def scaled(self, factor: float) -> "Bound":
        return dataclasses.replace(
            self, max_lsb=self.max_lsb * factor,
            bias_lsb=None if self.bias_lsb is None else self.bias_lsb * factor,
            outlier_max_lsb=None if self.outlier_max_lsb is None else self.outlier_max_lsb * factor,
            p99_lsb=None if self.p99_lsb is None else self.p99_lsb * factor)  # the SNR has no unit

    @property
    def exact(self) -> bool:
        """Bit-exact: no element may differ (the mode of outputs measured equal)."""
        return self.max_lsb == 0 and not self.outliers

    def problems(self, comparison) -> list[str]:
        """Each limit this comparison breaks; a NaN statistic is within none."""
        problems = []
        over = comparison.fraction_over(self.max_lsb + EPSILON)
        if over > self.outliers:
            problems.append(
                f"max error {comparison.max_lsb:.3f} LSB > {self.max_lsb:g} LSB"
                + (f" on {over:.1%} of elements (allowed {self.outliers:.1%})" if self.outliers else ""))
        if self.outliers and not comparison.max_lsb <= self.outlier_max_lsb + EPSILON:
            problems.append(f"max error {comparison.max_lsb:.3f} LSB > the outlier cap "
                            f"{self.outlier_max_lsb:g} LSB")
        elements = comparison.errors.numel() if comparison.errors is not None else None
        if self.bias_lsb is not None and (elements is None or elements >= BIAS_MIN_ELEMENTS):
            if not abs(comparison.bias_lsb) <= self.bias_lsb + EPSILON:
                problems.append(f"bias {comparison.bias_lsb:+.3f} LSB beyond +-{self.bias_lsb:g} LSB")
        if self.p99_lsb is not None and not comparison.p99_lsb <= self.p99_lsb + EPSILON:
            problems.append(f"99th-percentile error {comparison.p99_lsb:.3f} LSB > {self.p99_lsb:g} LSB "
                            f"({comparison.fraction_over(self.p99_lsb + EPSILON):.1%} of elements beyond it, "
                            "allowed 1 %)")
        if self.min_snr_db is not None and not comparison.snr_db >= self.min_snr_db:
            problems.append(f"SNR {comparison.snr_db:.2f} dB < {self.min_snr_db:g} dB")
        return problems


#: The bound of outputs measured bit-exact with their reference: no element
#: differs, so neither does the mean.
EXACT = Bound(0.0, bias_lsb=0.0)
