"""One draw, in the draw child: build the case, export it, check it as the suite does.

:func:`evaluate` builds the draw's case from its rendered builder call
(:mod:`vgf_conformance.explore.space`), exports it once with the suite's
:func:`~vgf_conformance.harness.execution.runner.run_case` into the draw's own artifacts
directory, and calls the suite's own checks on the run
(:mod:`vgf_conformance.checks`: export, delegation, one comparison per oracle;
the ``.pte`` with ``pte``; a Vulkan run against the TOSA-reference path with
``vulkan``), each reported under the name of the suite's test that calls it,
so a failure here is what the suite would report for that case. A draw whose
case equals a table case (same parameters) carries that case's
:class:`Expectation`, as the suite would.

It returns a JSON-native outcome: each test's result and message, the
failure's stage and error, every comparison's statistics against its bound,
the delegates, and for a resize the lowered RESIZE attributes against
PyTorch's sampling (:mod:`vgf_conformance.explore.sampling`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from fractions import Fraction
from pathlib import Path

from vgf_conformance.explore import entry, faults, reach, sampling, space

#: The delegates' TOSA reference runs get this share of the draw timeout, so
#: that a reference model that hangs fails its draw at stage run (as in the
#: suite) rather than costing the draw child.
TOSA_TIMEOUT_SHARE = 0.6


#: The exception chain of the last export failure (see :func:`_watch_export_causes`).
_LAST_CAUSES: list[dict] = []


def _cause_chain(error: BaseException, limit: int = 12) -> list[dict]:
    chain, seen = [], set()
    while error is not None and id(error) not in seen and len(chain) < limit:
        seen.add(id(error))
        lines = str(error).strip().splitlines()
        chain.append({"type": type(error).__name__, "message": (lines[0] if lines else "")[:400]})
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return chain


def _watch_export_causes() -> None:
    """Keep the cause chain of an export failure: the suite's StageFailure keeps
    the message of the stage's exception only, which for a failing pass is
    ExecuTorch's "An error occurred when running ... pass" and not its root
    cause (e.g. a TosaValueError naming the RESIZE attribute out of range)."""
    from vgf_conformance.harness.execution import runner
    from vgf_export import ExportStageError

    if getattr(runner.export_model, "_explore_watch", False):
        return
    real = runner.export_model

    def export_model(*args, **kwargs):
        try:
            return real(*args, **kwargs)
        except ExportStageError as error:
            _LAST_CAUSES[:] = _cause_chain(error.cause)
            raise

    export_model._explore_watch = True
    runner.export_model = export_model


@functools.lru_cache(maxsize=1)
def _recorder(directory: str | None) -> "reach.DrawRecorder | None":
    """The draw child's stack recorder (``explore --stack-target``), one for its life."""
    return reach.DrawRecorder(Path(directory)) if directory else None


@functools.lru_cache(maxsize=1)
def _table_by_description() -> dict:
    from vgf_conformance.cases import CASES

    table = {}
    for case in CASES.values():
        try:
            table.setdefault(_description_key(case), case)
        except Exception:  # noqa: BLE001 - a case that cannot describe itself is no twin
            continue
    return table


def _description_key(case) -> str:
    """A case's parameters, whatever flow runs it: a draw with a workaround off
    is the run of the table's case in the flow that turns it off."""
    import json

    return json.dumps({k: v for k, v in case.describe().items() if k != "flow"}, sort_keys=True, default=str)


def table_twin(case):
    """The table case with the same parameters (model, inputs, IO, options), or None."""
    return _table_by_description().get(_description_key(case))


def _test_result(check, run, name: str, *args) -> dict:
    """What the suite's test ``name`` would say of ``check`` (a function of
    :mod:`vgf_conformance.checks`) on ``run``."""
    from vgf_conformance.harness.execution.runner import ExpectedStageFailure

    try:
        check(run, *args)
    except ExpectedStageFailure as error:
        return {"test": name, "result": "xfailed", "message": str(error)}
    except AssertionError as error:  # CaseFailure is one
        return {"test": name, "result": "failed", "message": str(error)}
    expect = run.case.expect
    if expect is not None and expect.applies_to(name):
        return {"test": name, "result": "xpassed",
                "message": f"expected to fail ({expect.reason}) but passed"}
    return {"test": name, "result": "passed", "message": None}


