"""The matrix's blind spots: the stack functions no case reaches
(vgf_conformance/harness/measurements/blind_spots.py), the stack-coverage
verb over several shard directories, and the report's page for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vgf_conformance.harness.measurements import blind_spots, stack_coverage
from vgf_conformance.harness.reporting import html
from vgf_conformance.harness.reporting.publish import write_report
from vgf_conformance.harness.reporting.records import build_report

#: A stack file: a reached function, an unreached decorated one (whose def,
#: decorator and docstring lines run at import), a class whose reached method
#: holds an unreached nested function, and an unreached method holding one.
PASSES = '''"""Passes."""
import functools


def reached_fn(x):
    """Doc."""
    y = x + 1
    return y


@functools.cache
def unreached_fn(x):
    """Doc,
    on two lines."""
    if x:
        return 1
    return 2


class Pass:
    def call(self, graph):
        def helper():
            return "helped"
        return graph

    def other(self):
        def inner():
            return "inner"
        return inner()

    def abstract(self):
        """A docstring only: nothing to reach."""
'''
#: A file no case reaches.
NEVER = '''def one():
    return 1


def two():
    return 2
'''


def _line(text: str, snippet: str) -> int:
    """The line number of the first line of ``text`` holding ``snippet``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if snippet in line)


def _fake_stack(root: Path) -> dict[str, Path]:
    """A stack of three packages in ``root``: stack_roots' mapping of it."""
    files = {"arm/_passes/passes.py": PASSES, "arm/_passes/never.py": NEVER, "arm/__init__.py": "import os\n",
             "arm/test/test_passes.py": NEVER, "arm/misc/test_helpers.py": NEVER, "arm/tests/conftest.py": NEVER,
             "arm/scripts/generate.py": NEVER,  # a build script shipped with the stack
             "exir/emit.py": NEVER, "vgf_export/names.py": NEVER}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {"executorch/backends/arm": root / "arm", "executorch/exir": root / "exir",
            "vgf_export": root / "vgf_export"}


PASSES_NAME = "executorch/backends/arm/_passes/passes.py"
#: What the cases reach of PASSES: a body line of reached_fn; the lines of
#: unreached_fn and Pass.other that run at import (decorator, def); the
#: body of Pass.call without its helper's; a line of exir/emit.py's ``two``.
REACHED = {f"{PASSES_NAME}:{_line(PASSES, s)}" for s in (
    "y = x + 1", "@functools.cache", "def unreached_fn", "def other", "def helper", "return graph")} | {
    f"executorch/exir/emit.py:{_line(NEVER, 'return 2')}"}


def test_the_listing_names_each_unreached_function_and_counts_each_file(tmp_path):
    files, unparsed = blind_spots.find(REACHED, _fake_stack(tmp_path))
    assert unparsed == []
    # The Arm backend first, then vgf_export, then exir (not alphabetical); test files and a
    # file without functions are left out.
    assert [(f["area"], f["file"]) for f in files] == [
        ("Arm backend: _passes", "executorch/backends/arm/_passes/never.py"),
        ("Arm backend: _passes", PASSES_NAME),
        ("vgf_export", "vgf_export/names.py"), ("exir", "executorch/exir/emit.py")]
    never, passes, names, emit = files
    assert never["never_reached"] and never["unreached"] == [] and never["functions"] == 2
    assert names["never_reached"] and not emit["never_reached"]
    assert emit["unreached"] == [{"name": "one", "first": 1, "last": 2, "lines": 1}]
    # unreached_fn's decorator and def lines ran (at import): its body did not. Pass.other's
    # nested inner is listed with it, not on its own; Pass.call's helper is listed on its own.
    assert passes["unreached"] == [
        {"name": "unreached_fn", "first": _line(PASSES, "def unreached_fn"), "last": _line(PASSES, "return 2"),
         "lines": 3},
        {"name": "Pass.call.helper", "first": _line(PASSES, "def helper"), "last": _line(PASSES, '"helped"'),
         "lines": 1},
        {"name": "Pass.other", "first": _line(PASSES, "def other"), "last": _line(PASSES, "return inner()"),
         "lines": 3}]
    assert {k: passes[k] for k in ("functions", "functions_reached", "function_lines", "unreached_lines",
                                   "reached_lines", "never_reached")} == {
        "functions": 6, "functions_reached": 2, "function_lines": 11, "unreached_lines": 7,
        "reached_lines": 6, "never_reached": False}  # Pass.abstract, a docstring only, is not a function to reach


