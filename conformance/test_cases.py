"""The conformance suite: every case of the table, stage by stage.

Each test reads the case's single session-scoped run (see conftest.py) and
records what the report needs in ``user_properties``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.golden import GOLDEN_ROOT, changed_sections, describe_changes
from conformance.plugin import record_case
from conformance.vulkan import (
    VulkanRunError,
    VulkanUnavailable,
    rerun_command,
    vulkan_stack,
)


def _stored_golden(case_run) -> Path:
    return GOLDEN_ROOT / Path(__file__).stem / f"{case_run.case.id}.json"


def test_export(case_run, request):
    """The export reaches the end of the flow (or fails as expected)."""
    stored = _stored_golden(case_run)
    changes = []
    if case_run.golden is None and stored.exists():
        changes = describe_changes(stored.read_text(), None, case_run.stage)
    record_case(request, case_run, changes=changes)
    case_run.require_export()


def test_golden(case_run, golden, request):
    """Graph structure, delegation, quantization, TOSA and VGF match the golden."""
    case_run.require_export()
    stored = _stored_golden(case_run)
    stored_text = stored.read_text() if stored.exists() else None
    changed = changed_sections(stored_text, case_run.golden)
    record_case(request, case_run, golden_changed=changed,
                changes=describe_changes(stored_text, case_run.golden))
    assert golden == case_run.golden, (
        f"golden of {case_run.case.id} changed in sections {changed} ({stored}).\n"
        "If the change is intended, accept it with:\n"
        f"  scripts/conformance.sh -k '{case_run.case.id}' --snapshot-update"
    )


def _check_outputs(case_run, request, what: str) -> None:
    numerics = case_run.require_numerics()
    record_case(request, case_run)
    failures = [
        f"output {i}: {message}"
        for i, comparison in enumerate(getattr(numerics, what))
        if (message := case_run.case.get_tolerance(i).check(comparison, what))
    ]
    assert not failures, (
        f"case {case_run.case.id}: lowered program (TOSA reference) "
        f"{what.replace('_', ' ')}\n" + "\n".join(failures)
        + f"\nartifacts: {case_run.artifacts}"
    )


def test_numerics_vs_fake_quant(case_run, request):
    """The lowered program agrees with the PT2E fake-quantized program."""
    _check_outputs(case_run, request, "vs_fake_quant")


def test_numerics_vs_float(case_run, request):
    """The lowered program stays within the stated bound of the float model."""
    _check_outputs(case_run, request, "vs_float")


def _vulkan_problems(case_run, check) -> list[str]:
    tolerance = case_run.case.get_tolerance()
    problems = []
    if check.max_lsb_vs_tosa > tolerance.vulkan_vs_tosa_lsb:
        problems.append(
            f"Vulkan vs TOSA-reference path: max {check.max_lsb_vs_tosa:g} LSB > "
            f"{tolerance.vulkan_vs_tosa_lsb:g} at {check.worst}"
            + (f" (tolerance: {tolerance.why})" if tolerance.why else "")
        )
    for i, comparison in enumerate(check.vs_float):
        if comparison is not None and (message := case_run.case.get_tolerance(i).check(comparison, "vs_float")):
            problems.append(f"output {i}: Vulkan {message}")
    return problems


@pytest.mark.vulkan
def test_vulkan(case_run, vgf_batches, request):
    """The program end to end on Vulkan (scenario runner + ML emulation layer on
    llvmpipe) equals the TOSA-reference path and meets the float tolerance.
    Cases of a batch share a runner process; a failure comes from a run alone."""
    numerics = case_run.require_numerics()
    try:
        vulkan_stack()
    except VulkanUnavailable as error:
        pytest.skip(str(error))
    if not numerics.program.calls:
        pytest.skip(f"{case_run.case.id}: nothing was delegated (all ops stayed on the CPU, "
                    "as its golden records), so there is nothing to run on Vulkan")
    try:
        check = vgf_batches.vulkan_check(case_run.case.id,
                                         accept=lambda c: not _vulkan_problems(case_run, c))
    except VulkanRunError as error:
        record_case(request, case_run, numerics={"vulkan": {"error": str(error).splitlines()[0]}})
        raise AssertionError(f"case {case_run.case.id}: Vulkan run failed\n{error}") from None
    case_run.seconds["vulkan"] = check.seconds
    case_run.vulkan_batch = check.batch
    record_case(request, case_run, numerics={"vulkan": check.report_dict()})
    problems = _vulkan_problems(case_run, check)
    assert not problems, (
        f"case {case_run.case.id}:\n" + "\n".join(problems)
        + f"\nrerun on the runner: {rerun_command(check.scenario)}"
    )
