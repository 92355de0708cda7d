"""The checks of a case: plain functions over its run, no pytest needed.

Each check takes the case's :class:`~vgf_conformance.harness.execution.runner.CaseRun`
and a ``record`` callable (``record(**fields)``: what the report keeps of the
check; the suite passes the plugin's recorder, anyone else may ignore it),
returns when the check passes, and raises when it does not:

* :class:`~vgf_conformance.harness.execution.runner.CaseFailure` (an ``AssertionError``)
  for a failure, naming the case, the stage and what changed;
* :class:`~vgf_conformance.harness.execution.runner.ExpectedStageFailure` for a failure
  the case's :class:`~vgf_conformance.cases.Expectation` excuses;
* :class:`NotApplicable` when there is nothing to check (a skip in pytest).

``vgf_conformance/test_cases.py`` parametrizes them over the table; the
explorer (:mod:`vgf_conformance.explore.evaluate`) calls them on its draws.
Adding a check is one function here and one test there.
"""

from __future__ import annotations

import json
import re
from typing import Callable

import torch

from vgf_conformance.cases.tolerances import VULKAN_NEAREST_TIES
from vgf_conformance.goldens import describe_changes, golden_path
from vgf_conformance.goldens.statistics import statistics_drift
from vgf_conformance.harness.reporting.errormaps import write_case_maps
from vgf_conformance.harness.execution.runner import CaseFailure, CaseRun
from vgf_conformance.oracles.compare import compare, dequantize
from vgf_conformance.oracles.localize import describe_first, localize_run
from vgf_conformance.oracles.lowered import output_quant, quantize_inputs
from vgf_conformance.oracles.pte import PteRuntimeError, execute_program, load_pte_meta, run_cpu_program
from vgf_conformance.oracles.pte.execute import output_differences
from vgf_conformance.oracles.references import Oracle
from vgf_export.qdq import is_qdq_name

Record = Callable[..., None]

#: The comparison whose unexpected failure is localized to a TOSA op: the
#: lowered program against the PT2E program it was lowered from.
LOCALIZED = "vs_fake_quant"


class NotApplicable(Exception):
    """Nothing to check for this case; the message says why."""


def _ignore(**fields) -> None:
    return None


def unbuilt_sections(case, golden: dict) -> dict[str, str]:
    """The sections of a new golden that record a failure instead of their
    content (``{"error": ...}``, itself or in a delegate's entry: a tool that
    timed out, a run stage that failed), section -> the error, but a run
    failure the case expects (the golden records what it expects)."""
    found = {}
    for name, content in golden.items():
        entries = content if isinstance(content, list) else [content]
        errors = [entry["error"] for entry in entries if isinstance(entry, dict) and "error" in entry]
        if not errors:
            continue
        expect = case.expect
        if (name == "numerics" and expect is not None and expect.stage == "run" and not expect.checks
                and re.search(expect.match, str(errors[0]))):
            continue
        found[name] = str(errors[0])
    return found


def built_golden(case_run: CaseRun) -> dict:
    """The case's new golden, to compare with the stored one; a failure when
    a section could not be built: a failure is never written as a golden, so
    ``--snapshot-update`` leaves the stored golden as it is."""
    golden = case_run.require_golden()
    unbuilt = unbuilt_sections(case_run.case, golden)
    if unbuilt:
        raise CaseFailure(
            f"golden of {case_run.case.id}: section(s) {sorted(unbuilt)} could not be built, so the golden is "
            f"not compared and never written (the stored {golden_path(case_run.case.id).name} is kept as it "
            "is):\n" + "\n".join(f"  {name}: {error}" for name, error in sorted(unbuilt.items())))
    return golden


def export(case_run: CaseRun, record: Record = _ignore) -> None:
    """The export reaches the end of the flow (or fails as expected)."""
    stored = golden_path(case_run.case.id)
    changes = []
    if case_run.result is None and stored.exists():
        changes = describe_changes(stored.read_text(), None, case_run.stage)
    record(changes=changes)
    case_run.require_export()


