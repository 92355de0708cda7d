"""The upstream grid-sampler comparison (``python -m vgf_conformance native``).

One case through both paths (one export each, shared), its upstream program
run on Vulkan, and planted faults the comparison must report: Vulkan outputs
misreported (zeros, as the path-length hazard writes them), a second run that
differs from the first, a failed run counted as a run.
"""

from __future__ import annotations

import numpy as np
import pytest

from vgf_conformance.native import report
from vgf_conformance.native.report import Outcome, Verdict, classify, summarize

CASE = "grid-rgba-bilinear-zeros-ac0-rotation-int8io"


def _record(**upstream_run) -> dict:
    """A minimal record of a case that exported both ways."""
    upstream = {"exports": True, "converted": True, "sampler_delegates": ["VgfBackend"], "sampler_on_cpu": False,
                "tosa": "abc", "custom_ops": 1, "fused_flow_ops": 0}
    return {"case": "c", "project": {"exports": True, "max_lsb": {"vs_float": 1.0}},
            "with_glslc": dict(upstream), "without_glslc": dict(upstream),
            "run": {"runs": True, "stable": True, "max_lsb": {"vs_float": 1.2, "vs_own_fake_quant": 0.0},
                    **upstream_run}}


def _check_classify_and_count():
    same = classify(_record())
    assert (same["outcome"], same["verdict"], same["glslc"]) == ("ran", "same", "same")
    worse = classify(_record(max_lsb={"vs_float": 9.0}))
    assert worse["verdict"] == "worse"
    failed = classify(_record(runs=False, error="VulkanRunError: scenario runner exited with 1"))
    assert (failed["outcome"], failed["verdict"], failed["stage"]) == ("run-fail", "n/a", "run")
    unstable = classify(_record(stable=False))
    assert unstable["outcome"] == "unstable" and unstable["verdict"] == "n/a"
    counts = summarize([same, worse, failed, unstable])
    assert (counts["exports"], counts["converts"], counts["runs"], counts["runs_stable"]) == (4, 4, 3, 2)
    assert (counts["same"], counts["worse"], counts["better"]) == (1, 1, 0)
    assert len(report.routing_evidence([same, worse, failed, unstable])) == 3
    assert report.routing_evidence([same]) == []


def test_classify_and_count():
    _check_classify_and_count()


@pytest.mark.parametrize("fault", ["failed run counted as a run", "unstable run compared",
                                   "worse counted as same"])
def test_classify_and_count_catch_planted_faults(fault, monkeypatch):
    if fault == "failed run counted as a run":
        monkeypatch.setattr(Outcome, "runs", property(lambda self: self is not Outcome.CHILD_FAIL))
    elif fault == "unstable run compared":
        real = report.classify
        monkeypatch.setattr(report, "classify", lambda r: real({**r, "run": {**r["run"], "stable": True}}))
        monkeypatch.setitem(globals(), "classify", report.classify)
    else:
        monkeypatch.setattr(report, "SAME_BAND_LSB", 100.0)
    with pytest.raises(AssertionError):
        _check_classify_and_count()


def test_glslc_dependence_and_failures():
    record = _record()
    record["without_glslc"] = dict(record["without_glslc"], tosa="def", fused_flow_ops=0)
    assert classify(record)["glslc"] == "differs"
    record = _record()
    record["with_glslc"] = {"exports": False, "stage": "convert", "error": "RuntimeError: Vgf compiler failed"}
    row = classify(record)
    assert row["outcome"] == "convert-fail" and not Outcome(row["outcome"]).converts
    assert Outcome(row["outcome"]).exports
    child = classify({"case": "c", "status": "timeout", "message": "no result within 600 s"})
    assert child["outcome"] == Outcome.CHILD_FAIL.value and child["verdict"] == Verdict.NONE.value


def test_export_option_is_checked():
    import torch

    from vgf_conformance.cases.op_models import GridSample
    from vgf_export import export_model

    with pytest.raises(ValueError, match="grid_sampler_lowering must be one of"):
        export_model(GridSample(), (torch.rand(1, 4, 4, 4), torch.rand(1, 4, 4, 2)),
                     grid_sampler_lowering="native")


def test_cli_refuses_existing_results_and_unknown_cases(tmp_path, capsys):
    from vgf_conformance.native.__main__ import main

    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(SystemExit):
        main(["--cases", CASE, "--out", str(tmp_path)])
    assert "--overwrite" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="matches no case"):
        main(["--cases", "no-such-case-*", "--list"])


