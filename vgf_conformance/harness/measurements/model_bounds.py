"""``python -m vgf_conformance model-bounds [ID...]``: measure the
model tier's bounds (:data:`vgf_conformance.cases.model_bounds.MODEL_BOUNDS`).

Each model case is exported on :data:`MEASURE_SEEDS` and the worst statistics
of each comparison over its seeds and outputs are printed with the bounds
:func:`propose_bounds` derives from them.
"""

from __future__ import annotations

from vgf_conformance.cases.families.models import FAMILY as MODELS
from vgf_conformance.harness.execution.runner import run_case
from vgf_conformance.harness.measurements.slack import BIAS_RESOLUTION


#: Input seeds a model's bounds are measured over: the case's own inputs and
#: two other draws (each calibrates its own quantization).
MEASURE_SEEDS = ("", "-seed1", "-seed2")


def propose_bounds(worst: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The rule of :data:`vgf_conformance.cases.model_bounds.MODEL_BOUNDS` applied to
    the worst statistics of one model (comparison -> max_lsb, p99_lsb,
    bias_lsb, snr_db): LSB bounds 1.5x the worst, rounded down to 0.01 (a
    bias: to 0.001; below the slack table's resolution, 0.01, counts as it); SNR floors
    the worst minus 3.5 dB (1.5x the error's amplitude), rounded up to 0.1.
    Each is at most 1.5x the worst (:mod:`vgf_conformance.harness.measurements.slack`)."""
    import math


    def down(lsb: float, step: float = 0.01) -> float:
        return math.floor(round(lsb * 1.5 / step, 6)) * step

    return {what: {"max_lsb": round(down(w["max_lsb"]), 2), "p99_lsb": round(down(w["p99_lsb"]), 2),
                   "bias_lsb": round(down(max(w["bias_lsb"], BIAS_RESOLUTION), 0.001), 3),
                   "min_snr_db": math.ceil(round((w["snr_db"] - 3.5) * 10, 6)) / 10}
            for what, w in worst.items()}


def measure_bounds(case_ids=(), artifacts=None) -> dict[str, dict]:
    """Export each model case on :data:`MEASURE_SEEDS` and return, per case,
    the worst statistics of each comparison over its seeds and outputs, and
    the bounds :func:`propose_bounds` derives from them."""
    import dataclasses
    import math
    import tempfile
    from pathlib import Path

    root = Path(artifacts or tempfile.mkdtemp(prefix="model-bounds-"))
    found = {}
    for case in MODELS.build():
        if case_ids and case.id not in case_ids:
            continue
        worst: dict[str, dict[str, float]] = {}
        for suffix in MEASURE_SEEDS:
            run = run_case(dataclasses.replace(case, id=case.id + suffix), root)  # the id seeds the inputs
            if run.numerics is None:
                raise RuntimeError(f"{case.id}{suffix}: {run.failure.describe() if run.failure else 'no numerics'}")
            for name, comparisons in run.numerics.comparisons.items():
                for c in comparisons:
                    w = worst.setdefault(name, {"max_lsb": 0.0, "p99_lsb": 0.0, "snr_db": math.inf, "bias_lsb": 0.0})
                    w.update(max_lsb=max(w["max_lsb"], c.max_lsb), p99_lsb=max(w["p99_lsb"], c.p99_lsb),
                             snr_db=min(w["snr_db"], c.snr_db), bias_lsb=max(w["bias_lsb"], abs(c.bias_lsb)))
        found[case.id] = {"worst": worst, "proposed": propose_bounds(worst)}
    return found


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from vgf_conformance.text import round_floats

    parser = argparse.ArgumentParser(prog="python -m vgf_conformance model-bounds", description=__doc__)
    parser.add_argument("case_ids", nargs="*", help="model case ids (default: every model case)")
    args = parser.parse_args(argv)
    print(json.dumps(round_floats(measure_bounds(tuple(args.case_ids))), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("model-bounds", "vgf_conformance.harness.model_bounds")
