"""The error statistics of a case's outputs, checked against its golden's.

A fault can keep every output inside its LSB bound and still move the error
distribution: a requantization biased by a step, a calibrated range a little
wider, a kernel that rounds up. The golden's ``numerics`` section records, for
each output and oracle, the error's bias, mean, 99th percentile and maximum
(in LSB of the output) and the SNR; :func:`statistics_drift` holds each to its
stored value within the band measured across machines
(:data:`vgf_conformance.goldens.compliance.BANDS`: 0.008 LSB for bias and
mean, tight enough for a shift of a tenth of a step) and says which way it
moved, how far, and what such a move means.
"""

from __future__ import annotations

import dataclasses

from vgf_conformance.goldens.compliance import BANDS, STAT_BANDS, Band

#: What a move of each statistic beyond its band says about the outputs.
MEANING = {
    "bias_lsb": "the outputs moved {direction} on average against the oracle (a rounding, an offset or "
                "a zero point shifted)",
    "mean_lsb": "the typical error {grew}",
    "p99_lsb": "the error of the worst 1 % of elements {grew}",
    "max_lsb": "the largest error {grew}",
    "snr_db": "the signal-to-noise ratio {fell}",
}


@dataclasses.dataclass(frozen=True)
class StatisticDrift:
    output: int
    oracle: str
    statistic: str
    stored: float
    new: float
    band: Band

    @property
    def moved(self) -> float:
        return self.new - self.stored

    def describe(self) -> str:
        up = self.moved > 0
        meaning = MEANING[self.statistic].format(
            direction="up" if up else "down", grew="grew" if up else "shrank", fell="rose" if up else "fell")
        unit = self.band.unit
        return (f"output {self.output} {self.oracle}: {self.statistic} {self.stored:g} -> {self.new:g} "
                f"(moved {self.moved:+.3g} {unit}, beyond the band {self.band.limit:g} {unit}): {meaning}; "
                f"band {self.band.name}: {self.band.reason}")


def statistics_drift(stored: dict | None, new: dict | None) -> tuple[list[StatisticDrift], int]:
    """The statistics of the numerics sections ``stored`` and ``new`` (a
    golden's ``numerics``) that moved beyond their bands, and how many
    statistics were compared (those both sides have: a change of outputs or
    oracles is the golden check's)."""
    drifts, compared = [], 0
    pairs = zip((stored or {}).get("outputs", []), (new or {}).get("outputs", []))
    for index, (before, after) in enumerate(pairs):
        for oracle in sorted(set(before) & set(after)):
            if not (isinstance(before[oracle], dict) and isinstance(after[oracle], dict)):
                continue  # the output's unit
            for statistic, band in STAT_BANDS.items():
                if statistic in before[oracle] and statistic in after[oracle]:
                    compared += 1
                    b, a = float(before[oracle][statistic]), float(after[oracle][statistic])  # "inf": exact
                    if a != b and not abs(a - b) <= BANDS[band].limit:  # as the golden check judges it
                        drifts.append(StatisticDrift(index, oracle, statistic, b, a, BANDS[band]))
    return drifts, compared
