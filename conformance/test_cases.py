"""The conformance suite: every case of the table, stage by stage.

Each test reads the case's single session-scoped run (see conftest.py) and
records what the report needs in ``user_properties``.
"""

from __future__ import annotations

from pathlib import Path

from conformance.golden import GOLDEN_ROOT, changed_sections
from conformance.plugin import record_case


def test_export(case_run, request):
    """The export reaches the end of the flow (or fails as expected)."""
    record_case(request, case_run)
    case_run.require_export()


def test_golden(case_run, golden, request):
    """Graph structure, delegation, quantization, TOSA and VGF match the golden."""
    case_run.require_export()
    stored = GOLDEN_ROOT / Path(__file__).stem / f"{case_run.case.id}.json"
    changed = changed_sections(stored.read_text() if stored.exists() else None, case_run.golden)
    record_case(request, case_run, golden_changed=changed)
    assert golden == case_run.golden, (
        f"golden of {case_run.case.id} changed in sections {changed} ({stored}).\n"
        "If the change is intended, accept it with:\n"
        f"  scripts/conformance.sh -k '{case_run.case.id}' --snapshot-update"
    )
