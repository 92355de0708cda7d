"""examples/team-repo as a team would use it: the installed plugin runs its
cases through every tier; a changed model fails its golden with the case,
the sections, the diff and the accept command; ``--snapshot-update``
accepts it. And the package's wheel carries the plugin and its data files."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.helpers import collected
from vgf_conformance.harness.plugin.progress import case_of as _case_id

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "team-repo"
TEAM_CASES = {"thumbnail-down4-int8io", "warp-rgba-border-int8io"}
TIERS = {"test_export", "test_delegation", "test_golden", "test_statistics", "test_numerics_vs_fake_quant",
         "test_numerics_vs_float_dq", "test_numerics_vs_float", "test_pte", "test_vulkan"}
RESULT = re.compile(r"::(test_\w+)\[([a-z0-9_.-]+)\] (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)")


@pytest.fixture
def team(pytester, monkeypatch) -> pytest.Pytester:
    """A copy of the example repository, run as its own pytest root."""
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "out"))
    monkeypatch.setenv("CI", "true")  # the Vulkan tier is required, as in CI: no skip
    # model-converter is found on PATH, as in an activated environment.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # The suite's modules found on a path, as in a non-editable install: pytest
    # rewrites (and so explains, with the golden diff) the asserts only of
    # modules on sys.path, not of ones behind setuptools' editable finder.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return pytester


def _run(team: pytest.Pytester, *args: str):
    result = team.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", "-v", "-W", "ignore::DeprecationWarning",
                                       *args, timeout=1200)
    outcomes: dict[str, dict[str, str]] = {}
    for test, case, outcome in RESULT.findall(result.stdout.str()):
        outcomes.setdefault(case, {})[test] = outcome
    return result, outcomes


def test_the_team_repository_runs_fails_on_a_changed_model_and_accepts_it(team):
    golden = team.path / "golden"
    committed = {p.name: p.read_text() for p in golden.iterdir()}

    # Its committed goldens hold: every tier passes, on its cases only; the
    # report lists them, with the command that reruns one.
    result, outcomes = _run(team, "--vgf-report", "report")
    assert result.ret == 0, (
        result.stdout.str()[-4000:] + "\nIf the golden format changed on purpose, regenerate the example's "
        "goldens: cd examples/team-repo && pytest -n 0 --snapshot-update (and review them)")
    assert set(outcomes) == TEAM_CASES  # the built-in matrix does not run
    assert all(tests == dict.fromkeys(TIERS, "PASSED") for tests in outcomes.values()), outcomes
    report = json.loads((team.path / "report" / "report.json").read_text())
    assert {c["id"]: c["outcome"] for c in report["cases"]} == dict.fromkeys(TEAM_CASES, "passed")
    assert report["run"]["command"] == "pytest"

    # A changed model: its golden fails, and says which case, which sections,
    # what changed and how to accept it; everything else still passes.
    models = team.path / "models.py"
    models.write_text(models.read_text().replace('mode: str = "bilinear"', 'mode: str = "nearest"'))
    result, outcomes = _run(team)
    assert result.ret == 1
    assert outcomes["thumbnail-down4-int8io"] == {**dict.fromkeys(TIERS, "PASSED"), "test_golden": "FAILED",
                                                  "test_statistics": "FAILED"}  # it samples elsewhere
    assert outcomes["warp-rgba-border-int8io"] == dict.fromkeys(TIERS, "PASSED")
    output = result.stdout.str()
    sections = re.search(r"golden of thumbnail-down4-int8io changed in sections \[(.*?)\]", output)
    assert sections and {"'case'", "'tosa'"} <= set(sections.group(1).split(", ")), output[-4000:]
    assert re.search(r"^E\s+-\s+\"model\": \"Thumbnailer\(.*mode='bilinear'", output, re.M), output[-4000:]
    assert re.search(r"^E\s+\+\s+\"model\": \"Thumbnailer\(.*mode='nearest'", output, re.M), output[-4000:]
    # The accept command runs in this repository (its ini file gives the case
    # file and the golden directory), not the suite's own scripts/conformance.sh.
    assert re.search(r"^E\s+pytest --vgf-case thumbnail-down4-int8io --snapshot-update$", output, re.M), output[-4000:]
    assert {p.name: p.read_text() for p in golden.iterdir()} == committed  # nothing written without the flag

    # Accepted: that golden alone is rewritten, and the next run passes.
    result, _ = _run(team, "-k", "thumbnail-down4-int8io", "--snapshot-update")
    assert result.ret == 0, result.stdout.str()[-4000:]
    assert "mode='nearest'" in (golden / "thumbnail-down4-int8io.json").read_text()
    assert (golden / "warp-rgba-border-int8io.json").read_text() == committed["warp-rgba-border-int8io.json"]
    result, outcomes = _run(team, "-k", "thumbnail-down4-int8io")
    assert result.ret == 0 and outcomes["thumbnail-down4-int8io"] == dict.fromkeys(TIERS, "PASSED")


def test_the_report_knows_the_team_cases(team):
    """The team's ini file alone selects its cases (collected in this process)."""
    node_ids = collected(team)
    if len(node_ids) != len(TEAM_CASES) * len(TIERS):
        pytest.fail(f"collection: {node_ids[:5]}")  # not the failure expected
    assert {_case_id(n) for n in node_ids} == TEAM_CASES, node_ids[:3]


