"""What a candidate's stack changed in the lowering code, and how much of it
the matrix reaches.

An upgrade's risk is in the code it changed that no case runs. This diffs the
baseline stack's Python and the candidate's (two site-packages directories)
file by file for the packages of
:data:`~vgf_conformance.harness.measurements.stack_coverage.STACK_PACKAGES`
(tests and build scripts skipped; our own ``vgf_export`` is taken from this repository on
both sides, so it never changes): files added, removed, changed. Each changed
line of the candidate's side (``difflib`` on lines; a deleted line counts for
the function that lost it) is given to its innermost enclosing function,
method or class (``RewriteUpsamplePass.get_resize_parameters_1d``), or
``<module>``; a change of comments, blank lines or docstrings only is none.
Then the candidate run's stack coverage (``--vgf-stack-coverage DIR``) says,
per changed function, whether any case enters it, how many of its changed
executable lines (coverage.py's statements) are reached and by which cases.
A function's ``def`` and decorator lines count as reached when its body is:
they run at import, which the recording does not see. For the same reason a
change at module or class level is reached only when the run imported it.

``python -m vgf_conformance candidate stack-changes OUT --baseline SP
--candidate SP [--coverage DIR]`` writes ``OUT/stack-changes.json`` and
``OUT/stack-changes.md`` (``scripts/candidate.sh`` runs it after a candidate's
run) and prints the summary.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import tokenize
from pathlib import Path

from vgf_conformance.harness.measurements.blind_spots import outside_the_lowering
from vgf_conformance.harness.measurements.stack_coverage import STACK_PACKAGES, reached
from vgf_conformance.harness.schedule.stack_reach import line_ranges

#: The repository holding ``vgf_export``, one more root of both sides.
REPOSITORY = Path(__file__).resolve().parents[3]
MODULE = "<module>"
#: Cases named per function; rows per table of the Markdown.
NAMED_CASES, TABLE_ROWS = 3, 40
#: The distributions whose versions head the report.
DISTRIBUTIONS = ("executorch", "torch", "torchao")


def stack_files(roots: list[Path]) -> tuple[dict[str, Path], list[str]]:
    """The stack's ``.py`` files under ``roots``, by their path from the root
    that holds their package (each package from the first root holding it),
    and the packages no root holds."""
    files, missing = {}, []
    for package in STACK_PACKAGES:
        relative = package.replace(".", "/")
        root = next((r for r in roots if (r / relative).is_dir()), None)
        if root is None:
            missing.append(package)
            continue
        for path in sorted((root / relative).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            if not outside_the_lowering(where):
                files[where] = path
    return files, missing


def _without_comments(text: str, lines: list[str]) -> list[str]:
    """The lines without their comments and trailing blanks."""
    code = list(lines)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and token.start[0] <= len(code):
                row, column = token.start
                code[row - 1] = code[row - 1][:column]
    except (tokenize.TokenError, SyntaxError):
        pass  # not tokenizable to the end: the comments found so far are dropped
    return [line.rstrip() for line in code]


class Source:
    """One side of a file: its lines, their scopes and executable statements."""

    def __init__(self, text: str) -> None:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # numbered as ast numbers them
        self.code = _without_comments(text, lines)  # what the diff compares
        self.owner: dict[int, str] = {}  # line -> innermost def or class, when in one
        self.headers: set[int] = set()  # decorator and def/class lines (run at import)
        try:
            self._scope(ast.parse(text), "")
        except (SyntaxError, ValueError):
            pass  # not Python this interpreter parses: all at module level
        try:
            from coverage.parser import PythonParser

            parser = PythonParser(text=text)
            parser.parse_source()
            self.statements = set(parser.statements)
            self.first_line = parser.first_line
        except Exception:  # noqa: BLE001 - coverage cannot parse it either: every non-comment line counts
            self.statements = {n for n, line in enumerate(self.code, 1) if line.strip()}
            self.first_line = lambda n: n

    def _scope(self, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                for n in range(start, child.end_lineno + 1):
                    self.owner[n] = name  # an inner scope overwrites its lines below
                self.headers.update(range(start, max(child.body[0].lineno, child.lineno + 1)))
                self._scope(child, name + ".")
            else:
                self._scope(child, prefix)

    def scope(self, line: int) -> str:
        return self.owner.get(line, MODULE)

    def statement(self, line: int) -> int | None:
        """The executable statement ``line`` is part of (None: a comment, blank, docstring)."""
        first = self.first_line(line)
        return first if first in self.statements else None

    def body(self, scope: str) -> set[int]:
        """The statements of ``scope`` itself, its ``def`` lines and inner scopes left out."""
        return {n for n in self.statements if self.scope(n) == scope and n not in self.headers}


def changed_scopes(old: Source, new: Source) -> tuple[dict[str, dict], list[str]]:
    """Per scope of the new side that changed: its changed statements (new
    side's numbering) and the statements it lost (old side's); and the scopes
    the new side no longer has."""
    changed: dict[str, dict[str, set[int]]] = {}
    matcher = difflib.SequenceMatcher(None, old.code, new.code, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        gained = set()
        for n in range(j1 + 1, j2 + 1) if tag in ("replace", "insert") else ():
            if (first := new.statement(n)) is not None:
                gained.add(new.scope(first))
                changed.setdefault(new.scope(first), {"lines": set(), "lost": set()})["lines"].add(first)
        for n in range(i1 + 1, i2 + 1) if tag in ("replace", "delete") else ():
            # a replaced line counts for its new side; lost: its scope got none of the block's new lines
            if (first := old.statement(n)) is not None and old.scope(first) not in gained:
                changed.setdefault(old.scope(first), {"lines": set(), "lost": set()})["lost"].add(first)
    kept = set(new.owner.values()) | {MODULE}
    gone = sorted(set(old.owner.values()) - kept)
    return {scope: entry for scope, entry in changed.items() if scope in kept}, gone


def _reach(by_case: dict[str, dict[str, set[str]]]) -> dict[str, dict[int, set[str]]]:
    """File -> line -> the cases that reach it."""
    out: dict[str, dict[int, set[str]]] = {}
    for case, entry in by_case.items():
        for unit in entry["lines"]:
            where, _, line = unit.rpartition(":")
            out.setdefault(where, {}).setdefault(int(line), set()).add(case)
    return out


def _function(where: str, scope: str, entry: dict[str, set[int]], new: Source,
              lines: dict[int, set[str]], existed: bool) -> dict:
    """One changed scope: its changed lines, and the cases that reach them or enter it."""
    entering = set().union(*(lines.get(n, set()) for n in new.body(scope)))
    changed_cases: set[str] = set()
    hit = 0
    for n in entry["lines"]:
        cases = lines.get(n, set()) | (entering if n in new.headers else set())
        hit += bool(cases)
        changed_cases |= cases
    ranges = line_ranges(f"{where}:{n}" for n in entry["lines"])
    return {"file": where, "function": scope, "status": "changed" if existed else "added",
            "changed_lines": ranges[0].rpartition(":")[2] if ranges else "",
            "changed_executable": len(entry["lines"]), "lines_lost": len(entry["lost"]),
            "changed_reached": hit, "reached": bool(entering or changed_cases), "cases": len(changed_cases),
            "cases_named": sorted(changed_cases)[:NAMED_CASES], "cases_entering": len(entering | changed_cases)}


def compare(baseline: list[Path], candidate: list[Path], by_case: dict[str, dict[str, set[str]]]) -> dict:
    """The stack changes from ``baseline``'s roots to ``candidate``'s, and
    the reach of the candidate's run (:func:`reached`) on them."""
    old_files, old_missing = stack_files(baseline)
    new_files, new_missing = stack_files(candidate)
    reach = _reach(by_case)
    files = {"added": sorted(set(new_files) - set(old_files)), "removed": sorted(set(old_files) - set(new_files)),
             "changed": [], "unchanged": 0}
    functions, removed_functions = [], []
    for where in sorted(new_files):
        new_text = new_files[where].read_text(encoding="utf-8", errors="replace")
        old_text = old_files[where].read_text(encoding="utf-8", errors="replace") if where in old_files else ""
        if where in old_files and old_text == new_text:
            files["unchanged"] += 1
            continue
        old, new = Source(old_text), Source(new_text)
        scopes, gone = changed_scopes(old, new)
        removed_functions += [f"{where}:{scope}" for scope in gone]
        if where in old_files and (scopes or gone):
            files["changed"].append(where)
        elif where in old_files:  # changed in comments, blank lines or docstrings only
            files["unchanged"] += 1
        for scope, entry in sorted(scopes.items()):
            existed = where in old_files and (scope == MODULE or scope in old.owner.values())
            functions.append(_function(where, scope, entry, new, reach.get(where, {}), existed))
    for where in files["removed"]:
        removed_functions += [f"{where}:{scope}" for scope in sorted(set(Source(
            old_files[where].read_text(encoding="utf-8", errors="replace")).owner.values()))]
    total = sum(f["changed_executable"] for f in functions)
    hit = sum(f["changed_reached"] for f in functions)
    summary = {"files changed": len(files["changed"]), "files added": len(files["added"]),
               "files removed": len(files["removed"]), "functions changed": len(functions),
               "functions changed reached": sum(f["reached"] for f in functions),
               "changed executable lines": total, "changed executable lines reached": hit,
               "cases": len(by_case)}
    return {"stack": {"baseline": versions(baseline), "candidate": versions(candidate)}, "summary": summary,
            "files": files, "functions": functions, "removed_functions": removed_functions,
            "packages_not_found": {"baseline": old_missing, "candidate": new_missing}}


