"""The conformance suite: every case of the table, stage by stage.

Each test reads the case's single session-scoped run (see conftest.py) and
records what the report needs in ``user_properties``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vgf_conformance.goldens import changed_sections, describe_changes, golden_path
from vgf_conformance.goldens.compliance import describe as describe_verdict
from vgf_conformance.goldens.statistics import statistics_drift
from vgf_conformance.goldens.store import verdict as golden_verdict
from vgf_conformance.oracles.compare import compare, dequantize
from vgf_conformance.oracles.localize import describe_first, localize_run
from vgf_conformance.oracles.lowered import output_quant, quantize_inputs
from vgf_conformance.oracles.references import ORACLES
from vgf_conformance.harness.plugin import accept_command, record_case
from vgf_conformance.harness.errormaps import write_case_maps
from vgf_conformance.harness.skips import VULKAN_UNAVAILABLE
from vgf_conformance.harness.html import golden_diff
from vgf_conformance.oracles.pte import PteRuntimeError, execute_program, load_pte_meta, run_cpu_program
from vgf_conformance.oracles.pte.execute import output_differences
from vgf_conformance.oracles.vulkan import (
    VulkanRunError,
    VulkanUnavailable,
    rerun_command,
    vulkan_stack,
)
from vgf_export.qdq import is_qdq_name


def _stored_golden(case_run) -> Path:
    return golden_path(case_run.case.id)


def test_export(case_run, request):
    """The export reaches the end of the flow (or fails as expected)."""
    stored = _stored_golden(case_run)
    changes = []
    if case_run.result is None and stored.exists():
        changes = describe_changes(stored.read_text(), None, case_run.stage)
    record_case(request, case_run, changes=changes)
    case_run.require_export()


def test_golden(case_run, golden, request):
    """Graph structure, delegation, quantization, TOSA and VGF match the golden."""
    current = case_run.require_golden()
    stored = _stored_golden(case_run)
    stored_text = stored.read_text() if stored.exists() else None
    changed = changed_sections(stored_text, current)
    record_case(request, case_run, golden_changed=changed, changes=describe_changes(stored_text, current),
                golden_diff=golden_diff(stored_text, current) if changed else [],
                **({"error_maps": write_case_maps(case_run)} if "numerics" in changed else {}))
    assert golden == current, (
        (describe_verdict(case_run.case.id, golden_verdict(stored_text, current), changed) if stored_text
         else f"no golden for {case_run.case.id}") + f"\n({stored})\n"
        "If the change is intended, accept it with:\n"
        f"  {accept_command(request.config, case_run.case.id)}"
    )


def test_statistics(case_run, request):
    """The error statistics of every output against each oracle (bias, mean,
    p99 and max error in LSB, SNR) stay within their measured cross-machine
    bands of the golden's: a drift no per-element bound sees."""
    current = case_run.require_golden()
    stored = _stored_golden(case_run)
    if not stored.exists():
        pytest.skip(f"no golden for {case_run.case.id}: test_golden fails for it")
    drifts, compared = statistics_drift(json.loads(stored.read_text()).get("numerics"), current.get("numerics"))
    record_case(request, case_run)
    if not compared:
        error = str(current.get("numerics", {}).get("error", "")).splitlines()[:1]
        pytest.skip(f"{case_run.case.id}: no error statistics to compare: "
                    + (f"the run failed ({error[0]}), as the numerics tests say" if error
                       else "the golden check compares the numerics section"))
    if drifts and not request.config.getoption("--snapshot-update"):
        raise AssertionError(
            f"case {case_run.case.id}: the error statistics moved against the golden ({stored})\n"
            + "\n".join(d.describe() for d in drifts)
            + f"\nIf the change is intended, accept it with:\n  {accept_command(request.config, case_run.case.id)}")


def test_delegation(case_run, request):
    """The case is delegated, or stays on the CPU, as it declares."""
    result = case_run.require_export()
    record_case(request, case_run)
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


