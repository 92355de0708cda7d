"""What a case's two paths amount to, and the Markdown + JSON of a run.

Each case's outcome (:func:`classify`) is one :class:`Outcome` of the
upstream path, a numerics :class:`Verdict` against the project's path, and
whether the upstream export depends on ``glslc`` being on PATH.
"""

from __future__ import annotations

import collections
import enum
import json
import re
from pathlib import Path

#: Two paths are "the same" when their worst errors against the float model
#: differ by at most this many LSB: half a step, one output rounding either way.
SAME_BAND_LSB = 0.5


class Outcome(str, enum.Enum):
    """How far the upstream path gets, in the order of its stages."""

    CHILD_FAIL = "child-fail"  # the case's child process hung, crashed or broke (the harness's)
    EXPORT_FAIL = "export-fail"  # export_model failed before the model converter
    CONVERT_FAIL = "convert-fail"  # the model converter refused the TOSA
    SAMPLER_ON_CPU = "sampler-on-cpu"  # exported, but grid_sampler_2d stayed on the CPU
    RUN_FAIL = "run-fail"  # the VGF does not run on the Vulkan tier
    UNSTABLE = "unstable"  # it runs, but two runs of one scenario wrote different outputs
    RAN = "ran"

    @property
    def exports(self) -> bool:
        """Through the flow's stages before the model converter."""
        return self not in (Outcome.CHILD_FAIL, Outcome.EXPORT_FAIL)

    @property
    def converts(self) -> bool:
        """And through the model converter (and serialization)."""
        return self.exports and self is not Outcome.CONVERT_FAIL

    @property
    def runs(self) -> bool:
        return self in (Outcome.UNSTABLE, Outcome.RAN)


class Verdict(str, enum.Enum):
    """The upstream path's worst error against the float model, next to the project's."""

    BETTER = "better"
    SAME = "same"
    WORSE = "worse"
    NONE = "n/a"  # no numbers to compare (a path failed, or the upstream runs are unstable)


def _short(error: str | None, width: int = 160) -> str:
    """The line of an error that says most: the root cause's first line."""
    if not error:
        return ""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    causes = [line for line in lines if not line.startswith(("File ", "Traceback", "^", "~"))]
    text = causes[-1] if causes else lines[-1]
    text = re.sub(r"/\S*/", "", text)
    return text[:width]


def classify(record: dict) -> dict:
    """The row of one case: outcome, verdict, glslc dependence, the numbers."""
    case = record.get("case")
    if record.get("status") in ("timeout", "crash", "error"):
        return {"case": case, "outcome": Outcome.CHILD_FAIL.value, "verdict": Verdict.NONE.value,
                "stage": record["status"], "error": _short(record.get("message")), "glslc": "n/a"}
    upstream = record.get("with_glslc") or record.get("without_glslc") or {}
    run = record.get("run") or {}
    stage, error = upstream.get("stage"), upstream.get("error")
    if not upstream.get("exports"):
        outcome = Outcome.CONVERT_FAIL if stage == "convert" else Outcome.EXPORT_FAIL
    elif not upstream.get("converted"):
        outcome, stage = Outcome.CONVERT_FAIL, "convert"
    elif upstream.get("sampler_on_cpu") or not upstream.get("sampler_delegates"):
        outcome = Outcome.SAMPLER_ON_CPU
    elif not run.get("runs"):
        outcome, stage, error = Outcome.RUN_FAIL, "run", run.get("error")
    elif not run.get("stable"):
        outcome = Outcome.UNSTABLE
    else:
        outcome = Outcome.RAN
    project = record.get("project") or {}
    project_lsb = (project.get("max_lsb") or {}).get("vs_float")
    upstream_lsb = (run.get("max_lsb") or {}).get("vs_float") if run.get("runs") else None
    verdict = Verdict.NONE
    if outcome is Outcome.RAN and project_lsb is not None:
        delta = upstream_lsb - project_lsb
        verdict = (Verdict.WORSE if delta > SAME_BAND_LSB
                   else Verdict.BETTER if delta < -SAME_BAND_LSB else Verdict.SAME)
    return {
        "case": case,
        "outcome": outcome.value,
        "verdict": verdict.value,
        "stage": stage,
        "error": _short(error),
        "project_vs_float": project_lsb,
        "project_error": _short(project.get("error")) if not project.get("max_lsb") else "",
        "upstream_vs_float": upstream_lsb,
        "upstream_vs_project_fake_quant": (run.get("max_lsb") or {}).get("vs_fake_quant"),
        "upstream_vs_own_fake_quant": (run.get("max_lsb") or {}).get("vs_own_fake_quant"),
        "fused_flow": bool(upstream.get("fused_flow_ops")),
        "glslc": glslc_dependence(record),
        "ignored_options": record.get("ignored_options", []),
    }