@pytest.mark.parametrize("fault", ["the def line counts as the body", "test files are listed",
                                   "areas sorted by name"])
def test_the_listing_check_fails_on_the_faults_it_exists_for(fault, tmp_path, monkeypatch):
    """Each fault, planted, changes what the listing test asserts."""
    roots = _fake_stack(tmp_path)
    right, _ = blind_spots.find(REACHED, roots)
    if fault == "the def line counts as the body":
        monkeypatch.setattr(blind_spots, "_body_start", lambda node: node.lineno)
    elif fault == "test files are listed":
        monkeypatch.setattr(blind_spots, "outside_the_lowering", lambda name: False)
    else:
        monkeypatch.setattr(blind_spots, "AREAS", tuple(sorted(blind_spots.AREAS, key=lambda a: a[1])))
    wrong, _ = blind_spots.find(REACHED, roots)
    assert wrong != right
    if fault == "the def line counts as the body":  # an unreached function looks reached
        assert "unreached_fn" not in [u["name"] for f in wrong for u in f["unreached"]]


def test_the_stack_roots_are_found_without_importing_the_stack():
    roots = blind_spots.stack_roots(stack_coverage.STACK_PACKAGES)
    assert set(roots) == {"executorch/backends/arm", "executorch/exir", "torchao/quantization/pt2e", "vgf_export"}
    assert (roots["executorch/backends/arm"] / "_passes").is_dir() and (roots["vgf_export"] / "names.py").is_file()
    with pytest.raises(ValueError, match="packages: no_such_package_here.sub is not installed"):
        blind_spots.stack_roots(["no_such_package_here.sub"])


def test_the_markdown_has_a_table_per_area_and_a_capped_line_per_file(tmp_path):
    files, unparsed = blind_spots.find(REACHED, _fake_stack(tmp_path))
    blind = blind_spots.listing(files, unparsed, {"executorch": "1"}, cases=3)
    assert blind["areas"][0] == {"area": "Arm backend: _passes", "files": 2, "never_reached": 1, "functions": 8,
                                 "functions_unreached": 6, "lines": 13, "lines_unreached": 9}
    text = blind_spots.markdown(blind, per_file=2)
    assert "| Arm backend: _passes | 2 | 1 | 6 / 8 | 9 / 13 |" in text
    assert "- `executorch/backends/arm/_passes/never.py`: never reached (2 functions, 2 lines)" in text
    assert (f"- `{PASSES_NAME}`: 4 of 6 functions unreached: unreached_fn (lines 12-17, 3 lines), "
            "Pass.other (lines 26-29, 3 lines), +1 more") in text


# ---------------------------------------------------------------------------
# The verb: shard directories merged, the page written and linked
# ---------------------------------------------------------------------------
def _data_file(directory: Path, worker: str, lines_by_case: dict[str, dict[str, list[int]]]) -> None:
    """A --vgf-stack-coverage data file: per run key, per file, the lines reached (as arcs, a branch run)."""
    import coverage

    directory.mkdir(parents=True, exist_ok=True)
    data = coverage.CoverageData(basename=str(directory / f"{stack_coverage.DATA_PREFIX}{worker}"))
    for key, by_file in lines_by_case.items():
        data.set_context(key)
        data.add_arcs({name: {(-1, lines[0]), *zip(lines, lines[1:]), (lines[-1], -1)}
                       for name, lines in by_file.items()})
    data.write()