def _comparisons(case, numerics) -> list[dict]:
    from vgf_conformance.oracles.references import ORACLES

    rows = []
    for name in ORACLES:
        for i, comparison in enumerate(numerics.comparisons[name]):
            tolerance = case.get_tolerance(i)
            bound = tolerance.bounds[name]
            problems = bound.problems(comparison)
            # An int16 output of an int8 program: its bound is scaled x258 (int8-internal).
            scale = 1.0
            if "int8-internal" in case.all_traits and case.output_qspecs[i] == "int16":
                from vgf_conformance.cases.tolerances import INT8_STEP_IN_INT16

                scale = INT8_STEP_IN_INT16
            rows.append({
                "check": name, "output": i, "ok": not problems, "problems": problems,
                "max_lsb": round(comparison.max_lsb, 4), "mean_lsb": round(comparison.mean_lsb, 4),
                "bias_lsb": round(comparison.bias_lsb, 4), "p99_lsb": round(comparison.p99_lsb, 4),
                "worst_index": list(comparison.worst_index), "worst_expected": comparison.worst_expected,
                "worst_got": comparison.worst_got, "unit": comparison.unit, "int8_lsb_scale": scale,
                "bound": {k: v for k, v in dataclasses.asdict(bound).items() if v not in (None, 0.0)},
                "describe": comparison.describe(),
            })
    return rows


def _resize_ops(result) -> list[dict]:
    from vgf_conformance.tosa.reader import summarize_tosa

    ops = []
    for f in result.artifacts.delegate_files("tosa"):
        summary = summarize_tosa(f.path.read_bytes())
        for op in summary["operators"]:
            if op["op"] != "RESIZE":
                continue
            a = op["attrs"]
            ops.append({"delegate": f.index, "index": op["index"], "mode": a.get("mode"),
                        "scale": a.get("scale"), "offset": a.get("offset"), "border": a.get("border"),
                        "in": op["inputs"][0]["shape"] if op["inputs"] else None,
                        "out": op["outputs"][0]["shape"], "spec_errors": a.get("spec_errors", []),
                        "brief": op["brief"]})
    return ops


def resize_sampling(params: dict, ops: list[dict]) -> list[dict] | None:
    """Per axis, the RESIZE's (or the chain of RESIZE stages') sampling
    against PyTorch's; None when the RESIZEs are not one chain from the
    model's input size to its output size."""
    in_hw, out_hw = list(params["in_hw"]), list(space.output_hw(params))
    if not ops or any(not op["scale"] or len(op["scale"]) != 4 or op["in"] is None for op in ops):
        return None
    chain = sorted(ops, key=lambda op: (op["delegate"], op["index"]))
    sizes = [list(op["in"][1:3]) for op in chain] + [list(chain[-1]["out"][1:3])]
    if sizes[0] != in_hw or sizes[-1] != out_hw or any(list(a["out"][1:3]) != list(b["in"][1:3])
                                                      for a, b in zip(chain, chain[1:])):
        return None
    mode = "nearest" if params["mode"] == "nearest" else "bilinear"
    align_corners = params["mode"] == "bilinear-ac1"
    scales = [None, None]
    if params["spec"] != "size" and not params["recompute"]:
        scales = [float(Fraction(*f)) for f in params["factors"]]
    return [sampling.compare_axis(axis, mode, align_corners, i, o, s,
                                  [{"scale": op["scale"][2 * k:2 * k + 2], "offset": op["offset"][k],
                                    "border": op["border"][k], "in": op["in"][1 + k]} for op in chain])
            for k, (axis, i, o, s) in enumerate(zip("HW", in_hw, out_hw, scales))]


def _vulkan(run, workdir: Path) -> dict:
    from vgf_conformance.oracles.vulkan import VulkanRunError, VulkanUnavailable, run_case_on_vulkan, vulkan_stack

    try:
        vulkan_stack()
    except VulkanUnavailable as error:
        return {"test": "test_vulkan", "result": "failed", "message": f"the Vulkan stack is missing: {error}"}
    if not run.numerics.program.calls:
        return {"test": "test_vulkan", "result": "skipped", "message": "nothing delegated"}
    try:
        check = run_case_on_vulkan(run.numerics, run.result, workdir)
    except VulkanRunError as error:
        return {"test": "test_vulkan", "result": "failed", "message": f"Vulkan run failed\n{error}",
                "kind": "error"}
    from vgf_conformance.cases.tolerances import VULKAN_NEAREST_TIES

    problems = check.problems(run.case.get_tolerance().vulkan_float_lsb, VULKAN_NEAREST_TIES)
    return {"test": "test_vulkan", "result": "failed" if problems else "passed",
            "message": "\n".join(problems) or None, "kind": "mismatch", "seconds": round(check.seconds, 3),
            "report": check.report_dict()}


