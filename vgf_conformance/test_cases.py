"""The conformance suite: every case of the table, stage by stage.

Each test reads the case's single session-scoped run (see conftest.py), calls
its check (:mod:`vgf_conformance.checks`, plain functions the explorer calls
too) with the plugin's recorder, and turns "nothing to check" into a skip.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from vgf_conformance import checks
from vgf_conformance.goldens import changed_sections, describe_changes, golden_path
from vgf_conformance.goldens.store import mismatch_message
from vgf_conformance.harness.reporting.errormaps import write_case_maps
from vgf_conformance.harness.reporting.html import golden_diff
from vgf_conformance.harness.plugin.recording import accept_command, record_case
from vgf_conformance.harness.reporting.skips import VULKAN_UNAVAILABLE
from vgf_conformance.oracles.references import ORACLES
from vgf_conformance.oracles.vulkan import VulkanUnavailable, vulkan_stack


def _recorder(request, case_run):
    return functools.partial(record_case, request, case_run)


def _call(check, case_run, request, *args, **kwargs) -> None:
    try:
        check(case_run, *args, record=_recorder(request, case_run), **kwargs)
    except checks.NotApplicable as why:
        pytest.skip(str(why))


def test_export(case_run, request):
    """The export reaches the end of the flow (or fails as expected)."""
    _call(checks.export, case_run, request)


def test_golden(case_run, golden, request):
    """Graph structure, delegation, quantization, TOSA and VGF match the golden."""
    current = checks.built_golden(case_run)
    stored: Path = golden_path(case_run.case.id)
    stored_text = stored.read_text() if stored.exists() else None
    changed = changed_sections(stored_text, current)
    record_case(request, case_run, golden_changed=changed, changes=describe_changes(stored_text, current),
                golden_diff=golden_diff(stored_text, current) if changed else [],
                **({"error_maps": write_case_maps(case_run)} if "numerics" in changed else {}))
    assert golden == current, mismatch_message(case_run.case.id, stored, stored_text, current, changed,
                                               accept_command(request.config, case_run.case.id))


def test_statistics(case_run, request):
    """The error statistics of every output against each oracle (bias, mean,
    p99 and max error in LSB, SNR) stay within their measured cross-machine
    bands of the golden's: a drift no per-element bound sees."""
    _call(checks.statistics, case_run, request, accept=accept_command(request.config, case_run.case.id),
          updating=bool(request.config.getoption("--snapshot-update")))


def test_delegation(case_run, request):
    """The case is delegated, or stays on the CPU, as it declares."""
    _call(checks.delegation, case_run, request)


def _numerics_test(oracle):
    def test(case_run, request):
        _call(checks.outputs, case_run, request, oracle)

    test.__name__ = test.__qualname__ = oracle.test_name
    test.__doc__ = f"The lowered program agrees with {oracle.what}, within the case's bound."
    return test


def numerics_tests() -> dict:
    """One test per oracle (``test_numerics_vs_fake_quant``, ...), from its registry entry."""
    return {oracle.test_name: _numerics_test(oracle) for oracle in ORACLES.values()}


globals().update(numerics_tests())


def test_pte(case_run, request):
    """The shipped program.pte in ExecuTorch's runtime (see :func:`vgf_conformance.checks.pte`)."""
    _call(checks.pte, case_run, request)


@pytest.mark.vulkan
def test_vulkan(case_run, vgf_batches, request):
    """The program end to end on Vulkan equals the TOSA-reference path
    (see :func:`vgf_conformance.checks.vulkan`). Cases of a batch share a
    runner process; a failure is confirmed by a run alone."""
    case_run.require_numerics()
    try:
        vulkan_stack()
    except VulkanUnavailable as error:
        if request.config.getoption("--vgf-require-vulkan"):
            raise AssertionError(f"the Vulkan stack is required (--vgf-require-vulkan) but "
                                 f"missing: {error}") from None
        pytest.skip(f"{VULKAN_UNAVAILABLE}: {error}")
    _call(checks.vulkan, case_run, request,
          lambda accept: vgf_batches.vulkan_check(case_run.case.id, accept=accept))
