"""The linter (ruff, pinned in requirements.lock) over the tree, with the
project's small rule set (pyproject.toml, [tool.ruff]): unused imports,
redefinitions, undefined names, unused locals, late-binding closures."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREE = ("vgf_conformance", "vgf_export", "tests", "scripts", "examples")


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_tree_has_no_finding():
    done = _ruff(*TREE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_rule_finds_its_fault(tmp_path):
    # The project's configuration, on a module with one fault of each rule.
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tmp_path / "faulty.py").write_text(
        "import os\n"                                      # F401 unused import
        "import sys\nimport sys\n"                         # F811 redefinition
        "def f():\n    unused = 1\n    return undefined\n"  # F841, F821
        "def g():\n    fs = []\n    for i in range(3):\n        fs.append(lambda: i)\n    return fs\n"  # B023
        "print(sys)\n")
    done = _ruff("faulty.py", cwd=tmp_path)
    found = {line.split(": ")[1].split()[0] for line in done.stdout.splitlines() if ": " in line and "faulty.py" in line}
    assert found == {"F401", "F811", "F841", "F821", "B023"}, done.stdout