def evaluate(request: dict) -> dict:
    """Run one draw: ``request`` = {family, params, artifacts, vulkan, pte, draw_timeout}."""
    from vgf_conformance import checks
    from vgf_conformance.harness.execution.runner import run_case
    from vgf_conformance.oracles import delegates
    from vgf_conformance.oracles.references import ORACLES

    started = time.perf_counter()
    family, params = request["family"], request["params"]
    if request.get("draw_timeout"):
        delegates.TOSA_TIMEOUT = max(5.0, TOSA_TIMEOUT_SHARE * float(request["draw_timeout"]))
    code = entry.render(family, params)
    case = entry.build_case(code)
    twin = table_twin(case)
    if twin is not None and twin.expect is not None:
        case = dataclasses.replace(case, expect=twin.expect)
    outcome = {
        "status": "done", "id": case.id, "code": code, "traits": sorted(case.all_traits),
        "stays_on_cpu": case.stays_on_cpu, "table_twin": twin.id if twin is not None else None,
        "expect": dataclasses.asdict(case.expect) if case.expect else None,
    }
    faults.before_export(family, params)
    artifacts = Path(request["artifacts"])
    _watch_export_causes()
    _LAST_CAUSES.clear()
    recorder = _recorder(request.get(reach.REQUEST_FIELD))
    with faults.during_run(family, params):
        run = run_case(case, artifacts, around_export=recorder.context if recorder else None)
    if recorder is not None:
        outcome[reach.REQUEST_FIELD] = recorder.take(case.id)
    outcome["artifacts"] = str(run.artifacts)
    outcome["stage"] = run.stage
    outcome["failure"] = dataclasses.asdict(run.failure) if run.failure else None
    if run.failure is not None and _LAST_CAUSES:
        outcome["failure"]["causes"] = list(_LAST_CAUSES)
        outcome["failure"]["root_cause"] = _LAST_CAUSES[-1]
    outcome["seconds_by_stage"] = {k: round(v, 3) for k, v in run.seconds.items()}
    tests = [_test_result(checks.export, run, "test_export")]
    if run.result is not None:
        report = run.result.report
        outcome["delegates"] = [{"backend": d.backend, "ops": d.ops} for d in report.delegates]
        outcome["cpu_ops"] = list(report.cpu_ops)
        tests.append(_test_result(checks.delegation, run, "test_delegation"))
        if family == "resize":
            try:
                ops = _resize_ops(run.result)
                outcome["resize_ops"] = ops
                outcome["sampling"] = resize_sampling(params, ops)
            except Exception as error:  # noqa: BLE001 - the summary is extra, never the verdict
                outcome["resize_ops_error"] = f"{type(error).__name__}: {error}"
    if run.numerics is not None:
        outcome["comparisons"] = _comparisons(case, run.numerics)
        for oracle in ORACLES.values():
            tests.append(_test_result(checks.outputs, run, oracle.test_name, oracle))
        if request.get("pte"):
            tests.append(_test_result(checks.pte, run, "test_pte"))
        if request.get("vulkan"):
            tests.append(_vulkan(run, artifacts / "vulkan"))
    elif run.result is not None:  # the run stage failed: the numerics tests fail with it
        for oracle in ORACLES.values():
            tests.append(_test_result(checks.outputs, run, oracle.test_name, oracle))
    outcome["tests"] = tests
    outcome["seconds"] = round(time.perf_counter() - started, 3)
    return outcome


def warm_up() -> None:
    """Import what every draw needs, once per child."""
    from vgf_conformance import checks  # noqa: F401
    from vgf_conformance.cases import CASES  # noqa: F401
    from vgf_conformance.harness.execution import runner  # noqa: F401

    _table_by_description()
    _watch_export_causes()