def statistics(case_run: CaseRun, record: Record = _ignore, *, accept: str = "", updating: bool = False) -> None:
    """The error statistics of every output against each oracle (bias, mean,
    p99 and max error in LSB, SNR) stay within their measured cross-machine
    bands of the golden's (``updating``: the golden is being rewritten, so
    its statistics are accepted with it)."""
    current = case_run.require_golden()
    stored = golden_path(case_run.case.id)
    if not stored.exists():
        raise NotApplicable(f"no golden for {case_run.case.id}: test_golden fails for it")
    drifts, compared = statistics_drift(json.loads(stored.read_text()).get("numerics"), current.get("numerics"))
    record()
    if not compared:
        if case_run.numerics is None:  # the run failed: as the case expects (xfail) or not, as the numerics tests say
            case_run.require_numerics()
        raise NotApplicable(f"{case_run.case.id}: no error statistics to compare: "
                            "the golden check compares the numerics section")
    if drifts and not updating:
        raise AssertionError(
            f"case {case_run.case.id}: the error statistics moved against the golden ({stored})\n"
            + "\n".join(d.describe() for d in drifts)
            + (f"\nIf the change is intended, accept it with:\n  {accept}" if accept else ""))


def delegation(case_run: CaseRun, record: Record = _ignore) -> None:
    """The case is delegated, or stays on the CPU, as it declares."""
    result = case_run.require_export()
    record()
    case = case_run.case
    compute_on_cpu = [op for op in result.report.cpu_ops if not is_qdq_name(op)]
    if case.stays_on_cpu:
        assert not result.report.delegates, (
            f"case {case.id}: declared to stay on the CPU ({case.stays_on_cpu}), but it is now "
            f"delegated: {[d.backend for d in result.report.delegates]}. If intended, remove "
            "its stays_on_cpu declaration in the case table.")
        return
    if case.cpu_ops:
        assert result.report.delegates and set(compute_on_cpu) == set(case.cpu_ops), (
            f"case {case.id}: declared partly delegated with {sorted(case.cpu_ops)} on the CPU "
            f"({case.cpu_ops_reason}), but "
            + ("nothing was delegated" if not result.report.delegates
               else f"the CPU ops are {sorted(set(compute_on_cpu))}")
            + ". If this is the new behaviour, update its cpu_ops declaration in the case table.")
        return
    assert result.report.delegates and not compute_on_cpu, (
        f"case {case.id}: expected to be delegated, but "
        + ("nothing was delegated" if not result.report.delegates else "ops stayed on the CPU")
        + f" (CPU ops: {sorted(set(compute_on_cpu))}). If this is the new behaviour, declare "
        "stays_on_cpu with the reason in the case table.")


def outputs(case_run: CaseRun, oracle: Oracle, record: Record = _ignore) -> None:
    """The lowered program agrees with ``oracle`` within the case's bound; a
    new failure against fake-quant is localized to the TOSA op it starts at."""
    numerics = case_run.require_numerics()
    record()
    failures = [
        f"output {i}: {message}"
        for i, comparison in enumerate(numerics.comparisons[oracle.name])
        if (message := case_run.case.get_tolerance(i).check(comparison, oracle.name))
    ]
    if oracle.checks_code_range:
        failures += [f"output {i}: {oracle.name}: {outside.describe()}"
                     for i, outside in enumerate(numerics.outside_range) if outside]
    if failures:
        record(error_maps=write_case_maps(case_run))  # where it differs
        if oracle.name == LOCALIZED and case_run.result.quantized_module is not None \
                and case_run.unexcused(oracle.name, failures):  # a new failure: which op makes it
            localization = localize_run(case_run.case, case_run.guard)
            record(localization=localization)
            failures.append(f"where: {describe_first(localization)}")
        case_run.fail_check(oracle.name, f"the lowered program (TOSA reference) against {oracle.what}",
                            failures)


