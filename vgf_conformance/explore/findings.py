"""A run's summary, ``findings.json`` and ``findings.md``: per signature, the minimal case.

:func:`summarize` gathers a finished run's settings, counts and groups (the
content of ``findings.json``). For each group: the minimal case (parameters,
id, the builder call that makes it), the error or the worst element of each
failing comparison, for a resize the lowered RESIZE's scale/offset/border
against what PyTorch implies for that factor or size, the command that reruns
the draw, and a ready-to-paste case entry with its :class:`Expectation`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import statistics
import time
from pathlib import Path

from vgf_conformance.explore import reach, sampling
from vgf_conformance.explore.signature import failing_checks

#: Problems of a Bound, as regular expressions for an Expectation's ``match``.
_PROBLEM_PATTERNS = {
    "max error": r"max error \d+\.\d+ LSB >",
    "outlier cap": r"outlier cap",
    "bias": r"bias [+-]\d+\.\d+ LSB beyond",
}


def reproduce_command(outcome: dict, vulkan: bool = False) -> str:
    request = {"family": outcome["family"], "params": outcome["params"]}
    if vulkan:
        request["vulkan"] = True
    return f".venv/bin/python -m vgf_conformance draw {shlex.quote(json.dumps(request))}"


def known_reason(outcome: dict) -> str | None:
    """The name of a table constant that already explains this failure, if any."""
    p = outcome["params"]
    if (outcome["family"] == "resize" and "bilinear-scale-factor" in p.get("workarounds_off", ())
            and p["mode"] == "bilinear-ac0" and p["spec"] != "size" and not p.get("recompute")
            and (outcome.get("signature") or "").startswith("numerics:")):
        return "BILINEAR_SCALE_FACTOR_IGNORED"
    return None


def _summary_line(outcome: dict) -> str:
    sig = outcome.get("signature") or ""
    if sig.startswith("numerics:"):
        rows = [r for r in outcome.get("comparisons", ()) if not r["ok"]]
        return "; ".join(f"{r['check']} {r['max_lsb']:.3g} LSB (bound {r.get('bound', {}).get('max_lsb', float('nan')):.4g})" for r in rows)
    if outcome.get("failure"):
        f = outcome["failure"]
        if f.get("root_cause"):
            return f"[{f['stage']}] {f['root_cause']['type']}: {f['root_cause']['message'][:160]}"
        return f"[{f['stage']}] {f['error_type']}: {f['message'].strip().splitlines()[-1][:160] if f['message'] else ''}"
    failed = [t for t in outcome.get("tests", ()) if t["result"] in ("failed", "xpassed") and t.get("message")]
    if failed:
        text = failed[0]["message"].strip().splitlines()[0]
        return f"{failed[0]['test']}: " + re.sub(r"^case \S+:\s*", "", text)[:200]
    return outcome.get("message") or sig


def expectation(outcome: dict, seed: int) -> tuple[str | None, str]:
    """(``Expectation(...)`` source text or None, a note on what the suite can declare)."""
    sig = outcome.get("signature") or ""
    reason_name = known_reason(outcome)
    reason = reason_name or json.dumps(
        f"found by python -m vgf_conformance explore (seed {seed}): {_summary_line(outcome)}; explain it here")
    if sig.startswith("stage:"):
        f = outcome["failure"]
        return (f'Expectation({json.dumps(f["stage"])}, r"{re.escape(f["error_type"])}", {reason})',
                "a stage failure: every test of the case expects it")
    if sig.startswith("numerics:") or sig == "pte":
        checks = failing_checks(outcome)
        kinds = sorted({kind for r in outcome.get("comparisons", ()) if not r["ok"] and r["check"] in checks
                        for kind in _PROBLEM_PATTERNS if any(kind in p for p in r["problems"])})
        patterns = [_PROBLEM_PATTERNS[k] for k in kinds]
        if "pte" in checks:
            message = next(t["message"] for t in outcome["tests"] if t["test"] == "test_pte")
            patterns.append(re.escape(message.strip().splitlines()[-1][:60]))
        match = patterns[0] if len(patterns) == 1 else "(?:" + "|".join(patterns) + ")"
        check_text = ", ".join(json.dumps(c) for c in checks) + ("," if len(checks) == 1 else "")
        sizes = [r["max_lsb"] for r in outcome.get("comparisons", ())
                 if not r["ok"] and r["check"] in checks and any("max error" in p for p in r["problems"])]
        from vgf_conformance.cases.case import measured_lsb  # the case table's rule (imports torch)

        lsb = f", lsb={measured_lsb(min(sizes), max(sizes))}" if "max error" in kinds and sizes else ""
        return (f'Expectation("run", r"{match}", {reason}, checks=({check_text}){lsb})',
                "a numerics divergence: only these comparisons' tests expect it, at this size")
    if sig.startswith("delegation:"):
        return None, ("test_delegation cannot be an expected failure: if this is how the pinned ExecuTorch "
                      "behaves, state why in cpu_reason() (resize) or the case's stays_on_cpu/cpu_ops")
    if sig.startswith("vulkan:"):
        return None, "the Vulkan tier has no Expectation: a mismatch is a bug to fix or report"
    if sig in ("hang",) or sig.startswith("crash:") or sig.startswith("harness:"):
        return None, "no Expectation: the draw never finished (rerun it with the reproduce command)"
    return None, ""


def case_entry(outcome: dict, seed: int) -> str:
    """The builder call (a list item of the family's cases), with its
    Expectation where the suite can declare one: inline for ``resize_case``
    (it passes ``expect=`` on to the Case), else as an entry of the family's
    ``expectations`` (keyed by case id)."""
    code = outcome.get("code") or ""
    expect, _ = expectation(outcome, seed)
    if not code:
        return ""
    if not expect:
        return code + ","
    if code.startswith("resize_case("):
        return code[:-1] + f",\n            expect={expect}),"
    return f"{code},\n# in the family's expectations:\n{json.dumps(outcome['id'])}: {expect},"


def _details(outcome: dict) -> list[str]:
    lines = []
    status = outcome.get("status")
    if status != "done":
        lines.append(f"- **{status}**: {outcome.get('message', '')}")
        if outcome.get("log_tail"):
            lines += ["", "```", outcome["log_tail"], "```"]
        return lines
    if outcome.get("failure"):
        f = outcome["failure"]
        lines.append(f"- failure at stage `{f['stage']}` ({f['origin']}): `{f['error_type']}`")
        if f.get("root_cause"):
            lines.append(f"- root cause: `{f['root_cause']['type']}: {f['root_cause']['message']}`")
        lines += ["", "```", f["message"].strip()[-1500:], "```"]
    for t in outcome.get("tests", ()):
        if t["result"] in ("failed", "xpassed") and t["test"] in ("test_delegation", "test_pte", "test_vulkan"):
            lines.append(f"- `{t['test']}` {t['result']}: {t['message'].strip()[:600]}")
    for r in outcome.get("comparisons", ()):
        if r["ok"]:
            continue
        lines.append(
            f"- `{r['check']}` (output {r['output']}): {'; '.join(r['problems'])}. Worst element at index "
            f"{r['worst_index']}: expected {r['worst_expected']:.6g}, got {r['worst_got']:.6g} "
            f"({r['max_lsb']:.3f} LSB of {r['unit']:.6g}); mean {r['mean_lsb']:.3f}, bias {r['bias_lsb']:+.3f} LSB")
    passing = [f"{r['check']} {r['max_lsb']:.3g}" for r in outcome.get("comparisons", ()) if r["ok"]]
    if passing:
        lines.append(f"- within bounds: {', '.join(passing)} LSB")
    if outcome.get("delegates") is not None:
        backends = [d["backend"] for d in outcome["delegates"]] or ["none (CPU only)"]
        lines.append(f"- delegates: {', '.join(backends)}; declared: "
                     f"{'CPU (' + outcome['stays_on_cpu'] + ')' if outcome.get('stays_on_cpu') else 'delegated'}")
    for op in outcome.get("resize_ops") or ():
        lines.append(f"- TOSA (delegate {op['delegate']}): `{op['brief']}`"
                     + (f" spec errors: {op['spec_errors']}" if op["spec_errors"] else ""))
    if outcome.get("sampling"):
        for axis in outcome["sampling"]:
            lines.append(f"- sampling {sampling.describe_axis(axis)}")
    elif outcome.get("resize_ops"):
        lines.append("- sampling: not compared (the RESIZEs are not one chain from the model's input "
                     "size to its output size)")
    return lines


def _params_line(outcome: dict) -> str:
    return json.dumps(outcome["params"], sort_keys=True)


def summarize(explorer, interrupted: bool = False) -> dict:
    """The summary of a run of ``explorer`` (an :class:`~vgf_conformance.explore.explorer.Explorer`)."""
    options = explorer.options
    records = explorer.records
    total = explorer.phase_seconds.get("total", time.monotonic() - explorer.start)
    statuses: dict[str, int] = {}
    for r in records:
        key = "failed" if r["signature"] else r.get("status", "?") if r.get("status") != "done" else "passed"
        statuses[key] = statuses.get(key, 0) + 1
    explore_s = explorer.phase_seconds.get("explore", total)
    return {
        "command": options.command or f"python -m vgf_conformance explore --budget {options.budget:g}s "
                                      f"--seed {options.seed} --out {options.out}",
        "seed": options.seed,
        "budget_seconds": options.budget,
        "families": list(options.families),
        "vulkan": options.vulkan,
        "pte": options.pte,
        "workarounds_off": list(options.workarounds_off),
        "draw_timeout": options.draw_timeout,
        "shrink_share": options.shrink_share,
        "max_draws": options.max_draws,
        "limits": dataclasses.asdict(options.limits),
        "interrupted": interrupted,
        "seconds": round(total, 1),
        "phase_seconds": {k: round(v, 1) for k, v in explorer.phase_seconds.items()},
        "cases": len(records),
        "explore_cases": explorer.explore_draws,
        "shrink_cases": len(records) - explorer.explore_draws,
        "cases_per_minute": round(len(records) / (total / 60), 2) if total > 0 else 0.0,
        "explore_cases_per_minute": (round(explorer.explore_draws / (explore_s / 60), 2)
                                     if explore_s > 0 else 0.0),
        "mean_case_seconds": round(statistics.mean(r["seconds"] for r in records), 2) if records else None,
        "child_starts": explorer.child.starts,
        "child_start_seconds": round(explorer.child.start_seconds, 1),
        "cache_hits": explorer.cache_hits,
        "skipped_for_budget": explorer.skipped,
        "invalid_draws": explorer.invalid,
        "outcomes": statuses,
        "notes": explorer.notes,
        "groups": [_group_summary(g) for g in sorted(
            explorer.groups.values(), key=lambda g: (g.family, g.draws[0]))],
        "stack_target": explorer.reach.summary() if explorer.reach is not None else None,
    }


def _group_summary(group) -> dict:
    """One group's entry (``group``: an explorer :class:`~vgf_conformance.explore.explorer.Group`)."""
    return {
        "signature": group.signature,
        "family": group.family,
        "draws": len(group.draws),
        "draw_numbers": group.draws[:50],
        "found_in": group.found_in,
        "minimal_from": ("hypothesis shrink" if group.minimal else
                         "smallest seen (found while shrinking another group: not shrunk)"
                         if group.found_in == "shrink" else "smallest seen (not shrunk)"),
        "first": group.first,
        "minimal": group.best,
    }


def render_markdown(summary: dict) -> str:
    s = summary
    lines = [
        "# Explorer findings", "",
        f"`{s['command']}`", "",
        f"- seed {s['seed']}, budget {s['budget_seconds']:g} s, families {', '.join(s['families'])}"
        + (f", workarounds off: {', '.join(s['workarounds_off'])}" if s["workarounds_off"] else "")
        + (", Vulkan" if s["vulkan"] else "") + (", pte" if s["pte"] else ""),
        f"- {s['cases']} cases in {s['seconds']:g} s: **{s['cases_per_minute']:.1f} cases/min** "
        f"({s['explore_cases']} drawn at {s['explore_cases_per_minute']:.1f}/min in "
        f"{s['phase_seconds'].get('explore', 0):g} s, {s['shrink_cases']} while shrinking in "
        f"{s['phase_seconds'].get('shrink', 0):g} s); mean {s['mean_case_seconds']} s per case; "
        f"draw child started {s['child_starts']}x ({s['child_start_seconds']:g} s)",
        f"- outcomes: {', '.join(f'{k} {v}' for k, v in sorted(s['outcomes'].items())) or 'none'}; "
        f"cache hits {s['cache_hits']}, skipped for the budget {s['skipped_for_budget']}",
        f"- **{len(s['groups'])} failure groups**",
    ]
    lines += [f"- note: {n}" for n in s["notes"]]
    if s["groups"]:
        lines += ["", "| # | signature | family | draws | minimal case | what |", "|---|---|---|---|---|---|"]
        for i, g in enumerate(s["groups"], 1):
            lines.append(f"| {i} | `{g['signature']}` | {g['family']} | {g['draws']} | `{g['minimal']['id']}` | "
                         f"{_summary_line(g['minimal']).replace('|', '/')[:140]} |")
    for i, g in enumerate(s["groups"], 1):
        m = g["minimal"]
        expect, note = expectation(m, s["seed"])
        lines += ["", f"## {i}. `{g['signature']}` ({g['family']}, {g['draws']} draws)", "",
                  f"Minimal case ({g['minimal_from']}; first found in {g['found_in']} as draw "
                  f"#{g['first']['draw']} `{g['first']['id']}`):", "",
                  f"- id: `{m['id']}` (draw #{m['draw']})",
                  f"- parameters: `{_params_line(m)}`"]
        if m.get("table_twin"):
            lines.append(f"- the same parameters as table case `{m['table_twin']}`")
        if known_reason(m):
            lines.append(f"- known: the table explains it as `{known_reason(m)}` (resize/expectations.py)")
        lines += _details(m)
        lines += [f"- error map: ![error map {Path(f).name}]({f})" for f in g.get("error_maps", ())]
        lines += ["", "Reproduce:", "", "```sh", reproduce_command(m, s["vulkan"]), "```"]
        if m.get("code"):
            lines += ["", "Case entry" + (f" ({note})" if note else "") + ":", "", "```python",
                      case_entry(m, s["seed"]), "```"]
    if s.get("stack_target"):
        lines += reach.markdown(s["stack_target"])
    lines += ["", "Every draw (parameters, outcome, signature) is in `draws.jsonl`; the Hypothesis example "
              "database in `hypothesis/`; artifacts of each group's first and minimal case in `artifacts/`.", ""]
    return "\n".join(lines)


def write_findings(out: Path, summary: dict) -> None:
    from vgf_conformance.harness.reporting.errormaps import maps_of  # (torch: only when findings are written)

    out = Path(out)
    for group in summary["groups"]:
        m = group["minimal"]
        expect, note = expectation(m, summary["seed"])
        group["case_entry"] = case_entry(m, summary["seed"])
        group["expectation"] = expect
        group["expectation_note"] = note
        group["reproduce"] = reproduce_command(m, summary["vulkan"])
        group["known"] = known_reason(m)
        group["error_maps"] = maps_of(m.get("artifacts"), out)  # drawn by the failing check, in the draw's artifacts
    (out / "findings.json").write_text(json.dumps(summary, indent=1, sort_keys=False, default=str) + "\n")
    (out / "findings.md").write_text(render_markdown(summary))
