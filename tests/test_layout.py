"""The layout holds: layers (and the harness's rooms) import only downwards,
no import circle, nothing imports a test module, the export package knows
nothing of the suite, no product module grows past 400 lines and no folder
holds more than 12 modules.

Every import counts, the ones inside functions too: an import deferred to
run time is still an arrow between two modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent

#: The suite's layers, lowest first: a module imports from its own layer or
#: below. Each entry is a module or a package (with everything under it).
LAYERS = (
    ("foundation", ("vgf_conformance.text", "vgf_conformance.process", "vgf_conformance.speed_patches")),
    ("tosa", ("vgf_conformance.tosa",)),
    ("oracles", ("vgf_conformance.oracles",)),
    ("cases", ("vgf_conformance.cases",)),
    ("goldens", ("vgf_conformance.goldens",)),
    ("harness", ("vgf_conformance.harness",)),
    ("checks", ("vgf_conformance.checks",)),
    ("tools", ("vgf_conformance.explore", "vgf_conformance.native", "vgf_conformance.selftest",
               "vgf_conformance.report", "vgf_conformance.review", "vgf_conformance.upgrade")),
    ("entry points", ("vgf_conformance.__main__", "vgf_conformance.test_cases", "vgf_conformance.test_workarounds")),
)

#: Packages whose rooms are layered too, lowest first: a module in a room
#: imports from its own room or one before it (the package's own ``__init__``
#: and modules outside any room are below every room).
SUB_LAYERS = {
    "vgf_conformance.harness": ("schedule", "execution", "reporting", "measurements", "candidates", "plugin"),
}

#: At most this many modules in one folder (its ``__init__`` not counted), so
#: a newcomer opening it can tell them apart.
MAX_MODULES_PER_FOLDER = 12

#: No product module grows past this many lines.
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("vgf_conformance", "vgf_export"):
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its text (a ``from
    package import module`` names the module, not its package)."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if is_package else name.split(".")[:-1]
            if node.level:
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            submodules = [f"{prefix}.{a.name}" for a in node.names if f"{prefix}.{a.name}" in modules]
            candidates = submodules if len(submodules) == len(node.names) else [prefix, *submodules]
        else:
            continue
        for target in candidates:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> int | None:
    for index, (_, members) in enumerate(LAYERS):
        if any(module == m or module.startswith(m + ".") for m in members):
            return index
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_suite_module_has_a_layer():
    unplaced = sorted(m for m in _modules() if m.startswith("vgf_conformance.") and _layer(m) is None)
    assert not unplaced, f"modules in no layer of tests/test_layout.py LAYERS: {unplaced}"


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} ({LAYERS[_layer(a)][0]}) imports {b} ({LAYERS[_layer(b)][0]})"
                  for a, targets in graph.items() for b in targets
                  if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a))


def _wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """The export package importing the suite; anything importing a test module."""
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if (a.startswith("vgf_export") and b.startswith("vgf_conformance"))
                  or b.rpartition(".")[2].startswith("test_"))


def _room(module: str) -> tuple[str, int] | None:
    for package, rooms in SUB_LAYERS.items():
        if module.startswith(package + "."):
            room = module[len(package) + 1:].split(".")[0]
            return package, rooms.index(room) + 1 if room in rooms else 0
    return None


def _upward_rooms(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for a, targets in graph.items():
        for b in targets:
            room_a, room_b = _room(a), _room(b)
            if room_a and room_b and room_a[0] == room_b[0] and room_b[1] > room_a[1]:
                found.append(f"{a} imports {b}, a room above its own in {room_a[0]}")
    return sorted(found)


def _crowded_folders(paths) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in paths:
        if path.name != "__init__.py":
            folder = str(path.parent.relative_to(REPO))
            counts[folder] = counts.get(folder, 0) + 1
    return {folder: n for folder, n in sorted(counts.items()) if n > MAX_MODULES_PER_FOLDER}


def test_layers_import_only_downwards():
    upward = _upward(_graph())
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_rooms_import_only_downwards():
    upward = _upward_rooms(_graph())
    assert not upward, "upward imports between rooms:\n" + "\n".join(upward)


def test_no_folder_holds_more_than_the_limit():
    crowded = _crowded_folders(_modules().values())
    assert not crowded, f"folders with more than {MAX_MODULES_PER_FOLDER} modules: {crowded}"


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_the_export_package_knows_nothing_of_the_suite_and_nothing_imports_a_test_module():
    assert _wrong_way(_graph()) == []


def _too_long(paths) -> dict[str, int]:
    lengths = {str(path.relative_to(REPO) if path.is_relative_to(REPO) else path): len(path.read_text().splitlines())
               for path in paths}
    return {path: n for path, n in sorted(lengths.items()) if n > MAX_LINES}


def test_no_product_module_grows_past_the_limit():
    too_long = _too_long(_modules().values())
    assert not too_long, f"modules past {MAX_LINES} lines (split them along what they do): {too_long}"


def test_the_checks_fail_on_the_faults_they_exist_for(tmp_path):
    """Each check, on a module written to break it (a deferred import counts)."""
    modules = {name: None for name in ("vgf_conformance.oracles.lowered", "vgf_conformance.harness.execution.runner",
                                       "vgf_conformance.test_cases", "vgf_export.export", "vgf_conformance.text")}
    source = tmp_path / "lowered.py"
    source.write_text("def later():\n    from vgf_conformance.harness.execution.runner import run_case\n"
                      "    from vgf_conformance import test_cases\n")
    graph = {"vgf_conformance.oracles.lowered": _imports("vgf_conformance.oracles.lowered", source, modules),
             "vgf_conformance.harness.execution.runner": {"vgf_conformance.oracles.lowered"}}
    assert graph["vgf_conformance.oracles.lowered"] == {"vgf_conformance.harness.execution.runner", "vgf_conformance.test_cases"}
    assert _upward(graph) == ["vgf_conformance.oracles.lowered (oracles) imports vgf_conformance.harness.execution.runner "
                              "(harness)", "vgf_conformance.oracles.lowered (oracles) imports "
                              "vgf_conformance.test_cases (entry points)"]
    assert _cycles(graph) == [["vgf_conformance.harness.execution.runner", "vgf_conformance.oracles.lowered"]]
    assert _wrong_way(graph) == ["vgf_conformance.oracles.lowered -> vgf_conformance.test_cases"]
    assert _wrong_way({"vgf_export.export": {"vgf_conformance.text"}}) == ["vgf_export.export -> vgf_conformance.text"]
    assert _upward_rooms({"vgf_conformance.harness.schedule.plan": {"vgf_conformance.harness.plugin.session"},
                          "vgf_conformance.harness.plugin.session": {"vgf_conformance.harness.schedule.plan"}}) == [
        "vgf_conformance.harness.schedule.plan imports vgf_conformance.harness.plugin.session, "
        "a room above its own in vgf_conformance.harness"]
    long_module = tmp_path / "long.py"
    long_module.write_text("x = 1\n" * (MAX_LINES + 1))
    assert _too_long([REPO / "vgf_conformance" / "text.py", long_module]) == {str(long_module): MAX_LINES + 1}
    crowded = [REPO / "vgf_conformance" / "crowded" / f"m{i}.py" for i in range(MAX_MODULES_PER_FOLDER + 1)]
    assert _crowded_folders([*crowded, REPO / "vgf_conformance" / "crowded" / "__init__.py"]) == {
        "vgf_conformance/crowded": MAX_MODULES_PER_FOLDER + 1}


def test_the_harness_modules_old_paths_still_import_and_run(tmp_path):
    """A team's ``import vgf_conformance.harness.runner`` gets the module at its
    new path (the same object, with a warning); ``python -m`` of an old command
    path still runs, saying which verb replaces it."""
    code = ("import warnings\nwarnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    import vgf_conformance.harness.runner\nexcept DeprecationWarning as warning:\n"
            "    print(warning)\nwarnings.simplefilter('ignore')\n"
            "from vgf_conformance.harness.runner import run_case\n"
            "from vgf_conformance.harness.execution import runner\n"
            "import vgf_conformance.harness.report as old\nfrom vgf_conformance.harness.reporting import records\n"
            "print(run_case is runner.run_case, old is records, runner.__spec__.name)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "vgf_conformance.harness.runner moved to vgf_conformance.harness.execution.runner; "
        "the old path is kept for one release", "True True vgf_conformance.harness.execution.runner"]
    done = subprocess.run([sys.executable, "-m", "vgf_conformance.harness.slack", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "use python -m vgf_conformance slack" in done.stderr, done.stderr
    assert "usage:" in done.stdout, done.stdout


def test_every_package_says_what_it_holds():
    silent = sorted(name for name, path in _modules().items()
                    if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text())))
    assert not silent, f"packages without a docstring saying what they hold: {silent}"
