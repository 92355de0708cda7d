"""The slack table: every numeric bound against the worst it was measured to need.

``python -m vgf_conformance slack [--md] [--json FILE] [--max-ratio R]``

A bound far above what its outputs show cannot catch a regression of that
size: once goldens tolerate machine noise (:mod:`vgf_conformance.goldens.compliance`),
the bounds are the guard. For each bound (its source: a family default, a
trait, a model's stated bounds; the comparison; the field) this reads the
error statistics the goldens hold for every output the bound decides, and
prints the bound, the worst measured, their ratio and how many outputs it
decides. The ratio is the bound over the measurement of the output that uses
the bound the most:

* ``max_lsb``, ``outlier_max_lsb``, ``p99_lsb``: bound / measured;
* ``bias_lsb``: bound / ``|bias|``, over outputs of at least
  :data:`~vgf_conformance.oracles.compare.BIAS_MIN_ELEMENTS` elements (a bias
  below :data:`BIAS_RESOLUTION` counts as it);
* ``outliers``: the allowed fraction / the fraction beyond ``max_lsb``
  (``beyond_max_lsb`` in the golden);
* ``min_snr_db``: the error amplitude the floor allows over the measured one,
  ``10^((snr - floor) / 20)``.

A bound of 0 over measurements of 0 is **exact** (ratio 1). A bound that
decides no output is **dead**. A bound scaled for an output finer than its
pipeline (``x258 (int8-internal)``: an int16 output of an int8 program) is a
row of its own under its scaled source, in that output's LSB (its worst is
shown in the unscaled LSB); a trait's bounds measured on the outputs it
scales are rows of their own too (``int8-internal (measured on its scaled
outputs)``). An output whose comparison is expected to fail
(a declared divergence) is left out: its size is pinned by its expectation.

Model bounds are measured over three input seeds
(``python -m vgf_conformance model-bounds``): the table reads those
worst values from :data:`MODEL_SEEDS_FILE` where present.

The rule (tests/test_slack.py): no ratio above :data:`MAX_RATIO`, no dead bound.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from pathlib import Path

from vgf_conformance.cases.tolerances import (FLOAT_PIPELINE, ORACLE_DEFAULT, PT2E_OFF, SCALED_MEASURED, TRAITS,
                                              Tolerance)
from vgf_conformance.oracles.compare import BIAS_MIN_ELEMENTS
from vgf_conformance.oracles.references import ORACLES

#: The most a bound may exceed the worst it decides.
MAX_RATIO = 1.5
#: The model tier's worst statistics over its input seeds (written by
#: ``python -m vgf_conformance model-bounds --out``).
MODEL_SEEDS_FILE = Path(__file__).resolve().parents[3] / "docs" / "slack" / "model-seeds.json"
#: The finest bias bound the table asks for: a bias below it is measured as
#: it (a one-LSB shift of 1 % of the elements; the cross-machine drift of the
#: bias, 0.004 LSB at worst, docs/portability.md, must stay inside a bound).
BIAS_RESOLUTION = 0.01
#: The fields a :class:`~vgf_conformance.oracles.compare.Bound` holds an output to.
FIELDS = ("max_lsb", "outliers", "outlier_max_lsb", "bias_lsb", "p99_lsb", "min_snr_db")


@dataclasses.dataclass
class Row:
    source: str
    comparison: str
    field: str
    bound: float
    outputs: int = 0
    ratio: float = math.inf  # of the output that uses the bound the most
    worst: float | None = None
    case: str | None = None

    @property
    def verdict(self) -> str:
        if not self.outputs:
            return "dead"
        if self.bound == 0 and self.ratio == 1:
            return "exact"
        if self.ratio < 1 - 1e-9:
            return "exceeded"  # an output it decides is beyond it: its test fails
        return "too loose" if self.ratio > MAX_RATIO + 1e-9 else "ok"

    def to_dict(self) -> dict:
        ratio = None if math.isinf(self.ratio) else round(self.ratio, 3)
        return {"source": self.source, "comparison": self.comparison, "field": self.field, "bound": self.bound,
                "outputs": self.outputs, "worst": self.worst, "case": self.case, "ratio": ratio,
                "verdict": self.verdict}


def _output_elements(golden: dict) -> list[int]:
    """Elements of each output, from the golden's graph section."""
    nodes = {}
    for line in golden.get("graph") or []:
        m = re.match(r"\[(\d+)\] (.*)", line)
        if m:
            nodes[int(m.group(1))] = m.group(2)
    out = next((text for text in nodes.values() if text.startswith("output <- ")), None)
    if out is None:
        return []
    sizes = []
    refs = re.search(r"<- \[([\d, ]*)\]", out)
    for ref in (refs.group(1).split(",") if refs else []):
        shape = re.search(r"\w+\[([\dx]*)\]", nodes.get(int(ref), ""))
        sizes.append(math.prod(int(s) for s in shape.group(1).split("x")) if shape and shape.group(1) else 1)
    return sizes


