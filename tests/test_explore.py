"""The explorer (``python -m vgf_conformance explore``): its command line, its draw
child (timeouts, crashes), grouping and shrinking, and end to end on the real
export flow with planted faults (``VGF_EXPLORE_FAULT``, see
vgf_conformance/explore/faults.py)."""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap
import time

import pytest

from vgf_conformance.explore import entry, faults, sampling, space
from vgf_conformance.explore.__main__ import main as explore_main
from vgf_conformance.explore.__main__ import parse_budget
from vgf_conformance.explore.explorer import Explorer, Options
from vgf_conformance.explore.findings import case_entry, expectation
from vgf_conformance.explore.signature import signature, size_bucket
from vgf_conformance.explore.worker import DrawChild


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("argv, named", [
    (["--budget", "abc", "--seed", "1"], "--budget"),
    (["--budget", "0s", "--seed", "1"], "--budget"),
    (["--budget", "10m", "--seed", "1", "--family", "conv"], "--family"),
    (["--budget", "10m", "--seed", "1", "--resize-mode", "bicubic"], "--resize-mode"),
    (["--budget", "10m", "--seed", "x"], "--seed"),
    (["--budget", "10m", "--seed", "1", "--disable-workaround", "nope"], "--disable-workaround"),
    (["--budget", "10m", "--seed", "1", "--shrink-share", "2"], "--shrink-share"),
    (["--budget", "10m", "--seed", "1", "--draw-timeout", "-1"], "--draw-timeout"),
])
def test_bad_arguments_name_the_argument(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        explore_main(argv)
    assert exit_info.value.code == 2
    assert f"argument {named}" in capsys.readouterr().err


def test_a_bad_fault_spec_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.setenv(faults.ENV, "explode")
    with pytest.raises(SystemExit):
        explore_main(["--budget", "1m", "--seed", "1"])
    assert "unknown fault 'explode'" in capsys.readouterr().err


def test_budget_durations():
    assert parse_budget("10m") == 600
    assert parse_budget("90s") == 90
    assert parse_budget("1m30s") == 90
    assert parse_budget("1h") == 3600
    assert parse_budget("45") == 45


# ---------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------
def test_resize_sampling_against_pytorch():
    # ExecuTorch without the bilinear-scale-factor workaround: 7 -> 10 at factor 1.5
    # is lowered with the size ratio 10/7; PyTorch samples with 1.5.
    upstream = sampling.compare_axis("W", "bilinear", False, 7, 10, 1.5, {"scale": [20, 14], "offset": -3, "border": 3})
    assert upstream["pytorch"]["scale"] == [6, 4] and upstream["pytorch"]["offset"] == -1
    assert upstream["outputs_sampled_elsewhere"] == 9
    fixed = sampling.compare_axis("W", "bilinear", False, 7, 10, 1.5, {"scale": [6, 4], "offset": -1, "border": -1})
    assert fixed["outputs_sampled_elsewhere"] == 0
    # Nearest: the implied encoding picks floor(o / s) with round-half-up.
    implied = sampling.implied_attributes("nearest", False, 5, 8, 1.6)
    n, d = implied["scale"]
    assert (sampling.tosa_positions("nearest", 5, 8, n, d, implied["offset"])
            == sampling.torch_positions("nearest", False, 5, 8, 1.6))


def _row(check, max_lsb, problems, scale=1.0):
    return {"check": check, "output": 0, "ok": not problems, "problems": problems, "max_lsb": max_lsb,
            "int8_lsb_scale": scale, "bound": {"max_lsb": 1.0}, "mean_lsb": max_lsb, "bias_lsb": max_lsb,
            "worst_index": [0, 0, 0, 0], "worst_expected": 0.0, "worst_got": max_lsb / 127, "unit": 1 / 127}


def test_signatures_and_buckets():
    assert size_bucket(_row("vs_float", 1.8, ["max error 1.800 LSB > 1.5 LSB"])) == "<=2LSB"
    assert size_bucket(_row("vs_float", 63, ["max error 63.000 LSB > 2 LSB"])) == ">10LSB"
    assert size_bucket(_row("vs_float", 774, ["max error 774.000 LSB > 516 LSB"], scale=258.0)) == "2-10LSB"
    assert size_bucket(_row("vs_fake_quant", 1, ["bias +1.000 LSB beyond +-0.5 LSB"])) == "bias"
    failed = {"test": "test_numerics_vs_float", "result": "failed", "message": "..."}
    numerics = {"status": "done", "tests": [failed], "comparisons": [
        _row("vs_fake_quant", 0.0, []), _row("vs_float", 12.0, ["max error 12.000 LSB > 2 LSB"])]}
    assert signature(numerics) == "numerics:vs_float:>10LSB"
    stage = {"status": "done", "failure": {"stage": "lower", "error_type": "RuntimeError", "message": "x",
                                           "origin": "toolchain"},
             "tests": [{"test": "test_export", "result": "failed", "message": "..."}]}
    assert signature(stage) == "stage:lower:RuntimeError"
    wrapped = dict(stage, failure=dict(stage["failure"], error_type="Exception",
                                       root_cause={"type": "TosaValueError", "message": "RESIZE border_y ..."}))
    assert signature(wrapped) == "stage:lower:Exception<-TosaValueError"  # a failing pass, and why
    expected = dict(stage, tests=[{"test": "test_export", "result": "xfailed", "message": "..."}])
    assert signature(expected) is None  # the table expects it
    assert signature({"status": "timeout"}) == "hang"
    assert signature({"status": "crash", "exit": "SIGSEGV"}) == "crash:SIGSEGV"


def test_a_draw_builds_the_table_case_with_the_same_parameters():
    """The explorer's builder call for a table case's parameters describes that
    case exactly (the explorer's ids add -noise for uniform-noise inputs)."""
    from vgf_conformance.cases import CASES
    from vgf_conformance.explore.evaluate import table_twin

    params = {"mode": "bilinear-ac0", "spec": "factor", "in_hw": [10, 11], "factors": [[1, 3], [1, 3]],
              "recompute": False, "channels": 4, "batch": 1, "io": "int8", "kind": "image",
              "workarounds_off": ["bilinear-scale-factor"]}
    case = entry.build_case(entry.render("resize", params))
    table = CASES["without-bilinear-scale-factor/resize-bilinear-ac0-in10x11-s1_3-int8io"]
    assert {**case.describe(), "flow": table.flow} == table.describe()
    assert table_twin(case).id == table.id and table_twin(case).expect is not None
    grid = {"channels": 4, "mode": "bilinear", "padding": "zeros", "ac": False, "grid": "random", "io": "default",
            "out": [6, 10], "batch": 1, "workarounds_off": []}
    assert entry.build_case(entry.render("grid_sample", grid)).id == "grid-rgba-bilinear-zeros-ac0-random-int8io"


def test_case_entries_build_the_case_with_its_expectation():
    params = {"mode": "bilinear-ac0", "spec": "size", "in_hw": [1, 1], "size": [1, 6], "channels": 1,
              "batch": 1, "io": "int8", "kind": "smooth", "workarounds_off": []}
    code = entry.render("resize", params)
    outcome = {"family": "resize", "params": params, "code": code, "id": entry.build_case(code).id,
               "signature": "numerics:vs_fake_quant:2-10LSB",
               "tests": [{"test": "test_numerics_vs_fake_quant", "result": "failed", "message": "..."}],
               "comparisons": [_row("vs_fake_quant", 3.0, ["max error 3.000 LSB > 1 LSB"])]}
    text, _ = expectation(outcome, seed=7)
    assert 'checks=("vs_fake_quant",)' in text
    case = entry.build_case(case_entry(outcome, seed=7).rstrip(","))
    assert case.id == outcome["id"] and case.expect.checks == ("vs_fake_quant",)
    assert case.expect.stage == "run" and case.expect.lsb == (2.4, 3.75)  # the divergence pinned at its size


# ---------------------------------------------------------------------------
# The draw child: a hang or a crash costs one draw
# ---------------------------------------------------------------------------
FAKE_CHILD = textwrap.dedent("""
    import json, os, subprocess, sys, time
    answers = os.fdopen(int(os.environ["VGF_CHILD_ANSWER_FD"]), "w", buffering=1)
    answers.write(json.dumps({"ready": True}) + "\\n")
    for line in sys.stdin:
        request = json.loads(line)
        what = request["params"]["what"]
        if what == "hang":
            helper = subprocess.Popen(["sleep", "600"])  # a grandchild, as the converter would be
            with open(request["pidfile"], "w") as f:
                f.write(str(helper.pid))
            time.sleep(600)
        if what == "crash":
            os.abort()
        answers.write(json.dumps({"status": "done", "echo": what, "pid": os.getpid()}) + "\\n")
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split()[2] != "Z"


def test_the_draw_child_survives_hangs_and_crashes(tmp_path):
    script = tmp_path / "fake_child.py"
    script.write_text(FAKE_CHILD)
    child = DrawChild(tmp_path / "child.log", command=[sys.executable, str(script)])
    pidfile = tmp_path / "grandchild.pid"
    try:
        first = child.run({"params": {"what": "a"}}, timeout=20)
        assert first["echo"] == "a"
        started = time.monotonic()
        hang = child.run({"params": {"what": "hang"}, "pidfile": str(pidfile)}, timeout=2)
        assert hang["status"] == "timeout" and time.monotonic() - started < 10
        grandchild = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(grandchild), "the hung draw's process group was not killed"
        after = child.run({"params": {"what": "b"}}, timeout=20)
        assert after["echo"] == "b" and after["pid"] != first["pid"]  # a new child
        crash = child.run({"params": {"what": "crash"}}, timeout=20)
        assert crash["status"] == "crash" and crash["exit"] == "SIGABRT"
        assert child.run({"params": {"what": "c"}}, timeout=20)["echo"] == "c"
    finally:
        child.close()


# ---------------------------------------------------------------------------
# Grouping and shrinking (a stand-in child: no exports, seconds)
# ---------------------------------------------------------------------------
class RuleChild:
    """Answers draws by rule: a bilinear resize wider than 5 fails vs_fake_quant
    by 3 LSB; a nearest resize with 3 or more channels fails at stage lower."""

    starts = 1
    start_seconds = 0.0
    log_path = "(no child process)"

    def __init__(self):
        self.runs = 0

    def launch(self):
        pass

    def start(self):
        pass

    def close(self):
        pass

    def run(self, request, timeout):
        self.runs += 1
        params = request["params"]
        code = entry.render("resize", params)
        outcome = {"status": "done", "code": code, "id": entry.build_case(code).id, "seconds": 0.01,
                   "tests": [], "comparisons": []}
        width = space.output_hw(params)[1]
        if params["mode"].startswith("bilinear") and width > 5:
            outcome["tests"] = [{"test": "test_numerics_vs_fake_quant", "result": "failed", "message": "3 LSB"}]
            outcome["comparisons"] = [_row("vs_fake_quant", 3.0, ["max error 3.000 LSB > 1 LSB"])]
        elif params["mode"] == "nearest" and params["channels"] >= 3:
            outcome["failure"] = {"stage": "lower", "error_type": "RuntimeError", "message": "no", "origin": "toolchain"}
            outcome["tests"] = [{"test": "test_export", "result": "failed", "message": "no"}]
        return outcome


def test_failures_are_grouped_by_signature_and_each_group_shrunk(tmp_path):
    child = RuleChild()
    options = Options(families=("resize",), seed=3, budget=60, out=tmp_path / "out", max_draws=40,
                      shrink_share=0.5)
    summary = Explorer(options, progress=io.StringIO(), child=child).run()
    groups = {g["signature"]: g for g in summary["groups"]}
    assert set(groups) == {"numerics:vs_fake_quant:2-10LSB", "stage:lower:RuntimeError"}
    wide = groups["numerics:vs_fake_quant:2-10LSB"]
    assert wide["minimal_from"] == "hypothesis shrink" and wide["draws"] > 1
    minimal = wide["minimal"]["params"]
    # Shrunk to the boundary of the rule, and to the simplest everything else.
    assert space.output_hw(minimal)[1] == 6 and minimal["mode"] == "bilinear-ac0"
    assert minimal["channels"] == 1 and minimal["batch"] == 1 and minimal["io"] == "int8"
    nearest = groups["stage:lower:RuntimeError"]["minimal"]["params"]
    assert nearest["mode"] == "nearest" and nearest["channels"] == 3 and nearest["batch"] == 1
    written = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert [g["signature"] for g in written["groups"]] == [g["signature"] for g in summary["groups"]]
    assert "resize_case(" in written["groups"][0]["case_entry"]
    markdown = (tmp_path / "out" / "findings.md").read_text()
    assert "cases/min" in markdown and "numerics:vs_fake_quant:2-10LSB" in markdown
    # Every draw is logged, and a case is exported once per run.
    draws = [json.loads(line) for line in (tmp_path / "out" / "draws.jsonl").read_text().splitlines()]
    assert len(draws) == child.runs == summary["cases"]
    assert len({space.draw_key(d["family"], d["params"]) for d in draws}) == len(draws)


def test_the_same_seed_draws_the_same_cases(tmp_path):
    runs = []
    for name in ("a", "b"):
        options = Options(families=("resize",), seed=11, budget=60, out=tmp_path / name, max_draws=6)
        Explorer(options, progress=io.StringIO(), child=RuleChild()).run()
        draws = (tmp_path / name / "draws.jsonl").read_text().splitlines()
        runs.append([json.loads(d)["id"] for d in draws if json.loads(d)["phase"] == "explore"])
    assert runs[0] == runs[1] and len(runs[0]) == 6


# ---------------------------------------------------------------------------
# End to end: the real export flow, planted faults
# ---------------------------------------------------------------------------
def test_the_command_line_becomes_the_explorers_options(tmp_path, monkeypatch):
    """``python -m vgf_conformance explore ARGS`` runs an Explorer with these
    options (the end-to-end tests below make theirs in the test)."""
    from vgf_conformance.explore import explorer

    made = []

    class Recorded:
        error = None

        def __init__(self, options):
            made.append(options)

        def run(self):
            return {}

    monkeypatch.setattr(explorer, "Explorer", Recorded)
    argv = ["--out", str(tmp_path), "--family", "resize", "--resize-mode", "bilinear-ac0", "--seed", "15",
            "--budget", "1m30s", "--shrink-share", "0.6", "--draw-timeout", "7", "--max-draws", "3",
            "--max-in", "1", "--max-out", "8", "--max-channels", "2", "--max-batch", "1", "--max-grid", "5",
            "--disable-workaround", "bilinear-scale-factor", "--pte"]
    assert explore_main(argv) == 0
    (options,) = made
    assert options == Options(
        families=("resize",), seed=15, budget=90, out=tmp_path, shrink_share=0.6, draw_timeout=7, pte=True,
        workarounds_off=("bilinear-scale-factor",), max_draws=3, command=options.command,
        limits=space.Limits(resize_modes=("bilinear-ac0",), max_in=1, max_out=8, max_channels=2, max_batch=1,
                            max_grid=5))
    assert options.command.startswith("python -m vgf_conformance explore --out ")


def test_finds_and_shrinks_a_planted_numerics_fault(tmp_path, monkeypatch):
    """Every bilinear resize with an output wider than 3 is off by 3 LSB: the
    explorer (its real draw child exporting each draw) finds it, groups it,
    and shrinks it from the 8 wide output it first drew to one exactly 4
    wide (1, 2 and 3 wide pass). Inputs are 1x1 and single-channel, and one
    draw explores: the shrink is the subject (the stand-in child above
    shrinks the other parameters)."""
    monkeypatch.setenv(faults.ENV, "shift-bilinear-wide:3")
    progress = io.StringIO()
    options = Options(families=("resize",), seed=15, budget=100, out=tmp_path / "out", shrink_share=0.6,
                      max_draws=1, limits=space.Limits(resize_modes=("bilinear-ac0",), max_in=1, max_out=8,
                                                       max_channels=1, max_batch=1))
    explorer = Explorer(options, progress=progress)
    findings = explorer.run()
    assert explorer.error is None, explorer.error
    assert "cases tried" in progress.getvalue() and "left" in progress.getvalue()  # progress
    draws = [json.loads(line) for line in (tmp_path / "out" / "draws.jsonl").read_text().splitlines()]
    assert space.output_hw(draws[0]["params"])[1] == 8 and draws[0]["signature"], draws[0]["id"]  # shrunk from 8
    groups = {g["signature"]: g for g in findings["groups"]}
    group = groups["numerics:vs_fake_quant:2-10LSB"]
    minimal = group["minimal"]
    assert minimal["params"]["mode"] == "bilinear-ac0"
    assert space.output_hw(minimal["params"])[1] == 4, minimal["id"]
    assert group["minimal_from"] == "hypothesis shrink"
    worst = next(r for r in minimal["comparisons"] if r["check"] == "vs_fake_quant")
    assert worst["max_lsb"] == pytest.approx(3.0)
    assert 'checks=("vs_fake_quant"' in group["expectation"] and group["case_entry"].startswith("resize_case(")
    assert minimal["resize_ops"] and minimal["resize_ops"][0]["scale"]  # the lowered RESIZE's attributes
    assert findings["cases_per_minute"] > 0
    assert (tmp_path / "out" / "hypothesis" / "resize").is_dir()  # the example database
    assert (tmp_path / "out" / "findings.md").is_file()


class ShortHangs(DrawChild):
    """The real draw child, but the draws the planted fault hangs (``channels``
    == ``hangs``) wait 2 s for their answer instead of the explorer's draw
    timeout: a real draw takes 1-4 s (more on a loaded machine), so a draw
    timeout of 2 s would kill some of the others too. The explorer's timeout
    is still the one it hands the child (checked), and the test checks that
    each draw killed was one the fault hung. ``left_running``: the pids of
    children found still running after their draw timed out."""

    def __init__(self, log_path, hangs: int, draw_timeout: float):
        super().__init__(log_path)
        self.hangs, self.draw_timeout = hangs, draw_timeout
        self.made, self.left_running = [], []

    def _new(self):
        self.made.append(super()._new())
        return self.made[-1]

    def run(self, request, timeout):
        assert timeout == request["draw_timeout"] == self.draw_timeout
        outcome = super().run(request, 2.0 if request["params"]["channels"] == self.hangs else timeout)
        if outcome["status"] == "timeout":
            self.left_running += [c.pid for c in self.made if c.requests and c is not self.child and c.pid]
        return outcome


def test_a_hanging_draw_is_killed_and_recorded(tmp_path, monkeypatch):
    """Draws with 2 channels hang: each is killed (the draw child with it), is
    recorded as a timeout, and the run goes on in a new child; the hang group
    is shrunk to a draw that still hangs (1 channel, simpler, does not)."""
    monkeypatch.setenv(faults.ENV, "hang-channels:2")
    out = tmp_path / "out"
    options = Options(families=("resize",), seed=40, budget=100, out=out, shrink_share=0.3, draw_timeout=60,
                      max_draws=2, limits=space.Limits(resize_modes=("bilinear-ac0",), max_in=1, max_out=1,
                                                       max_channels=2, max_batch=1))
    child = ShortHangs(out / "draw-child.log", hangs=2, draw_timeout=options.draw_timeout)
    explorer = Explorer(options, progress=io.StringIO(), child=child)
    findings = explorer.run()
    assert explorer.error is None, explorer.error
    groups = {g["signature"]: g for g in findings["groups"]}
    assert groups["hang"]["minimal"]["params"]["channels"] == 2
    assert groups["hang"]["minimal"]["status"] == "timeout"
    draws = [json.loads(line) for line in (out / "draws.jsonl").read_text().splitlines()]
    statuses = [d["status"] for d in draws]
    first_hang = statuses.index("timeout")
    assert "no result within 2 s" in draws[first_hang]["message"]
    # Each timeout is a draw the planted fault hung, not one that was merely slow.
    assert (out / "draw-child.log").read_text().count(faults.HANG_LINE) == statuses.count("timeout")
    assert "done" in statuses[first_hang + 1:], statuses  # the run went on, in a new child
    assert findings["child_starts"] >= 2 and child.left_running == []
    assert findings["outcomes"].get("passed", 0) + findings["outcomes"].get("failed", 0) == len(draws)


def test_a_draw_from_a_file_is_checked_never_evaluated(tmp_path):
    """A draw pasted from docs/explorer/*.md (any pull request can edit them):
    a parameter outside the strategy's domain is an error naming it, and no
    text reaches Python's eval."""
    from vgf_conformance.explore import entry

    draw = {"mode": "bilinear-ac0", "spec": "factor", "in_hw": [8, 8], "factors": [[2, 1], [2, 1]],
            "recompute": False, "channels": 4, "batch": 1, "io": "int8", "kind": "smooth",
            "workarounds_off": []}
    assert entry.build_case(entry.render("resize", draw)).id.startswith("resize-bilinear-ac0-in8x8-s2")
    marker = tmp_path / "written"
    payload = f'__import__("pathlib").Path("{marker}").write_text("x")'
    for name, value in (("channels", payload), ("in_hw", [8, payload]), ("batch", True), ("kind", "x")):
        with pytest.raises(ValueError, match=f"params.{name}: expected"):
            entry.render("resize", {**draw, name: value})
    with pytest.raises(ValueError, match="params.extra: not a parameter"):
        entry.render("resize", {**draw, "extra": 1})
    with pytest.raises(ValueError, match="not part of a builder call"):
        entry.build_case(f"resize_case({payload})")
    with pytest.raises(ValueError, match="not a builder call"):
        entry.build_case(payload)
    assert not marker.exists()