def pte(case_run: CaseRun, record: Record = _ignore) -> None:
    """The shipped program.pte loads in ExecuTorch's runtime (a child process),
    declares the inputs and outputs (sizes, dtypes) the exported program has,
    and, where every op is on the CPU, runs there within the case's float bound;
    a delegated program, executed from its serialized plan with the delegates'
    references, equals the lowered program bit for bit."""
    numerics = case_run.require_numerics()
    result = case_run.result
    case = case_run.case
    meta = load_pte_meta(result.artifacts.program)
    graph = result.edge_program.exported_program().graph_module.graph
    user = set(result.edge_program.exported_program().graph_signature.user_inputs)
    declared = {"input": [_meta_text(m) for m in meta.inputs], "output": [_meta_text(m) for m in meta.outputs]}
    exported = {
        "input": [_tensor_text(n.meta["val"]) for n in graph.nodes if n.op == "placeholder" and n.name in user],
        "output": [_tensor_text(n.meta["val"]) for n in graph.output_node().args[0]],
    }
    record(pte={"delegates": list(meta.delegates), "operators": list(meta.operators),
                "tosa_specs": list(meta.tosa_specs)})  # TOSA version+profile lowered for
    problems = []  # through fail_check: a known divergence can be declared
    if declared != exported:
        problems.append(f"program.pte declares {declared}, but the exported program (what the "
                        f"delegates read and write) has {exported} ({result.artifacts.program})")
    inputs = quantize_inputs(case.make_inputs(), result.edge_program, result.io_quant_params)
    if meta.delegates:  # the installed runtime has no VGF backend: the serialized plan, executed
        try:
            executed = execute_program(result.artifacts.program, [x.numpy() for x in inputs],
                                       result.artifacts.root)
            differences = output_differences(executed, [x.numpy() for x in numerics.program.outputs])
        except PteRuntimeError as error:
            differences = [str(error)]
        if differences:
            problems.append("executed from its serialized plan (values, instructions, delegate "
                            "payloads), program.pte differs from the lowered program:\n"
                            + "\n".join(differences) + f"\n({result.artifacts.program})")
    if problems:
        case_run.fail_check("pte", "the shipped program.pte", problems)
    if meta.delegates:
        return
    try:
        raw = run_cpu_program(result.artifacts.program, [x.numpy() for x in inputs])
    except PteRuntimeError as error:
        case_run.fail_check("pte", "program.pte on the ExecuTorch runtime (CPU only)", str(error))
    params = output_quant(result.edge_program, result.io_quant_params)
    failures = [
        f"output {i}: {message}"
        for i, (q, p, reference, unit) in enumerate(zip(raw, params, numerics.reference_outputs, numerics.units))
        if (message := case.get_tolerance(i).check(
            compare(reference, dequantize(torch.from_numpy(q), p), unit), "vs_float"))
    ]
    if failures:
        case_run.fail_check("pte", "program.pte on the ExecuTorch runtime (CPU only)", failures)


def _meta_text(meta) -> str:
    return f"{meta.dtype}[{'x'.join(map(str, meta.sizes))}] dim_order={list(meta.dim_order)}"


def _tensor_text(val) -> str:
    return (f"{str(val.dtype).removeprefix('torch.')}[{'x'.join(str(int(s)) for s in val.shape)}] "
            f"dim_order={list(val.dim_order())}")


def vulkan(case_run: CaseRun, run_on_vulkan: Callable, record: Record = _ignore) -> None:
    """The program end to end on Vulkan (scenario runner + ML emulation layer
    on llvmpipe) equals the TOSA-reference path: integer tensors bit-exact,
    float tensors within the case's float bound. ``run_on_vulkan(accept)``
    runs it (the suite: in a batch of cases, a failure confirmed by a run
    alone) and returns the :class:`~vgf_conformance.oracles.vulkan.VulkanCheck`;
    the Vulkan stack is the caller's to require."""
    from vgf_conformance.oracles.vulkan import VulkanRunError, rerun_command

    numerics = case_run.require_numerics()
    if not numerics.program.calls:
        assert case_run.case.stays_on_cpu, (
            f"{case_run.case.id}: nothing was delegated, so nothing runs on Vulkan "
            "(test_delegation says why this is unexpected)")
        raise NotApplicable(f"{case_run.case.id}: stays on the CPU as declared "
                            f"({case_run.case.stays_on_cpu}): nothing to run on Vulkan")
    float_bound = case_run.case.get_tolerance().vulkan_float_lsb
    try:
        check = run_on_vulkan(lambda c: not c.problems(float_bound, VULKAN_NEAREST_TIES))
    except VulkanRunError as error:
        record(numerics={"vulkan": {"error": str(error).splitlines()[0]}})
        case_run.fail_check("vulkan", "the program on Vulkan: the run failed", str(error))
    case_run.seconds["vulkan"] = check.seconds
    case_run.vulkan_batch = check.batch
    record(numerics={"vulkan": check.report_dict()})
    problems = check.problems(float_bound, VULKAN_NEAREST_TIES)
    if problems:
        rerun = f"\nrerun on the runner: {rerun_command(check.scenario)}"
        case_run.fail_check("vulkan", "the program on Vulkan differs from the TOSA-reference path",
                            [*problems[:-1], problems[-1] + rerun])
