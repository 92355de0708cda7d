"""What report.md and report.html both show of a report, counted once
(:func:`summarize`): cases by outcome and by op family, delegation shapes,
the changes against the goldens grouped ("12 resize cases: no longer
delegated"), the golden sections changed, expected CPU fallbacks, tolerance
margins, export warnings, localized divergences and the cases not passing.
:func:`vgf_conformance.harness.reporting.records.render_markdown` and
:func:`vgf_conformance.harness.reporting.html.render_html` only lay it out.
"""

from __future__ import annotations

import dataclasses
from collections import Counter


def delegation(case: dict) -> str:
    """The delegation shape of a case: its backends, and whether CPU ops remain."""
    shape = "+".join(sorted({d["backend"] for d in case.get("delegates") or []})) or "none"
    return shape + (" (+CPU ops)" if case.get("cpu_ops") else "")


def tolerance_margins(cases: list[dict]) -> list[dict]:
    """Per tolerance bound (its source: a family default or a trait) and
    comparison: the bound, how many outputs it covers, the worst observed
    value, its case, and the share of the bound it uses."""
    from vgf_conformance.oracles.references import ORACLES

    rows: dict[tuple[str, str], dict] = {}
    for case in cases:
        outputs = (case.get("numerics") or {}).get("outputs") or []
        for output, (stats, tolerance) in enumerate(zip(outputs, case.get("tolerances") or [])):
            for what in ORACLES:
                if (case.get("tests") or {}).get(f"test_numerics_{what}") == "xfailed":
                    continue  # a known divergence: its size is in its Expectation, not a margin
                # With an outlier allowance the cap is what the worst element is held to.
                capped = "outlier_max_lsb" in tolerance[what]
                bound = tolerance[what]["outlier_max_lsb" if capped else "max_lsb"]
                source = tolerance["sources"][f"{what}.{'outlier_max_lsb' if capped else 'max_lsb'}"]
                source += " (outlier cap)" if capped else ""
                observed = stats[what]["max_lsb"]
                row = rows.setdefault((source, what), {
                    "source": source, "comparison": what, "bound": bound, "outputs": 0,
                    "worst": -1.0, "case": None, "use": 0.0})
                row["outputs"] += 1
                use = observed / bound if bound else float(observed > 0)
                if use > row["use"] or row["case"] is None:
                    row.update(worst=observed, case=f"{case['id']}#{output}", use=use, bound=bound)
    return [rows[k] for k in sorted(rows)]


@dataclasses.dataclass(frozen=True)
class Summary:
    """The aggregates of a report's cases (records of report.json)."""

    cases: list[dict]
    by_outcome: Counter
    families: list[str]
    by_family: dict[str, Counter]
    #: (delegation shape, cases), sorted by shape.
    delegations: list[tuple[str, int]]
    #: ((family, change), cases), the largest group first.
    change_groups: list[tuple[tuple[str, str], int]]
    changed: list[dict]  # cases whose golden sections changed
    cpu: list[dict]  # cases declared to stay on the CPU, and so they did
    margins: list[dict]  # :func:`tolerance_margins`
    warnings: list[tuple[str, int]]  # (warning, cases), the most frequent first
    localized: list[dict]  # cases whose divergence was localized to a TOSA op
    not_passing: list[dict]


def summarize(report: dict) -> Summary:
    cases = report["cases"]
    families = sorted({c.get("family", "?") for c in cases})
    groups = Counter((c.get("family", "?"), change) for c in cases for change in c.get("changes") or [])
    return Summary(
        cases=cases,
        by_outcome=Counter(c["outcome"] for c in cases),
        families=families,
        by_family={f: Counter(c["outcome"] for c in cases if c.get("family", "?") == f) for f in families},
        delegations=sorted(Counter(delegation(c) for c in cases).items()),
        change_groups=sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])),
        changed=[c for c in cases if c.get("golden_changed")],
        cpu=[c for c in cases if c.get("stays_on_cpu") and not c.get("delegates")],
        margins=tolerance_margins(cases),
        warnings=Counter(w for c in cases for w in c.get("warnings") or []).most_common(),
        localized=[c for c in cases if c.get("localization")],
        not_passing=[c for c in cases if c["outcome"] not in ("passed", "xfailed")],
    )