# ---------------------------------------------------------------------------
# One case end to end (Vulkan), and faults planted beneath the comparison
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    pytest.importorskip("executorch")
    from vgf_conformance.cases import CASES
    from vgf_conformance.native import evaluate
    from vgf_conformance.harness.reporting.skips import VULKAN_UNAVAILABLE
    from vgf_conformance.oracles.vulkan import VulkanUnavailable, vulkan_stack

    try:
        vulkan_stack()
    except VulkanUnavailable as error:
        pytest.skip(f"{VULKAN_UNAVAILABLE}: {error}")
    case = CASES[CASE]
    root = tmp_path_factory.mktemp("native")
    project = evaluate._export(case, root / "project", **case.export_kwargs())
    kwargs = {k: v for k, v in case.export_kwargs().items() if k not in evaluate.PROJECT_ONLY_OPTIONS}
    upstream = evaluate._export(case, root / "upstream", grid_sampler_lowering="upstream", **kwargs)
    return case, project, upstream, root


def _run(exports, name, monkeypatch=None, fault=None):
    from vgf_conformance.native import evaluate
    from vgf_conformance.oracles.numerics import measure

    case, project, upstream, root = exports
    if fault is not None:
        monkeypatch.setattr(evaluate, "run_scenario", fault(evaluate.run_scenario))
    run = evaluate._run_upstream(case, upstream, project, root / name)
    record = _record()
    record["run"] = run
    record["project"]["max_lsb"] = {"vs_float": max(c.max_lsb for c in measure(case, project).comparisons["vs_float"])}
    return run, classify(record)


def test_upstream_path_runs_on_vulkan(exports):
    case, project, upstream, _ = exports
    assert [d.backend for d in upstream.report.delegates] == ["VgfBackend"]
    assert any("grid_sampler" in op for op in upstream.report.delegates[0].ops)
    run, row = _run(exports, "clean")
    assert run["runs"], run
    if run["stable"]:  # the lowering agrees with its own fake-quantized program
        assert run["max_lsb"]["vs_own_fake_quant"] <= 1.0, run


def _zeros(real):
    """The runner's outputs overwritten with zeros after each run."""
    def run_scenario(scenario, *args, **kwargs):
        seconds = real(scenario, *args, **kwargs)
        for out in scenario.parent.glob("*.out.npy"):
            np.save(out, np.zeros_like(np.load(out)))
        return seconds
    return run_scenario


def _second_differs(real):
    calls = []

    def run_scenario(scenario, *args, **kwargs):
        seconds = real(scenario, *args, **kwargs)
        calls.append(scenario)
        if len(calls) == 2:
            for out in scenario.parent.glob("*.out.npy"):
                a = np.load(out)
                np.save(out, (a.astype(np.int16) + 1).clip(-127, 127).astype(a.dtype))
        return seconds
    return run_scenario


def test_fault_misreported_vulkan_outputs_are_worse(exports, monkeypatch):
    run, row = _run(exports, "zeros", monkeypatch, _zeros)
    assert run["stable"] and row["outcome"] == "ran"
    assert row["verdict"] == "worse" and row["upstream_vs_float"] > 50, row


def test_fault_a_second_run_that_differs_is_unstable(exports, monkeypatch):
    run, row = _run(exports, "differs", monkeypatch, _second_differs)
    assert run["runs"] and not run["stable"]
    assert row["outcome"] == "unstable" and row["verdict"] == "n/a"


# ---------------------------------------------------------------------------
# The ledger check of grid-sampler-routing (vgf_conformance/test_workarounds.py)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("upstream_is_fine", [False, True])
def test_routing_check_fails_when_the_upstream_path_catches_up(upstream_is_fine, monkeypatch, tmp_path):
    """The check passes while a probe's upstream path is worse, and fails
    (the workaround may go) once every probe runs repeatably and no worse."""
    import json
    import types

    from vgf_conformance import test_workarounds
    from vgf_conformance.native import __main__ as cli

    def fake_main(argv):
        out = __import__("pathlib").Path(argv[argv.index("--out") + 1])
        cases = argv[argv.index("--cases") + 1:argv.index("--out")]
        rows = [classify(dict(_record(max_lsb={"vs_float": 1.0 if upstream_is_fine else 6.0}), case=c))
                for c in cases]
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps({"rows": rows}))
        return 0

    monkeypatch.setattr(cli, "main", fake_main)
    request = types.SimpleNamespace(node=types.SimpleNamespace(user_properties=[]))
    if upstream_is_fine:
        with pytest.raises(AssertionError, match="may no longer be needed"):
            test_workarounds.test_grid_sampler_routing_still_needed(tmp_path, request)
    else:
        test_workarounds.test_grid_sampler_routing_still_needed(tmp_path, request)
    (_, verdict), = request.node.user_properties
    assert verdict["needed"] is not upstream_is_fine