def glslc_dependence(record: dict) -> str:
    """"same" when the exports with and without glslc on PATH agree (outcome,
    stage, TOSA bytes), "differs" when not, "not consulted" when the export
    with it never called it (so none without it was made), "n/a" otherwise."""
    a, b = record.get("with_glslc"), record.get("without_glslc")
    if a is not None and b is not None and "skipped" in b:
        return "not consulted"
    if a is None or b is None:
        return "n/a"
    keys = ("exports", "stage", "tosa", "fused_flow_ops", "custom_ops")
    return "same" if all(a.get(k) == b.get(k) for k in keys) else "differs"


def summarize(rows: list[dict]) -> dict:
    """Counts over the rows: exports, converts, runs (stable), numerics verdicts, glslc."""
    outcomes = [Outcome(r["outcome"]) for r in rows]
    verdicts = collections.Counter(r["verdict"] for r in rows)
    return {
        "cases": len(rows),
        "exports": sum(o.exports for o in outcomes),
        "converts": sum(o.converts for o in outcomes),
        "sampler_delegated": sum(o.converts and o is not Outcome.SAMPLER_ON_CPU for o in outcomes),
        "runs": sum(o.runs for o in outcomes),
        "runs_stable": sum(o is Outcome.RAN for o in outcomes),
        "better": verdicts[Verdict.BETTER.value],
        "same": verdicts[Verdict.SAME.value],
        "worse": verdicts[Verdict.WORSE.value],
        "not_compared": verdicts[Verdict.NONE.value],
        "outcomes": dict(sorted(collections.Counter(o.value for o in outcomes).items())),
        "glslc": dict(sorted(collections.Counter(r["glslc"] for r in rows).items())),
        "fused_flow": sum(r.get("fused_flow", False) for r in rows),
    }


def routing_evidence(rows: list[dict]) -> list[str]:
    """Cases that show the routing is still needed: the upstream path fails,
    keeps the sampler on the CPU, is unstable, or is worse."""
    return [r["case"] for r in rows
            if Outcome(r["outcome"]) is not Outcome.RAN or r["verdict"] == Verdict.WORSE.value]