def _ratio(field: str, allowed: float, measured) -> float:
    if field == "min_snr_db":
        if measured == "inf":
            return math.inf
        return 10 ** ((float(measured) - allowed) / 20)
    measured = abs(measured)
    if measured == 0 and allowed == 0:
        return 1.0  # exact
    if field == "bias_lsb":
        measured = max(measured, BIAS_RESOLUTION)
    return allowed / measured if measured else math.inf


def _unscaled(source: str) -> str:
    """A scaled bound's source without its scale: ``split-resize x258 (int8-internal)`` -> ``split-resize``."""
    return re.sub(r" x\d+ \(.*\)$", "", source)


def _model_seeds() -> dict:
    return json.loads(MODEL_SEEDS_FILE.read_text()) if MODEL_SEEDS_FILE.exists() else {}


def declared_rows(families) -> dict[tuple[str, str, str], Row]:
    """Every bound the table declares: each family default's and each trait's fields."""
    rows = {}

    def add(source: str, what: str, bound) -> None:
        for field in FIELDS:
            value = getattr(bound, field)
            if value is not None and not (field == "outliers" and not value):
                rows[(source, what, field)] = Row(source, what, field, value)

    for what, oracle in ORACLES.items():
        add(ORACLE_DEFAULT, what, oracle.default)
    for what, bound in FLOAT_PIPELINE.bounds.items():
        add("float pipeline", what, bound)
    for family in families:
        if family.tolerance is not None:  # the bounds it states (the others are its oracles' defaults)
            for what, bound in family.tolerance.bounds.items():
                if family.tolerance.sources.get(f"{what}.max_lsb") != ORACLE_DEFAULT:
                    add(f"{family.name} default", what, bound)
    for name, trait in TRAITS.items():
        for source, loosen in ((name, trait.loosen), (f"{name} {PT2E_OFF}", trait.loosen_float)):
            for what, fields in loosen.items():
                for field, value in fields.items():
                    rows[(source, what, field)] = Row(source, what, field, value)
        for what, stated in trait.states.items():
            for field, value in stated.items():
                if value is not None:
                    rows[(name, what, field)] = Row(name, what, field, value)
        for what, stated in trait.scaled_states.items():
            for field, value in stated.items():
                rows[(f"{name} {SCALED_MEASURED}", what, field)] = Row(f"{name} {SCALED_MEASURED}", what, field, value)
    return rows


