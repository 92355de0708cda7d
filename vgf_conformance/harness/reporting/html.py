"""``report.html``: the report as one static page, next to ``report.md``.

Built from ``report.json`` alone (plus the error maps it names), so the same
page renders a run's report, a candidate's (``scripts/candidate.sh``) and a
merged one. No server, no network: one HTML file with its CSS and script
inline, and the error maps copied beside it into ``maps/<case id>/``, so the
report directory is the whole artifact CI uploads.

The page: the counts and tables of ``report.md``; a case list filtered by
family, outcome, delegation and golden section changed (also from the URL:
``report.html#family=resize&outcome=failed``); per case its tests, failure,
golden diff, numerics against each oracle with the bound and the share of
it used, its error maps and the command that reruns it
(``report.html#case=<case id>`` opens it).

``python -m vgf_conformance html DIR`` renders ``DIR/report.json`` again;
``--diff OLD`` writes ``DIR/diff.html``: the page with a report diff
(:mod:`vgf_conformance.harness.reporting.diff`, ``python -m vgf_conformance report diff``) on
top, each changed case linked to its section.

The stack's blind spots (the stack functions no case reaches: ``python -m
vgf_conformance stack-coverage DIR... --blind-spots REPORT_DIR``,
:mod:`vgf_conformance.harness.measurements.blind_spots`) get their own page:
whenever a report page is written into a folder that holds
``stack-blind-spots.json``, ``stack.html`` is written from it and
``report.html`` links it; ``--blind-spots`` writes the JSON and then the pages.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import shutil
from pathlib import Path

from vgf_conformance.harness.reporting.records import OUTCOME_ORDER, SUITE_SCRIPT
from vgf_conformance.harness.reporting.summary import delegation, summarize
from vgf_conformance.text import RUN_KEY_PATTERN

#: Lines of a golden diff kept in the report.
DIFF_LINES = 200
#: Where the maps go inside the report directory.
MAPS_DIR = "maps"
TEMPLATE = "report.html.j2"
#: The stack's blind spots in a report folder, the page made of them, and its template.
BLIND_SPOTS = "stack-blind-spots.json"
STACK_PAGE = "stack.html"
STACK_TEMPLATE = "stack.html.j2"


def golden_diff(stored_text: str | None, golden: dict, limit: int = DIFF_LINES) -> list[str]:
    """The unified diff of a case's golden JSON, stored -> current, at most
    ``limit`` lines (the last says how many were cut)."""
    from vgf_conformance.goldens import serialize

    if stored_text is None:
        return []
    lines = list(difflib.unified_diff(stored_text.splitlines(), serialize(golden).splitlines(),
                                      "golden (stored)", "this run", n=2, lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more lines"]
    return lines


def rerun_commands(case: dict, suite: str = SUITE_SCRIPT) -> list[str]:
    """The commands that rerun a case: the suite (the report's ``run.command``)
    on it, and its Vulkan scenario when that tier did not pass."""
    commands = [f"{suite} --vgf-case {shlex.quote(case['id'])}"]
    vulkan = (case.get("tests") or {}).get("test_vulkan")
    artifacts = (case.get("run") or {}).get("artifacts")
    if vulkan in ("failed", "error", "xfailed", "xpassed") and artifacts:
        commands.append(f".venv/bin/python -m vgf_conformance vulkan {artifacts}/vulkan/scenario.json")
    return commands


def numerics_rows(case: dict) -> list[dict]:
    """Per output and comparison: the statistics, the bound and the share of it used."""
    from vgf_conformance.oracles.references import ORACLES

    rows = []
    outputs = (case.get("numerics") or {}).get("outputs") or []
    tolerances = case.get("tolerances") or []
    tests = case.get("tests") or {}
    for i, stats in enumerate(outputs):
        tolerance = tolerances[i] if i < len(tolerances) else {}
        for name in (*ORACLES, "fake_quant_vs_float"):
            if name not in stats:
                continue
            bound = tolerance.get(name) or {}
            max_bound = bound.get("outlier_max_lsb") or bound.get("max_lsb")
            observed = stats[name].get("max_lsb")
            use = observed / max_bound if max_bound and isinstance(observed, (int, float)) else None
            rows.append({"output": i, "comparison": name, **stats[name], "bound": bound, "use": use,
                         "test": tests.get(f"test_numerics_{name}"),
                         "sources": {k.split(".", 1)[1]: v for k, v in (tolerance.get("sources") or {}).items()
                                     if k.startswith(f"{name}.")}})
    return rows


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (resolved) lies inside ``folder``."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


#: The first bytes of every PNG file.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _is_map(path: Path) -> bool:
    """A map to copy: a regular file, not a symbolic link (which could name
    any file of the machine), that is a PNG."""
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as file:
        return file.read(len(PNG_SIGNATURE)) == PNG_SIGNATURE


def copy_maps(report: dict, directory: Path, sources: tuple[Path, ...] = ()) -> dict[str, list[dict]]:
    """Copy each case's error maps into ``directory/maps/<case id>/``; returns
    case id -> maps with ``src`` (relative to the page) or ``missing``. A map is
    looked for in the case's artifacts, then in ``<source>/maps/<case id>/`` of
    each source report directory (shards being merged), then already in place."""
    found: dict[str, list[dict]] = {}
    for case in report["cases"]:
        entries = []
        for entry in case.get("error_maps") or []:
            if "file" not in entry:
                entries.append(dict(entry))
                continue
            name = Path(entry["file"]).name
            if not RUN_KEY_PATTERN.fullmatch(str(case["id"])) or not name.endswith(".png"):
                # A report is data: an id or file that would lead outside the report folder is refused.
                entries.append(dict(entry, missing=f"refused: case id {case['id']!r} or map {entry['file']!r} "
                                                   "is not a case's map"))
                continue
            target = directory / MAPS_DIR / case["id"] / name
            artifacts = (case.get("run") or {}).get("artifacts")
            candidates = [Path(artifacts) / entry["file"]] if artifacts else []
            candidates = [c for c in candidates if _inside(c, Path(artifacts))]
            candidates += [Path(s) / MAPS_DIR / case["id"] / name for s in sources]
            source = next((c for c in candidates if _is_map(c)), None)
            if source is not None and source.resolve() != target.resolve():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
            if target.is_file():
                entries.append(dict(entry, src=f"{MAPS_DIR}/{case['id']}/{name}"))
            else:
                entries.append(dict(entry, missing=f"not found (looked in {', '.join(map(str, candidates))})"))
        if entries:
            found[case["id"]] = entries
    return found


def _environment():
    """The templates of ``templates/``, escaped, a missing name an error."""
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("vgf_conformance.harness.reporting", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)


def render_html(report: dict, maps: dict[str, list[dict]] | None = None, title: str = "VGF conformance report",
                diff: dict | None = None, stack_page: str | None = None) -> str:
    """The page for ``report`` (a report.json); ``maps`` from :func:`copy_maps`;
    ``diff``: a report diff (``vgf_conformance.harness.reporting.diff``) rendered above the cases;
    ``stack_page``: the blind spots' page to link, if any."""
    summary = summarize(report)
    suite = (report.get("run") or {}).get("command") or SUITE_SCRIPT
    maps = maps or {}
    rows = []
    for c in summary.cases:
        interesting = (c["outcome"] not in ("passed", "skipped") or c.get("golden_changed")
                       or c["id"] in maps)
        rows.append({"case": c, "delegation": delegation(c), "numerics": numerics_rows(c),
                     "maps": maps.get(c["id"], []), "rerun": rerun_commands(c, suite),
                     "interesting": bool(interesting),
                     "sections": c.get("golden_changed") or []})
    return _environment().get_template(TEMPLATE).render(
        title=title, report=report, cases=summary.cases, rows=rows, outcomes=OUTCOME_ORDER,
        by_outcome=summary.by_outcome, families=summary.families, by_family=summary.by_family,
        delegations=summary.delegations, sections=sorted({s for r in rows for s in r["sections"]}),
        change_groups=summary.change_groups, margins=summary.margins, warnings=summary.warnings,
        cpu=summary.cpu, not_passing=summary.not_passing, diff=diff, stack_page=stack_page)


def write_stack_page(directory: Path, report: bool = False) -> Path | None:
    """Write ``directory/stack.html`` from ``directory/stack-blind-spots.json``
    when it is there (else None): per area and file, the stack functions no
    case reaches, each file folded, with a filter; linked back to
    ``report.html`` when ``report`` (the folder's report page, written with it)."""
    source = directory / BLIND_SPOTS
    if not source.is_file():
        return None
    blind = json.loads(source.read_text())
    areas = [dict(a, anchor=f"area-{i}", listed=[f for f in blind["files"] if f["area"] == a["area"]])
             for i, a in enumerate(blind["areas"])]
    path = directory / STACK_PAGE
    path.write_text(_environment().get_template(STACK_TEMPLATE).render(
        title=f"Stack blind spots: {directory.name}", blind=blind, areas=areas,
        report=report))
    return path


def write_html(report: dict, directory: Path, sources: tuple[Path, ...] = (), title: str | None = None,
               diff: dict | None = None) -> Path:
    """Write ``directory/report.html`` (and copy the error maps beside it; and
    the blind spots' page, linked, when the folder holds them)."""
    directory.mkdir(parents=True, exist_ok=True)
    maps = copy_maps(report, directory, tuple(sources))
    stack_page = STACK_PAGE if write_stack_page(directory, report=True) else None
    path = directory / "report.html"
    path.write_text(render_html(report, maps, title or f"VGF conformance report: {directory.name}", diff,
                                stack_page))
    return path


def diff_view(delta) -> dict:
    """What the page shows of a report diff (:class:`vgf_conformance.harness.reporting.diff.ReportDiff`)."""
    return {"old_name": delta.old_name, "new_name": delta.new_name, "common": len(delta.common),
            "changed": [{"id": c.id, "details": [d.replace("**", "").replace("`", "") for d in c.details()]}
                        for c in delta.changed],  # the Markdown fragments as text
            "added": [c.id for c in delta.cases if c.status == "added"],
            "removed": [c.id for c in delta.cases if c.status == "removed"],
            "groups": delta.groups(), "stack": delta.stack, "workarounds": delta.workarounds,
            "new_warnings": delta.new_warnings, "gone_warnings": delta.gone_warnings}


def write_diff_html(old: Path, new: Path) -> Path:
    """``NEW/diff.html``: the NEW report's page with what changed since OLD on
    top (``python -m vgf_conformance report diff``), each changed case linked to its section."""
    from vgf_conformance.harness.reporting import diff

    old_report, new_report = diff.load_report(old, "OLD"), diff.load_report(new, "NEW")
    delta = diff.diff_reports(old_report, new_report, str(old), str(new))
    directory = new if new.is_dir() else new.parent
    maps = copy_maps(new_report, directory)
    path = directory / "diff.html"
    path.write_text(render_html(new_report, maps, f"VGF conformance: {old} -> {new}", diff_view(delta)))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance html",
                                     description="render DIR/report.json as DIR/report.html; with --diff "
                                                 "OLD, DIR/diff.html: the page with what changed since OLD")
    parser.add_argument("directory", type=Path, help="a report directory (holding report.json)")
    parser.add_argument("--maps-from", type=Path, nargs="*", default=(),
                        help="report directories whose maps/<case id>/ hold maps (e.g. merged shards)")
    parser.add_argument("--diff", type=Path, metavar="OLD",
                        help="an earlier report (directory or report.json): write DIR/diff.html")
    args = parser.parse_args(argv)
    source = args.directory / "report.json"
    if not source.is_file():
        parser.error(f"directory must hold report.json; not found: {source}")
    if args.diff is not None:
        from vgf_conformance.harness.reporting.diff import ReportError

        try:
            path = write_diff_html(args.diff, args.directory)
        except ReportError as error:
            parser.error(f"--diff: {error}")
    else:
        path = write_html(json.loads(source.read_text()), args.directory, tuple(args.maps_from))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("html", "vgf_conformance.harness.html")