#: Where a shard's machine had the stack: its site-packages.
SITE = "/runner/venv/lib/python3.11/site-packages"


@pytest.fixture
def shards(tmp_path, monkeypatch):
    """Two shards' data directories, both with a ``.coverage.gw0``, and the fake stack as the stack."""
    roots = _fake_stack(tmp_path / "stack")
    monkeypatch.setattr(blind_spots, "stack_roots", lambda packages: roots)
    monkeypatch.setattr(stack_coverage, "stack_versions", lambda: {"executorch": "1"})
    passes = f"{SITE}/{PASSES_NAME}"
    _data_file(tmp_path / "shard-1", "gw0", {"case-a": {passes: [_line(PASSES, "y = x + 1")]}})
    _data_file(tmp_path / "shard-2", "gw0", {"case-b": {passes: [_line(PASSES, "return graph")],
                                                        f"{SITE}/executorch/exir/emit.py": [5]}})
    return tmp_path / "shard-1", tmp_path / "shard-2"


def test_the_verb_merges_shard_directories_and_writes_the_blind_spots(shards, tmp_path):
    out = tmp_path / "merged"
    assert stack_coverage.main([*map(str, shards), "--json", str(tmp_path / "lines.json"),
                                "--blind-spots", str(out)]) == 0
    table = json.loads((tmp_path / "lines.json").read_text())["lines"]
    assert table[f"{PASSES_NAME}:{_line(PASSES, 'y = x + 1')}"] == ["case-a"]
    assert table[f"{PASSES_NAME}:{_line(PASSES, 'return graph')}"] == ["case-b"]
    text = (out / "stack-blind-spots.json").read_text()
    blind = json.loads(text)
    assert blind["cases"] == 2 and blind["stack"] == {"executorch": "1"}
    assert str(tmp_path) not in text and SITE not in text  # no machine's paths
    assert [f["file"] for f in blind["files"]][:2] == ["executorch/backends/arm/_passes/never.py", PASSES_NAME]
    assert "Pass.call.helper (lines" in (out / "stack-blind-spots.md").read_text()
    page = (out / "stack.html").read_text()
    assert '<details class="file"' in page and "Pass.call.helper" in page and "report.html" not in page


def test_a_run_key_in_two_shard_directories_is_refused_naming_both(shards, capsys):
    _data_file(shards[1], "gw1", {"case-a": {f"{SITE}/{PASSES_NAME}": [7]}})
    with pytest.raises(SystemExit):
        stack_coverage.main([str(shards[0]), str(shards[1])])
    error = capsys.readouterr().err
    assert f"run key 'case-a' is in both {shards[0]} and {shards[1]}" in error


def test_bad_directories_are_named(shards, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        stack_coverage.main([str(shards[0]), str(tmp_path / "empty")])
    assert f"directories: {tmp_path / 'empty'}: no .coverage.* data files" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit):
        stack_coverage.main([str(shards[0]), "--blind-spots", str(tmp_path / "a-file")])
    assert f"--blind-spots: {tmp_path / 'a-file'} is a file" in capsys.readouterr().err


def test_the_report_page_links_the_blind_spots_page_once_there_is_one(shards, tmp_path):
    out = tmp_path / "merged"
    write_report(build_report({"c-1": {"family": "resize", "tests": {"test_export": "passed"}}}), out)
    assert 'href="stack.html"' not in (out / "report.html").read_text()
    assert stack_coverage.main([*map(str, shards), "--blind-spots", str(out)]) == 0
    assert 'href="stack.html"' in (out / "report.html").read_text()
    assert 'href="report.html"' in (out / "stack.html").read_text()
    (out / "stack.html").unlink()  # python -m vgf_conformance html DIR writes it again
    assert html.main([str(out)]) == 0
    assert PASSES_NAME in (out / "stack.html").read_text()