def slack_table(cases, families, golden_dir: Path) -> list[Row]:
    """The rows of the table for ``cases`` (built from ``families``), measured
    from the goldens in ``golden_dir`` (model bounds: over their seeds)."""
    rows = declared_rows(families)
    seeds = _model_seeds()
    for case in cases:
        path = golden_dir / f"{case.id}.json"
        if not path.exists():
            continue
        golden = json.loads(path.read_text())
        outputs = (golden.get("numerics") or {}).get("outputs") or []
        elements = _output_elements(golden)
        for i, stats in enumerate(outputs):
            tolerance: Tolerance = case.get_tolerance(i)
            for what in ORACLES:
                if case.expect is not None and case.expect.applies_to(ORACLES[what].test_name):
                    continue  # a declared divergence: its size is pinned by its expectation
                measured = dict(stats[what])
                worst_seed = (seeds.get(case.id) or {}).get("worst", {}).get(what)
                if worst_seed:  # over the seeds, not only the golden's
                    measured.update(max_lsb=max(measured["max_lsb"], worst_seed["max_lsb"]),
                                    p99_lsb=max(measured["p99_lsb"], worst_seed["p99_lsb"]),
                                    bias_lsb=max(abs(measured["bias_lsb"]), worst_seed["bias_lsb"]),
                                    snr_db=min(float(measured["snr_db"]), worst_seed["snr_db"]))
                bound = tolerance.bounds[what]
                n = elements[i] if i < len(elements) else None
                values = {
                    "max_lsb": None if bound.outliers else measured["max_lsb"],
                    "outliers": measured.get("beyond_max_lsb") if bound.outliers else None,
                    "outlier_max_lsb": measured["max_lsb"] if bound.outliers else None,
                    "bias_lsb": measured["bias_lsb"], "p99_lsb": measured["p99_lsb"],
                    "min_snr_db": measured["snr_db"],
                }
                for field in FIELDS:
                    allowed = getattr(bound, field)
                    if allowed is None or (field == "outliers" and not allowed) or values[field] is None:
                        continue
                    source = tolerance.sources[f"{what}.{field}"]
                    scale = re.search(r" x(\d+) \(", source)
                    key = (source, what, field)
                    if scale and key not in rows:  # a scaled bound: a row of its own, as it decides
                        if (_unscaled(source), what, field) not in rows:
                            continue  # the scaled oracle's own default
                        rows[key] = Row(source, what, field, allowed)
                    row = rows.get(key)
                    if row is None:
                        continue  # an oracle's own default a family does not restate
                    if field == "bias_lsb" and n is not None and n < BIAS_MIN_ELEMENTS:
                        continue  # the bias bound does not apply to so few elements
                    unit = float(scale.group(1)) if scale and field not in ("min_snr_db", "outliers") else 1.0
                    ratio = _ratio(field, allowed, values[field])
                    row.outputs += 1
                    if row.case is None or ratio < row.ratio:
                        row.ratio, row.case = ratio, f"{case.id}#{i}"
                        row.worst = values[field] if field == "min_snr_db" else round(abs(values[field]) / unit, 4)
    scaled_only = {(_unscaled(r.source), r.comparison, r.field)
                   for r in rows.values() if r.outputs and re.search(r" x\d+ \(", r.source)}
    # A bound that decides outputs only scaled is shown (and held to the rule) as its scaled rows.
    rows = {key: row for key, row in rows.items() if row.outputs or key not in scaled_only}
    return sorted(rows.values(), key=lambda r: (r.source, r.comparison, FIELDS.index(r.field)))


def render(rows: list[Row], markdown: bool = False) -> str:
    head = ["bound from", "comparison", "field", "bound", "worst", "ratio", "outputs", "verdict", "case"]
    lines = []
    for r in rows:
        ratio = "-" if math.isinf(r.ratio) else f"{r.ratio:.2f}"
        worst = "-" if r.worst is None else f"{r.worst:g}"
        lines.append([r.source, r.comparison, r.field, f"{r.bound:g}", worst, ratio, str(r.outputs), r.verdict,
                      r.case or ""])
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(cells) + " |" for cells in lines]) + "\n"
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
                     for cells in [head, *lines]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance slack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--md", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--all", action="store_true", help="every row, not only the ones that break the rule")
    args = parser.parse_args(argv)
    from vgf_conformance.cases import BUILTIN_FAMILIES, CASES
    from vgf_conformance.goldens.store import GOLDEN_DIR

    rows = slack_table(CASES.values(), BUILTIN_FAMILIES, GOLDEN_DIR)
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=1, sort_keys=True) + "\n")
    bad = [r for r in rows if r.verdict in ("dead", "too loose", "exceeded")]
    print(render(rows if args.all else bad, args.md), end="")
    print(f"{len(rows)} bounds: {len(bad)} break the rule (ratio above {MAX_RATIO:g}, below 1, or dead)")
    return 1 if bad else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("slack", "vgf_conformance.harness.slack")
