"""Where the matrix is blind: the stack functions no case's export reaches.

A regression in a function the matrix never runs changes nothing any check
can see. From the lines the cases reach (``--vgf-stack-coverage``,
:mod:`vgf_conformance.harness.measurements.stack_coverage`), this lists, per
stack source file, the functions and methods (``Class.method``;
``outer.inner`` for a nested one) that no case reaches, with their line span
and their number of executable lines.

The universe is every ``.py`` file under the stack's installed packages
(:func:`stack_roots`), but tests and build scripts (``test/``, ``tests/``, ``scripts/``, ``test_*.py``)
and files with no function (an ``__init__.py`` of imports, a table of
constants: what they run, they run at import, before any case). A function
is reached when a case reaches a line of its body: not its ``def`` or
decorator lines, not its docstring, which run when the module is imported.
Executable lines are coverage.py's own (its parser's statements). A nested
function is listed on its own only when the function around it is reached;
a file with no reached line at all is listed whole ("never reached").

``python -m vgf_conformance stack-coverage DIR... --blind-spots REPORT_DIR``
writes ``REPORT_DIR/stack-blind-spots.json`` (stable: sorted keys, paths
from the package roots, no time), ``REPORT_DIR/stack-blind-spots.md`` and
the report's page ``REPORT_DIR/stack.html``
(:func:`vgf_conformance.harness.reporting.html.write_stack_page`; when the
folder holds a ``report.json``, ``report.html`` is rendered again to link it).
"""

from __future__ import annotations

import ast
import importlib.util
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from vgf_conformance.harness.reporting import html

#: The areas of the stack, in the order the listing shows them (a file is in
#: the first whose prefix its path starts with): the Arm backend first.
AREAS = (
    ("Arm backend: _passes", "executorch/backends/arm/_passes/"),
    ("Arm backend: operators", "executorch/backends/arm/operators/"),
    ("Arm backend: quantizer", "executorch/backends/arm/quantizer/"),
    ("Arm backend: tosa", "executorch/backends/arm/tosa/"),
    ("Arm backend: vgf", "executorch/backends/arm/vgf/"),
    ("Arm backend: the rest", "executorch/backends/arm/"),
    ("vgf_export", "vgf_export/"),
    ("torchao PT2E quantization", "torchao/quantization/pt2e/"),
    ("exir", "executorch/exir/"),
)
#: The area of a file under none of :data:`AREAS`.
OTHER = "other"
#: The Markdown lists at most this many unreached functions of a file (the largest).
FUNCTIONS_PER_FILE = 8


def stack_roots(packages: Iterable[str]) -> dict[str, Path]:
    """Each package's path from its root (``executorch/backends/arm``) -> its
    installed directory, found without importing it (only the top-level
    package's spec is looked up); a ``ValueError`` names one not installed."""
    roots = {}
    for package in packages:
        top, _, rest = package.partition(".")
        spec = importlib.util.find_spec(top)
        locations = list(spec.submodule_search_locations or ()) if spec else []
        found = [Path(p).joinpath(*rest.split(".")) if rest else Path(p) for p in locations]
        found = [p for p in found if p.is_dir()]
        if not found:
            raise ValueError(f"packages: {package} is not installed here (looked in {locations or 'nowhere'})")
        roots[package.replace(".", "/")] = found[0]
    return roots


def area_of(name: str) -> str:
    """The area of a stack file (its path from the package root)."""
    return next((area for area, prefix in AREAS if name.startswith(prefix)), OTHER)


def outside_the_lowering(name: str) -> bool:
    """A test or a build script shipped with the stack, not its lowering: under
    ``test/``, ``tests/`` or ``scripts/``, or a ``test_*.py``."""
    parts = name.split("/")
    return any(part in ("test", "tests", "scripts") for part in parts[:-1]) or parts[-1].startswith("test_")


def _body_start(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The first line of a function's body after its docstring (a decorated
    first statement from its first decorator), or None when it has none."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return None
    return min([body[0].lineno] + [d.lineno for d in getattr(body[0], "decorator_list", ())])


def functions(tree: ast.Module, statements: set[int], reached: set[int]) -> list[dict]:
    """Every function and method of ``tree`` with executable body lines, in
    source order: ``name`` (qualified), ``first`` and ``last`` line, ``body``
    (its executable body lines), ``reached``, and ``listed`` (False for one
    inside an unreached function: the outer one is listed for it)."""
    found: list[dict] = []

    def visit(nodes: Iterable[ast.AST], prefix: str, inside_unreached: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", inside_unreached)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = _body_start(node)
                body = {n for n in statements if start is not None and start <= n <= node.end_lineno}
                hit = bool(body & reached)
                if body:
                    found.append({"name": f"{prefix}{node.name}", "first": node.lineno, "last": node.end_lineno,
                                  "body": body, "reached": hit, "listed": not inside_unreached})
                visit(node.body, f"{prefix}{node.name}.", inside_unreached or not hit)
            else:  # a def under an if, a try, a with...
                visit((c for c in ast.iter_child_nodes(node)
                       if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))), prefix, inside_unreached)

    visit(tree.body, "", False)
    return found


def file_spots(name: str, text: str, reached: set[int]) -> dict | None:
    """One stack file's figures (``name``: its path from the package root),
    or None when it has no function; a ``SyntaxError`` when it does not parse."""
    from coverage.parser import PythonParser

    parser = PythonParser(text=text, filename=name)
    parser.parse_source()
    statements = set(parser.statements)
    found = functions(ast.parse(text, filename=name), statements, reached)
    if not found:
        return None
    never = not reached
    unreached = [f for f in found if not f["reached"] and f["listed"]]
    in_functions = set().union(*(f["body"] for f in found))
    return {"file": name, "area": area_of(name), "lines": len(statements),
            "reached_lines": len(statements & reached), "never_reached": never,
            "functions": len(found), "functions_reached": sum(f["reached"] for f in found),
            "function_lines": len(in_functions),
            "unreached_lines": len(set().union(*(f["body"] for f in unreached))),
            "unreached": [] if never else [{"name": f["name"], "first": f["first"], "last": f["last"],
                                            "lines": len(f["body"])} for f in unreached]}