def versions(roots: list[Path]) -> dict[str, str]:
    """The stack distributions' versions, from their ``.dist-info`` names."""
    found = {}
    for name in DISTRIBUTIONS:
        for root in roots:
            infos = sorted(p.name for p in root.glob(f"{name}-*.dist-info"))
            if infos:
                found[name] = infos[0][len(name) + 1:-len(".dist-info")]
                break
    return found


def summary_line(changes: dict) -> str:
    s = changes["summary"]
    share = f" ({100 * s['changed executable lines reached'] / s['changed executable lines']:.1f} %)" \
        if s["changed executable lines"] else ""
    return (f"{s['files changed']} stack files changed, {s['files added']} added, {s['files removed']} removed; "
            f"{s['functions changed']} functions changed, {s['functions changed reached']} of them reached by the "
            f"matrix ({s['cases']} cases); changed executable lines reached: "
            f"{s['changed executable lines reached']} / {s['changed executable lines']}{share}")


def _stack(versions_: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions_.items())) or "?"


def _cases(f: dict) -> str:
    if not f["changed_executable"]:  # lines removed only: the cases that enter the function
        return f"the function: {f['cases_entering']}"
    more = f["cases"] - len(f["cases_named"])
    named = ", ".join(f"`{c}`" for c in f["cases_named"]) + (f" +{more} more" if more > 0 else "")
    return f"{f['cases']}: {named}" if f["cases"] else f"0 (the function: {f['cases_entering']})"


