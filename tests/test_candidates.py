"""Candidates (pin sets on top of the lock), their findings, and the
compatibility matrix (``python -m vgf_conformance report compat``)."""

import json
import stat
import subprocess
from pathlib import Path

import pytest

from vgf_conformance.harness.candidates import compat, preflight
from vgf_conformance.harness.reporting.diff import load_report
from vgf_conformance.harness.reporting.records import build_report
from vgf_conformance.report import main

REPO = Path(__file__).resolve().parent.parent
CANDIDATES = sorted((REPO / "candidates").glob("*.txt"))

PIP_CONFLICT_LOG = """\
Collecting executorch==1.5.1 (from executorch[vgf]==1.5.1->-r requirements.txt (line 1))
INFO: pip is looking at multiple versions of executorch[vgf] to determine which version is compatible.
ERROR: Cannot install -r requirements.txt (line 4), executorch[vgf]==1.5.1 and ml-dtypes==0.5.3 because these package versions have conflicting dependencies.

The conflict is caused by:
    The user requested ml-dtypes==0.5.3
    tosa-tools 2026.8.0 depends on ml-dtypes==0.5.3
    executorch[vgf] 1.5.1 depends on ml_dtypes==0.5.1; extra == "vgf"

To fix this you could try to:
1. loosen the range of package versions you've specified

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""

GLIBC_OUTPUT = ("/root/.cache/x/bin/model-converter: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' "
                "not found (required by /root/.cache/x/bin/model-converter)\n"
                "/root/.cache/x/bin/model-converter: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found")


def test_pins_override_the_lock_by_package_name():
    lock = "executorch==1.5.1\nml_dtypes==0.5.1\ntosa-tools==2026.5.0\ntorch==2.13.0\n"
    merged = compat.merge_pins("# comment\nexecutorch[vgf]==1.4.1  # with its extra\nML-Dtypes==0.5.3\n", lock)
    assert merged == ["executorch[vgf]==1.4.1", "ML-Dtypes==0.5.3", "tosa-tools==2026.5.0", "torch==2.13.0"]
    with pytest.raises(ValueError, match="names no package"):
        compat.merge_pins("# nothing\n", lock)
    with pytest.raises(ValueError, match="options are not supported"):
        compat.merge_pins("-r other.txt\n", lock)


@pytest.mark.parametrize("pins", CANDIDATES, ids=lambda p: p.stem)
def test_each_candidate_is_a_pin_set_on_the_lock(pins):
    own = compat.requirement_lines(pins.read_text())
    assert own and all("==" in line for line in own), f"{pins.name}: pin exact versions: {own}"
    merged = compat.merge_pins(pins.read_text(), (REPO / "requirements.lock").read_text())
    names = [compat.normalize(compat._NAME.match(line).group(1)) for line in merged]
    assert len(names) == len(set(names)), f"{pins.name}: a package is pinned twice in {merged}"
    assert pins.read_text().startswith("#"), f"{pins.name}: say what the candidate is in a comment first"


def test_the_four_candidates_of_the_issue_and_1_4_1_by_version():
    names = {p.stem for p in CANDIDATES}
    assert {"tosa-tools-2026.8", "ml-sdk-0.12", "executorch-1.5.1-vgf", "executorch-1.4.1"} <= names


def test_an_unknown_candidate_is_refused_with_the_list(tmp_path):
    done = subprocess.run(["bash", "scripts/candidate.sh", "no-such-pins"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "no pin set no-such-pins: write candidates/no-such-pins.txt" in done.stderr
    assert "executorch-1.4.1" in done.stderr


def test_a_pip_conflict_is_said_in_its_lines():
    reason = compat.pip_failure_reason(PIP_CONFLICT_LOG)
    assert reason == ("pip cannot resolve the pin set: The user requested ml-dtypes==0.5.3; tosa-tools 2026.8.0 "
                      "depends on ml-dtypes==0.5.3; executorch[vgf] 1.5.1 depends on ml_dtypes==0.5.1; extra == \"vgf\"")
    other = compat.pip_failure_reason("Collecting x\nERROR: No matching distribution found for x==9\n")
    assert other == "pip could not install the pin set: ERROR: No matching distribution found for x==9"


def test_a_binary_that_needs_a_newer_glibc_is_said_without_paths(monkeypatch):
    monkeypatch.setattr(preflight, "system_glibc", lambda: "2.36")
    reason = preflight.tool_failure_reason("model-converter", "ai-ml-sdk-model-converter", "0.10.0", GLIBC_OUTPUT)
    assert reason == ("model-converter (ai-ml-sdk-model-converter 0.10.0) cannot run here (requires glibc 2.38; "
                      "this system has glibc 2.36)")
    monkeypatch.setattr(preflight, "system_glibcxx", lambda: "3.4.30")
    reason = preflight.tool_failure_reason("the Vulkan layers", "ai-ml-emulation-layer-for-vulkan", "0.10.0",
                                           "OSError: /lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
                                           "(required by /root/.cache/e/libVkLayer_Graph.so)")
    assert reason.endswith("(requires libstdc++ GLIBCXX_3.4.32; this system has libstdc++ up to GLIBCXX_3.4.30)")
    both = preflight.tool_failure_reason("model-converter", "ai-ml-sdk-model-converter", "0.10.0",
                                         GLIBC_OUTPUT + "\nversion `GLIBCXX_3.4.32' not found (required by x)")
    assert both.endswith("(requires glibc 2.38 and libstdc++ GLIBCXX_3.4.32; this system has glibc 2.36 "
                         "and libstdc++ up to GLIBCXX_3.4.30)")
    reason = preflight.tool_failure_reason("vgf_dump", "ai-ml-sdk-vgf-library", "0.9", "boom at /root/.cache/a/b/vgf_dump")
    assert reason == "vgf_dump (ai-ml-sdk-vgf-library 0.9) cannot run here: boom at vgf_dump"


def _tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_preflight_finds_a_tool_that_cannot_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")  # not the venv: its tools are real
    monkeypatch.setattr(preflight, "STACK_MODULES", ("json",))
    monkeypatch.setattr(preflight, "_vulkan_preflight", lambda versions: [])
    _tool(tmp_path, "vgf_dump", "echo 0.11.0")
    _tool(tmp_path, "model_converter", "echo 0.12.0")  # the only name ML SDK 0.12 ships
    assert preflight.preflight(tmp_path) == []
    _tool(tmp_path, "model-converter", f"cat >&2 <<'EOF'\n{GLIBC_OUTPUT}\nEOF\nexit 1")
    [reason] = preflight.preflight(tmp_path)
    assert reason.startswith("model-converter (ai-ml-sdk-model-converter ") and "requires glibc 2.38" in reason
    (tmp_path / "vgf_dump").unlink()
    assert any(r.startswith("vgf_dump (ai-ml-sdk-vgf-library ") and r.endswith("is not on PATH")
               for r in preflight.preflight(tmp_path))
    monkeypatch.setattr(preflight, "STACK_MODULES", ("json", "no_such_module_here"))
    assert "`import no_such_module_here` fails: ModuleNotFoundError: No module named 'no_such_module_here'" \
        in preflight.preflight(tmp_path)


def _case(sections=(), max_lsb=1.0, export="passed", vulkan="passed", warnings=()):
    return {"family": "resize", "golden_changed": list(sections), "warnings": list(warnings), "stage": "run",
            "tests": {"test_export": export, "test_golden": "failed" if sections else "passed", "test_vulkan": vulkan},
            "numerics": {"outputs": [{"vs_float": {"max_lsb": max_lsb}}]}}


def _candidate_report(name, cases, needed=(True, True)):
    report = build_report(cases, {f"w{i}": {"name": f"w{i}", "needed": n, "evidence": [], "upstream": "u"}
                                  for i, n in enumerate(needed)})
    report["candidate"] = {"name": name, "pins": ["x==1"], "installs": True, "runs": True, "reason": None,
                           "versions": {"executorch": "1.4.1"}, "scope": "-m quick"}
    return report


def test_matrix_rows_say_what_each_column_asks(tmp_path):
    baseline = build_report({"a": _case(), "b": _case(), "c": _case()})
    moved = _candidate_report("moved", {
        "a": _case(sections=("tosa",), max_lsb=34.0), "b": _case(sections=("tosa", "vgf"), max_lsb=0.5),
        "c": _case(export="failed", vulkan="failed", warnings=["DeprecationWarning: soon gone"])}, needed=(True, False))
    moved["cases"][2]["stage"] = "convert"
    row = compat.matrix_row(baseline, moved, "moved")
    assert row["installs"] == "yes"
    assert row["exports"] == "**no**: 1 of 3 fail (1 at convert)"
    assert row["goldens"] == "1 unchanged / 2 changed (tosa 2, vgf 1)"
    assert row["numerics"] == ("1 worse (worst 34 LSB, was 1: a out0 vs_float); "
                               "1 better (most 1 -> 0.5 LSB: b out0 vs_float)")
    assert row["vulkan"] == "**no**: 1 of 3 differ or fail"
    assert row["workarounds"] == "1 of 2; not needed: w1"
    assert row["warnings"] == "1: DeprecationWarning: soon gone"
    same = _candidate_report("same", {"a": _case(), "b": _case(), "c": _case()})
    row = compat.matrix_row(baseline, same, "same")
    assert (row["exports"], row["goldens"], row["numerics"], row["vulkan"], row["workarounds"], row["warnings"]) == (
        "yes (3/3)", "3 unchanged / 0 changed", "same (3 cases compared)", "yes (3/3)", "all 2", "none")


def test_findings_are_reports_the_matrix_reads(tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text("# a candidate\nexecutorch[vgf]==1.5.1\ntosa-tools==2026.8.0\n")
    log = tmp_path / "install.log"
    log.write_text(PIP_CONFLICT_LOG)
    assert compat.main(["finding", str(tmp_path / "conflict"), "--name", "conflict", "--pins", str(pins),
                        "--pip-log", str(log), "--scope", "-m", "quick"]) == 0
    report = load_report(tmp_path / "conflict")
    assert report["cases"] == [] and report["candidate"]["installs"] is False
    assert report["candidate"]["scope"] == "-m quick"
    assert report["candidate"]["pins"] == ["executorch[vgf]==1.5.1", "tosa-tools==2026.8.0"]
    compat.write_finding(tmp_path / "glibc", compat.CandidateRecord(
        "glibc", ["executorch[vgf]==1.5.1"], installs=True, runs=False,
        reason="model-converter (ai-ml-sdk-model-converter 0.10.0) cannot run here (requires glibc 2.38)"))
    (tmp_path / "ran").mkdir()
    (tmp_path / "ran" / "report.json").write_text(json.dumps(build_report({"a": _case()})))
    compat.stamp(tmp_path / "ran", compat.CandidateRecord("ran", ["x==1"], True, True, scope="-m quick"))
    assert load_report(tmp_path / "ran")["candidate"]["name"] == "ran"
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "report.json").write_text(json.dumps(build_report({"a": _case()})))
    out = tmp_path / "compatibility.md"
    assert main(["compat", "--baseline", str(tmp_path / "base"), str(tmp_path / "conflict"),
                 str(tmp_path / "glibc"), str(tmp_path / "ran"), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Compatibility matrix\n\nGenerated by `python -m vgf_conformance report compat "
                           "--baseline reports/base reports/conflict reports/glibc reports/ran`")
    assert "| conflict | **no**: pip cannot resolve the pin set: The user requested ml-dtypes==0.5.3;" in text
    assert ("| glibc | yes | **no**: model-converter (ai-ml-sdk-model-converter 0.10.0) cannot run here "
            "(requires glibc 2.38) | - |") in text
    assert "| ran | yes | yes (1/1) | 1 unchanged / 0 changed | same (1 cases compared) | yes (1/1) |" in text
    assert "| ran | 1 | `-m quick` |" in text


def test_compat_refuses_a_directory_without_a_report(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main(["compat", str(tmp_path / "empty")])
    assert exit_info.value.code == 2
    assert f"candidate {tmp_path / 'empty'}: {tmp_path / 'empty'} has no report.json" in capsys.readouterr().err


def test_the_scope_table_names_what_differs_from_the_baseline():
    baseline = build_report({"a": _case()})
    baseline["candidate"] = {"name": "baseline", "pins": [], "installs": True, "runs": True, "reason": None,
                             "versions": {"executorch": "1.5.1", "tosa-tools": "2026.5.0"}, "scope": "-m quick"}
    moved = _candidate_report("moved", {"a": _case()})
    moved["candidate"]["versions"] = {"executorch": "1.4.1", "tosa-tools": "2026.5.0"}
    text = compat.render_matrix(baseline, [("moved", moved)], "baseline")
    assert "Baseline: executorch 1.5.1, tosa-tools 2026.5.0." in text
    assert "| moved | 1 | `-m quick` | executorch 1.4.1 |" in text


def test_the_matrix_counts_the_default_flow_and_says_what_the_others_did():
    flow = "without-bilinear-scale-factor"
    baseline = build_report({"a": _case(), f"{flow}/a": {**_case(max_lsb=60.0), "flow": flow}})
    moved = _candidate_report("moved", {"a": _case(), f"{flow}/a": {**_case(max_lsb=90.0), "flow": flow},
                                        f"{flow}/b": {**_case(export="failed"), "flow": flow}})
    row = compat.matrix_row(baseline, moved, "moved")
    assert row["cases"] == 1 and row["exports"] == "yes (1/1)" and row["numerics"] == "same (1 cases compared)"
    assert row["flows"] == f"{flow}: 1 failed, 1 passed"
    assert compat.matrix_row(baseline, _candidate_report("plain", {"a": _case()}), "plain")["flows"] == "none run"
    assert "| other flows (runs by outcome) |" in compat.render_matrix(baseline, [("moved", moved)])