def _fmt(value) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _groups(rows: list[dict]) -> list[tuple[tuple, list[str]]]:
    grouped: dict[tuple, list[str]] = collections.defaultdict(list)
    for r in rows:
        grouped[(r["outcome"], r["verdict"], r.get("stage") or "", r.get("error") or "")].append(r["case"])
    return sorted(grouped.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _notes(rows: list[dict], s: dict) -> list[str]:
    """What the numbers mean, for the outcomes that occurred."""
    notes = []
    worse = [r for r in rows if r["verdict"] == Verdict.WORSE.value]
    if worse:
        faithful = sum((r["upstream_vs_own_fake_quant"] or 0) <= 1.0 for r in worse)
        notes.append(
            f"- **worse** ({len(worse)} cases): in {faithful} of them the upstream program is within 1 LSB "
            "of its own fake-quantized program, so the loss is in its quantization, not its lowering: "
            "`get_vgf_snorm_quantization_config` quantizes the grid as an int8 activation (scale from "
            "calibration, about 1/127 of the grid's range) where the project's default is an SNORM16 grid; "
            "a coordinate error of a quarter texel costs several LSB on a textured image.")
    departed = [r for r in rows if (r["upstream_vs_own_fake_quant"] or 0) > 1.0]
    if departed:
        identity = sum("-identity-" in r["case"] for r in departed)
        notes.append(
            f"- **The lowering against its own PT2E program**: {len(departed)} cases are more than 1 LSB off "
            f"the upstream's own fake-quantized program (up to "
            f"{max(r['upstream_vs_own_fake_quant'] for r in departed):g} LSB; outcomes: "
            + ", ".join(f"{k} {v}" for k, v in sorted(collections.Counter(r["outcome"] for r in departed).items()))
            + f"); {identity} of them sample with an identity grid. Those are departures of the lowering (or "
            "of its run on the emulation layer), not of the quantization; the unstable runs below point "
            "at the run.")
    if s["outcomes"].get(Outcome.UNSTABLE.value):
        notes.append(
            f"- **unstable** ({s['outcomes'][Outcome.UNSTABLE.value]} cases): the same scenario, run twice "
            "from two directories whose paths differ in length, wrote different outputs. Seen while building "
            "this flow: the upstream VGF of grid-rgba-bilinear-zeros-ac0-identity-int8io wrote all zeros when "
            "its scenario's directory path was 90 characters long, and plausible values at 87 and 93, "
            "repeatably. The likely cause is memory "
            "read before it is written: the VGF passes the grid's scale and zero point from its graph "
            "segment to its compute segment through aliased intermediate resources (a TENSOR_ARM and a "
            "STORAGE_BUFFER in one alias group), which the emulation layer 0.11 may not share. Not "
            "confirmed further; the project's path showed nothing like it (`test_vulkan`, every case "
            "bit-exact with the TOSA reference model).")
    if s["fused_flow"] == 0:
        notes.append(
            "- **glslc**: no case reached ExecuTorch's fused base-grid + flow path, the only export step "
            "that calls `glslc` (`_compile_flow_offset_grid_sampler_shader`; counted per export). Its "
            "pattern (`_is_canonical_flow_offset_grid_sampler`) needs align_corners=True, bilinear, border, "
            "a batch-1 4-channel flow sliced to two channels and a base grid built with `cat` in NCHW; "
            "this suite's base-grid + flow cases use align_corners=False and an [N, H, W, 2] base grid. "
            "So today no result here depends on glslc being on PATH (the export without it is made only "
            "where the export with it called it: \"not consulted\" in the tables).")
    ignored = sorted({o for r in rows for o in r.get("ignored_options", [])})
    if ignored:
        notes.append(f"- The project's options {', '.join(f'`{o}`' for o in ignored)} have no upstream "
                     "equivalent and are not passed to the upstream export (its quantization config decides "
                     "the grid and the sampler's output).")
    return ["", "## Notes", "", *notes] if notes else []


def render_markdown(rows: list[dict], meta: dict, *, full_table: bool) -> str:
    s = summarize(rows)
    lines = [
        "# The upstream grid-sampler lowering against the project's",
        "",
        f"Generated by `{meta['command']}` on executorch {meta['executorch']} "
        f"({s['cases']} cases, {meta['seconds']:.0f} s wall with one worker child"
        f"{'' if meta.get('complete', True) else '; INTERRUPTED: a partial run'}). Do not edit by hand.",
        "",
        "Each case is exported with ExecuTorch's own grid-sampler lowering "
        "(`export_model(..., grid_sampler_lowering=\"upstream\")`: the VGF partitioner claims "
        "`grid_sampler_2d`, TOSA CUSTOM with a SPIR-V shader, `get_vgf_snorm_quantization_config`; "
        "no GridSamplerBackend, no `grid-sampler-routing`), with `glslc` on PATH and, where that "
        "export called it, again without; and set next to the project's path. "
        "The upstream program runs with its VGF delegates on the "
        "Vulkan tier (scenario runner + ML emulation layer on llvmpipe; the TOSA reference model "
        "cannot run a CUSTOM operator), each scenario twice from two directories; the project's "
        "program on the TOSA reference model and the grid-sampler reference (bit-exact with its "
        "Vulkan run, `test_vulkan`)"
        + (", its numbers as each case's golden records them (the suite checks every run against them)"
           if meta.get("project") == "golden" else ", exported and measured in the same run")
        + ". Errors: max LSB of the output against the float model on the raw inputs (the same "
        f"reference for both); \"same\" is within {SAME_BAND_LSB:g} LSB of the project's. The upstream "
        "program is also compared with its own PT2E fake-quantized program.",
        "",
        "## Summary",
        "",
        "| cases | exports | converts | sampler in the VGF delegate | runs on Vulkan | runs repeatably | "
        "numerics better | same | worse | not compared |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {s['cases']} | {s['exports']} | {s['converts']} | {s['sampler_delegated']} | {s['runs']} | "
        f"{s['runs_stable']} | {s['better']} | {s['same']} | {s['worse']} | {s['not_compared']} |",
        "",
        f"Outcomes: {', '.join(f'{k} {v}' for k, v in s['outcomes'].items())}. ",
        f"glslc on PATH or not: {', '.join(f'{k} {v}' for k, v in s['glslc'].items())} "
        f"(the fused base-grid + flow path was taken in {s['fused_flow']} cases).",
        "",
        "## Grouped",
        "",
        "| cases | outcome | numerics | stage | error | examples |",
        "|---|---|---|---|---|---|",
    ]
    for (outcome, verdict, stage, error), cases in _groups(rows):
        examples = ", ".join(f"`{c}`" for c in cases[:3]) + (f" (+{len(cases) - 3})" if len(cases) > 3 else "")
        lines.append(f"| {len(cases)} | {outcome} | {verdict} | {stage} | {error.replace('|', '/')} | {examples} |")
    ran = [r for r in rows if r["upstream_vs_float"] is not None]
    if ran:
        lines += ["", "## Numerics where the upstream program ran", "",
                  "Worst LSB against the float model (project / upstream), per outcome and verdict:", "",
                  "| outcome | numerics | cases | project max | upstream max | upstream vs its own fake-quant max |",
                  "|---|---|---|---|---|---|"]
        by = collections.defaultdict(list)
        for r in ran:
            by[(r["outcome"], r["verdict"])].append(r)
        for (outcome, verdict), group in sorted(by.items()):
            lines.append(
                f"| {outcome} | {verdict} | {len(group)} | "
                f"{max((r['project_vs_float'] or 0) for r in group):g} | "
                f"{max(r['upstream_vs_float'] for r in group):g} | "
                f"{max((r['upstream_vs_own_fake_quant'] or 0) for r in group):g} |")
    lines += _notes(rows, s)
    evidence = routing_evidence(rows)
    lines += ["", "## What it means for the routing workaround", "",
              f"`grid-sampler-routing` is needed while the upstream path fails or is worse: "
              f"{len(evidence)} of {len(rows)} cases show it."]
    if full_table:
        lines += ["", "## Per case", "",
                  "| case | outcome | numerics | project vs float | upstream vs float | upstream vs own fake-quant "
                  "| glslc | stage | error |", "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| `{r['case']}` | {r['outcome']} | {r['verdict']} | {_fmt(r['project_vs_float'])} | "
                         f"{_fmt(r['upstream_vs_float'])} | {_fmt(r['upstream_vs_own_fake_quant'])} | "
                         f"{r['glslc']} | {r.get('stage') or ''} | {(r.get('error') or '').replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write(out: Path, records: list[dict], meta: dict) -> list[dict]:
    """``out/results.json`` (every record, the rows, the summary) and ``out/results.md``."""
    rows = [classify(r) for r in records]
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(
        {"meta": meta, "summary": summarize(rows), "rows": rows, "records": records},
        indent=1, sort_keys=True, default=str) + "\n")
    (out / "results.md").write_text(render_markdown(rows, meta, full_table=True))
    return rows