# ---------------------------------------------------------------------------
# The wheel a non-editable install gets
# ---------------------------------------------------------------------------
def _wheel(tmp_path: Path, pyproject: str) -> zipfile.ZipFile:
    """The wheel of this package's sources (copied, so the build leaves
    nothing in the repository) with ``pyproject``."""
    source = tmp_path / "src"
    for package in ("vgf_conformance", "vgf_export"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "README.md", source / "README.md")
    (source / "pyproject.toml").write_text(pyproject)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    return zipfile.ZipFile(wheel)


def _missing_from(wheel: zipfile.ZipFile) -> list[str]:
    names = set(wheel.namelist())
    sources = [p.relative_to(REPO).as_posix() for package in ("vgf_conformance", "vgf_export")
               for p in (REPO / package).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(s for s in sources if s not in names)


def test_the_wheel_carries_the_plugin_and_its_data_files(tmp_path):
    wheel = _wheel(tmp_path, (REPO / "pyproject.toml").read_text())
    assert _missing_from(wheel) == []
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "[pytest11]\nvgf_conformance = vgf_conformance.harness.plugin" in wheel.read(entry_points).decode()


def test_a_wheel_without_package_data_is_caught(tmp_path):
    pyproject = (REPO / "pyproject.toml").read_text()
    stripped = re.sub(r'"vgf_conformance\.oracles\.vulkan" = \[.*?\]\n', "", pyproject)
    assert stripped != pyproject
    assert "vgf_conformance/oracles/vulkan/shaders/grid_sampler.comp" in _missing_from(_wheel(tmp_path, stripped))


# ---------------------------------------------------------------------------
# A non-editable install into a fresh venv, beside tosa-tools
# ---------------------------------------------------------------------------
STACK_SITE = Path(sysconfig.get_paths()["purelib"])  # the pinned stack of .venv


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new venv with this package's wheel and tosa-tools' wheel installed
    into its own site-packages (no editable finder, no repository on the
    path), the rest of the pinned stack reached through a path entry: where
    a regular install would merge two top-level ``conformance/`` folders."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = _wheel(tmp, (REPO / "pyproject.toml").read_text()).filename
    venv = tmp / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # A plain path line: the stack's modules, not its .pth files (so not the
    # editable finder of this repository's own development install).
    (site / "zz_pinned_stack.pth").write_text(f"{STACK_SITE}\n")
    tosa_tools = importlib.metadata.version("tosa-tools")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                    wheel, f"tosa-tools=={tosa_tools}"], check=True, capture_output=True, timeout=900)
    return venv


def _in_venv(venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 120):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")}
    # The venv's own scripts first; the stack's native tools (model-converter) after them.
    environ["PATH"] = os.pathsep.join([str(venv / "bin"), str(Path(sys.executable).parent), environ["PATH"]])
    environ.update(env or {})
    return subprocess.run([str(venv / "bin" / "python"), *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.expensive("a fresh venv with the whole stack")
def test_a_wheel_in_a_fresh_venv_beside_tosa_tools_imports_its_own_modules(fresh_venv, tmp_path):
    probe = _in_venv(fresh_venv, "-c", textwrap.dedent("""
        import importlib.metadata as md, json, pathlib
        import conformance, vgf_conformance, vgf_conformance.harness.plugin, vgf_export
        def owner(package):  # the distributions with a file in the package's folders
            folders = [pathlib.Path(p).resolve() for p in package.__path__]
            return sorted({d.metadata["Name"] for d in md.distributions() for f in d.files or ()
                           if pathlib.Path(d.locate_file(f)).resolve().parent in folders})
        plugins = [e.value for e in md.entry_points(group="pytest11") if e.name == "vgf_conformance"]
        print(json.dumps({m.__name__: owner(m) for m in (conformance, vgf_conformance, vgf_export)}
                         | {"plugins": plugins}))
        """), cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    owners = json.loads(probe.stdout)
    # Each top-level package is its own distribution's, in the fresh venv.
    assert owners == {"conformance": ["tosa-tools"], "vgf_conformance": ["vgf-conformance"],
                      "vgf_export": ["vgf-conformance"], "plugins": ["vgf_conformance.harness.plugin"]}, owners
    site = next((fresh_venv / "lib").glob("python3.*/site-packages"))
    assert not (site / "conformance" / "harness").exists()  # nothing of ours in tosa-tools' folder


@pytest.mark.parametrize("autoload", ["on", "off"])
@pytest.mark.expensive("a fresh venv with the whole stack")
def test_a_wheel_in_a_fresh_venv_runs_the_team_repository(fresh_venv, tmp_path, autoload):
    team = tmp_path / "team"
    shutil.copytree(EXAMPLE, team, ignore=shutil.ignore_patterns("__pycache__", "out"))
    args = ["-m", "pytest", "-m", "quick", "-v", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
    env = {"CI": "true"}  # the Vulkan tier required: it runs, no skip
    if autoload == "off":  # the plugin (and syrupy, whose fixture it uses) named by entry point
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        args += ["-p", "vgf_conformance", "-p", "syrupy"]
    result = _in_venv(fresh_venv, *args, cwd=team, env=env, timeout=1200)
    outcomes = {(test, case): outcome for test, case, outcome in RESULT.findall(result.stdout)}
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert outcomes == {(t, "thumbnail-down4-int8io"): "PASSED" for t in TIERS}, result.stdout[-4000:]
    # The modules that ran are the wheel's, not this repository's.
    assert str(REPO) not in result.stdout