def _table(title: str, rows: list[dict], columns: list[tuple[str, object]]) -> list[str]:
    out = [f"## {title} ({len(rows)})", ""]
    if not rows:
        return out + ["None.", ""]
    out += ["| " + " | ".join(name for name, _ in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(str(cell(f)).replace("|", "/") for _, cell in columns) + " |" for f in rows[:TABLE_ROWS]]
    if len(rows) > TABLE_ROWS:
        out.append(f"\n+{len(rows) - TABLE_ROWS} more (all in stack-changes.json)")
    return out + [""]


def _changed(f: dict) -> str:
    return f"{f['changed_executable']}" + (f" ({f['changed_lines']})" if f["changed_lines"] else "") + \
        (f", {f['lines_lost']} removed" if f["lines_lost"] else "")


def _name(f: dict) -> str:
    return f"`{f['function']}`" + (" (not in the baseline)" if f["status"] == "added" else "")


def render(changes: dict) -> str:
    """``stack-changes.md``: the summary, the changed functions no case
    reaches (the risk), the most changed lines first, then those reached, the
    smallest share of their changed lines reached first (lines removed only: last)."""
    functions = changes["functions"]
    missed = sorted((f for f in functions if not f["reached"]),
                    key=lambda f: (-f["changed_executable"], -f["lines_lost"], f["file"], f["function"]))
    hit = sorted((f for f in functions if f["reached"]),
                 key=lambda f: (not f["changed_executable"], f["changed_reached"] / max(f["changed_executable"], 1),
                                f["cases"], f["file"], f["function"]))
    stack = changes["stack"]
    files = changes["files"]
    lines = [f"# Stack changes: {_stack(stack['baseline'])} -> {_stack(stack['candidate'])}", "",
             f"**{summary_line(changes)}**", "",
             "Changed lines are the candidate's executable lines (coverage.py's statements) that differ from the "
             "baseline's, each in its innermost function, method or class; reached: by the run's cases, whose "
             "count and first names are given. A changed function no case reaches is a change the matrix cannot "
             "catch: the first table is the risk. Module and class level lines run at import, which the "
             "recording does not see: they count as reached only when a case imported them.", ""]
    lines += _table("Changed functions the matrix does not reach", missed,
                    [("function", _name), ("file", lambda f: f["file"]), ("changed lines", _changed)])
    lines += _table("Changed functions the matrix reaches", hit,
                    [("function", _name), ("file", lambda f: f["file"]),
                     ("changed lines reached", lambda f: f"{f['changed_reached']} / {_changed(f)}"),
                     ("cases reaching the change", _cases)])
    for what in ("added", "removed"):
        shown = files[what][:TABLE_ROWS]
        more = len(files[what]) - len(shown)
        lines.append(f"\nFiles {what} ({len(files[what])}): " + (", ".join(f"`{w}`" for w in shown) or "none") +
                     (f" +{more} more" if more > 0 else "") + ".")
    removed = changes["removed_functions"]
    lines.append(f"\nFunctions removed ({len(removed)}, files removed included): "
                 + (", ".join(f"`{r}`" for r in removed[:TABLE_ROWS]) or "none")
                 + (f" +{len(removed) - TABLE_ROWS} more" if len(removed) > TABLE_ROWS else "") + ".")
    return "\n".join(lines) + "\n"


# --- command line -----------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, help="the candidate's report directory (gets stack-changes.json and .md)")
    parser.add_argument("--baseline", type=Path, required=True, help="the baseline environment's site-packages")
    parser.add_argument("--candidate", type=Path, required=True, help="the candidate environment's site-packages")
    parser.add_argument("--coverage", type=Path, default=None,
                        help="the candidate run's --vgf-stack-coverage directory (default OUT/stack-coverage)")


def command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Check the arguments (each error names its argument), compare, write."""
    coverage = args.coverage or args.out / "stack-coverage"
    for option, path in (("--baseline", args.baseline), ("--candidate", args.candidate), ("--coverage", coverage)):
        if not path.is_dir():
            parser.error(f"{option} {path}: no such directory")
    for option, path in (("--baseline", args.baseline), ("--candidate", args.candidate)):
        if not stack_files([path])[0]:
            parser.error(f"{option} {path}: holds none of {', '.join(STACK_PACKAGES[:-1])} (expected an "
                         "environment's site-packages: <venv>/bin/python -c 'import sysconfig; "
                         "print(sysconfig.get_paths()[\"purelib\"])')")
    try:
        by_case = reached(coverage)
    except ValueError as error:
        parser.error(f"--coverage {error}")
    if not by_case:
        parser.error(f"--coverage {coverage}: its data files record no case")
    changes = compare([args.baseline, REPOSITORY], [args.candidate, REPOSITORY], by_case)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "stack-changes.json").write_text(json.dumps(changes, indent=1, sort_keys=True) + "\n")
    (args.out / "stack-changes.md").write_text(render(changes))
    print(f"stack changes: {summary_line(changes)} ({args.out / 'stack-changes.md'})")
    return 0
