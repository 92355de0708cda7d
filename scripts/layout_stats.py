"""The layout's numbers at a git revision: modules, lines, import circles,
modules past 400 lines, folders past 12 modules, imports of a test module
(issues 27's and 44's before and after; upward imports need the layers, which
only tests/test_layout.py knows for now).

    .venv/bin/python scripts/layout_stats.py [REV...]   (default: HEAD)

It reads the revision's files from ``git archive`` and measures them with the
import graph of tests/test_layout.py (the same rules the layout test holds).
"""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _layout_rules():
    spec = importlib.util.spec_from_file_location("layout_rules", REPO / "tests" / "test_layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stats(rev: str) -> dict:
    rules = _layout_rules()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "vgf_conformance", "vgf_export", "conformance"],
                             capture_output=True)
    if archive.returncode:  # an older revision has no conformance/ (or only it): try each
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True)
    with tempfile.TemporaryDirectory() as root:
        tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(root, filter="data")
        rules.REPO = Path(root)
        packages = [p for p in ("vgf_conformance", "conformance", "vgf_export") if (Path(root) / p).is_dir()]
        found = {}
        for package in packages:
            for path in (Path(root) / package).rglob("*.py"):
                parts = list(path.relative_to(root).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found[".".join(parts)] = path
        graph = {name: rules._imports(name, path, found) for name, path in found.items()}
        lengths = {name: len(path.read_text().splitlines()) for name, path in found.items()}
        suite = {n for n in graph if not n.startswith("vgf_export")}
        folders: dict[str, int] = {}
        for path in found.values():
            if path.name != "__init__.py":
                folder = str(path.parent.relative_to(root))
                folders[folder] = folders.get(folder, 0) + 1
        return {
            "rev": rev,
            "modules": len(found),
            "lines": sum(lengths.values()),
            "import arrows": sum(len(t) for t in graph.values()),
            "import circles": [c for c in rules._cycles(graph)],
            "modules past 400 lines": {n: k for n, k in sorted(lengths.items(), key=lambda x: -x[1]) if k > 400},
            "largest module": max(lengths.items(), key=lambda x: x[1]),
            "folders past 12 modules": {f: k for f, k in sorted(folders.items(), key=lambda x: -x[1]) if k > 12},
            "largest folder": max(folders.items(), key=lambda x: x[1]),
            "imports of a test module": sorted(f"{a} -> {b}" for a in suite for b in graph[a]
                                               if b.rpartition(".")[2].startswith("test_")),
        }


if __name__ == "__main__":
    import json

    for rev in sys.argv[1:] or ["HEAD"]:
        print(json.dumps(stats(rev), indent=1))