#: The comparison whose unexpected failure is localized to a TOSA op: the
#: lowered program against the PT2E program it was lowered from.
LOCALIZED = "vs_fake_quant"


def _check_outputs(case_run, request, oracle) -> None:
    numerics = case_run.require_numerics()
    record_case(request, case_run)
    failures = [
        f"output {i}: {message}"
        for i, comparison in enumerate(numerics.comparisons[oracle.name])
        if (message := case_run.case.get_tolerance(i).check(comparison, oracle.name))
    ]
    if oracle.checks_code_range:
        failures += [f"output {i}: {oracle.name}: {outside.describe()}"
                     for i, outside in enumerate(numerics.outside_range) if outside]
    if failures:
        record_case(request, case_run, error_maps=write_case_maps(case_run))  # where it differs
        if oracle.name == LOCALIZED and case_run.result.quantized_module is not None \
                and case_run.unexcused(oracle.name, failures):  # a new failure: which op makes it
            localization = localize_run(case_run.case)
            record_case(request, case_run, localization=localization)
            failures.append(f"where: {describe_first(localization)}")
        case_run.fail_check(oracle.name, f"the lowered program (TOSA reference) against {oracle.what}",
                            failures)


def _numerics_test(oracle):
    def test(case_run, request):
        _check_outputs(case_run, request, oracle)

    test.__name__ = test.__qualname__ = oracle.test_name
    test.__doc__ = f"The lowered program agrees with {oracle.what}, within the case's bound."
    return test


def numerics_tests() -> dict:
    """One test per oracle (``test_numerics_vs_fake_quant``, ...), from its registry entry."""
    return {oracle.test_name: _numerics_test(oracle) for oracle in ORACLES.values()}


globals().update(numerics_tests())


def test_pte(case_run, request):
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
    record_case(request, case_run, pte={"delegates": list(meta.delegates), "operators": list(meta.operators),
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


@pytest.mark.vulkan
def test_vulkan(case_run, vgf_batches, request):
    """The program end to end on Vulkan (scenario runner + ML emulation layer on
    llvmpipe) equals the TOSA-reference path: integer tensors bit-exact, float
    tensors within the case's float bound. Cases of a batch share a runner
    process; a failure is confirmed by a run alone."""
    numerics = case_run.require_numerics()
    try:
        vulkan_stack()
    except VulkanUnavailable as error:
        if request.config.getoption("--vgf-require-vulkan"):
            raise AssertionError(f"the Vulkan stack is required (--vgf-require-vulkan) but "
                                 f"missing: {error}") from None
        pytest.skip(f"{VULKAN_UNAVAILABLE}: {error}")
    if not numerics.program.calls:
        assert case_run.case.stays_on_cpu, (
            f"{case_run.case.id}: nothing was delegated, so nothing runs on Vulkan "
            "(test_delegation says why this is unexpected)")
        pytest.skip(f"{case_run.case.id}: stays on the CPU as declared "
                    f"({case_run.case.stays_on_cpu}): nothing to run on Vulkan")
    float_bound = case_run.case.get_tolerance().vulkan_float_lsb
    try:
        check = vgf_batches.vulkan_check(case_run.case.id,
                                         accept=lambda c: not c.problems(float_bound))
    except VulkanRunError as error:
        record_case(request, case_run, numerics={"vulkan": {"error": str(error).splitlines()[0]}})
        case_run.fail_check("vulkan", "the program on Vulkan: the run failed", str(error))
    case_run.seconds["vulkan"] = check.seconds
    case_run.vulkan_batch = check.batch
    record_case(request, case_run, numerics={"vulkan": check.report_dict()})
    problems = check.problems(float_bound)
    if problems:
        rerun = f"\nrerun on the runner: {rerun_command(check.scenario)}"
        case_run.fail_check("vulkan", "the program on Vulkan differs from the TOSA-reference path",
                            [*problems[:-1], problems[-1] + rerun])
