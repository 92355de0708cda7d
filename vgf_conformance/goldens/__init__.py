"""Goldens: one readable JSON file per case, section by section.

| module | idea |
|---|---|
| ``sections.py`` | the section registry (``SECTIONS``) and ``build_golden`` |
| ``projections.py`` | what a golden keeps of each artifact (graph, program, IO, delegate files) |
| ``store.py`` | the golden directory, serialization, comparison, the syrupy extension |
| ``vgf_reader.py`` | a VGF file as a summary, from ``vgf_dump`` (``summarize_vgf``) |
| ``compliance.py`` | how a stored golden is compared with a new one: a mode per field, its findings |
| ``bands.py`` | the measured bands of the tolerant fields |
| ``op_lines.py`` | a TOSA op line taken apart: calibrated operands, float attributes, changed fields |
| ``statistics.py`` | the error-statistics check: each statistic against the golden's, within its band |
| ``features.py`` | the lowering features a golden exercises (the quick tier's coverage) |
| ``stale.py`` | which files are goldens, which are stale |

TOSA flatbuffers are read by :mod:`vgf_conformance.tosa`; the measurement
behind the bands is :mod:`vgf_conformance.harness.measurements.drift`.

Every name below is imported on first use: pytest loads this package in
processes that never read an artifact, and the report tools read the bands
(``compliance.BANDS``) with the standard library alone.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    **{name: "vgf_conformance.goldens.projections" for name in ("golden_tosa", "golden_vgf", "pte_section")},
    **{name: "vgf_conformance.goldens.sections" for name in ("SECTIONS", "GoldenSource", "Section", "build_golden")},
    **{name: "vgf_conformance.goldens.store" for name in ("GOLDEN_DIR", "GoldenExtension", "changed_sections",
                                                      "describe_changes", "golden_path", "serialize")},
    "summarize_vgf": "vgf_conformance.goldens.vgf_reader",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