def find(reached_lines: Iterable[str], roots: Mapping[str, Path]) -> tuple[list[dict], list[str]]:
    """Per stack file under ``roots`` (:func:`stack_roots`), its figures
    (:func:`file_spots`), ordered by :data:`AREAS` then path; and the files
    that do not parse. ``reached_lines``: ``file:line``, ``file`` from the
    package root, as :func:`stack_coverage.reached` gives them."""
    from coverage.exceptions import NotPython

    by_file: dict[str, set[int]] = {}
    for unit in reached_lines:
        where, _, line = unit.rpartition(":")
        by_file.setdefault(where, set()).add(int(line))
    files, unparsed = [], []
    for prefix, directory in sorted(roots.items()):
        for path in sorted(Path(directory).rglob("*.py")):
            name = f"{prefix}/{path.relative_to(directory).as_posix()}"
            if outside_the_lowering(name):
                continue
            try:
                spots = file_spots(name, path.read_text(encoding="utf-8"), by_file.get(name, set()))
            except (SyntaxError, UnicodeDecodeError, NotPython):
                unparsed.append(name)
                continue
            if spots is not None:
                files.append(spots)
    order = {area: i for i, (area, _) in enumerate(AREAS)}
    files.sort(key=lambda f: (order.get(f["area"], len(AREAS)), f["file"]))
    return files, unparsed


def listing(files: list[dict], unparsed: list[str], stack: Mapping[str, str], cases: int) -> dict:
    """The JSON of the blind spots: per area its totals, and the files with
    an unreached function (a fully reached file is counted, not listed)."""
    areas: dict[str, dict] = {}
    for f in files:
        entry = areas.setdefault(f["area"], {"area": f["area"], "files": 0, "never_reached": 0, "functions": 0,
                                             "functions_unreached": 0, "lines": 0, "lines_unreached": 0})
        entry["files"] += 1
        entry["never_reached"] += f["never_reached"]
        entry["functions"] += f["functions"]
        entry["functions_unreached"] += f["functions"] - f["functions_reached"]
        entry["lines"] += f["function_lines"]
        entry["lines_unreached"] += f["unreached_lines"]
    return {"about": __doc__.split("\n\n")[0], "stack": dict(sorted(stack.items())), "cases": cases,
            "areas": list(areas.values()), "unparsed": sorted(unparsed),
            "files": [f for f in files if f["functions_reached"] < f["functions"]]}


def plural(count: int, word: str) -> str:
    """``1 line``, ``2 lines``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def function_text(function: dict) -> str:
    """``name (lines a-b, N lines)``."""
    return f"{function['name']} (lines {function['first']}-{function['last']}, {plural(function['lines'], 'line')})"


def markdown(blind: dict, per_file: int = FUNCTIONS_PER_FILE) -> str:
    """The listing as Markdown: a table of the areas, then one line per file
    with its unreached functions, the largest first, at most ``per_file``."""
    stack = ", ".join(f"{k} {v}" for k, v in blind["stack"].items())
    out = ["# Stack blind spots", "",
           f"The stack functions no case of the matrix reaches ({blind['cases']} cases; {stack}): a regression "
           "in them changes nothing the matrix can see. A function is reached when a case's export runs a "
           "line of its body; the functions nested in an unreached one are counted, not named; lines are "
           "executable lines inside functions.", "",
           "| area | files | never reached | functions unreached / total | lines unreached / total |",
           "|---|---:|---:|---:|---:|"]
    for a in blind["areas"]:
        out.append(f"| {a['area']} | {a['files']} | {a['never_reached']} | {a['functions_unreached']} / "
                   f"{a['functions']} | {a['lines_unreached']} / {a['lines']} |")
    for area, _ in (*AREAS, (OTHER, "")):
        files = [f for f in blind["files"] if f["area"] == area]
        if not files:
            continue
        out += ["", f"## {area}", ""]
        for f in files:
            if f["never_reached"]:
                out.append(f"- `{f['file']}`: never reached ({plural(f['functions'], 'function')}, "
                           f"{plural(f['function_lines'], 'line')})")
                continue
            largest = sorted(f["unreached"], key=lambda u: (-u["lines"], u["first"]))
            more = f", +{len(largest) - per_file} more" if len(largest) > per_file else ""
            out.append(f"- `{f['file']}`: {f['functions'] - f['functions_reached']} of {f['functions']} "
                       f"functions unreached: {', '.join(map(function_text, largest[:per_file]))}{more}")
    if blind["unparsed"]:
        out += ["", f"Files that do not parse (not counted): {', '.join(blind['unparsed'])}"]
    return "\n".join(out) + "\n"


def write(blind: dict, directory: Path) -> list[Path]:
    """Write the listing's JSON, Markdown and page into ``directory`` (made
    if missing); ``report.html`` again when a report is there, to link the page."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / html.BLIND_SPOTS
    data.write_text(json.dumps(blind, indent=1, sort_keys=True) + "\n")
    text = data.with_suffix(".md")
    text.write_text(markdown(blind))
    report = directory / "report.json"
    if report.is_file():
        html.write_html(json.loads(report.read_text()), directory)  # writes the page too
    else:
        html.write_stack_page(directory)
    return [data, text, directory / html.STACK_PAGE]
