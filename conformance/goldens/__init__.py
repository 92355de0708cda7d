"""Goldens: one readable JSON file per case, section by section.

| module | idea |
|---|---|
| ``sections.py`` | the section registry (``SECTIONS``) and ``build_golden`` |
| ``projections.py`` | what a golden keeps of each artifact (graph, program, IO, delegate files) |
| ``store.py`` | the golden directory, serialization, comparison, the syrupy extension |
| ``tosa_reader.py`` | a TOSA flatbuffer as a stable summary (``summarize_tosa``) |
| ``tosa_fields.py`` | the flatbuffer's fields as Python values (enums, constants, attributes) |
| ``tosa_rules.py`` | the TOSA ERROR_IF rules a golden checks statically |
| ``vgf_reader.py`` | a VGF file as a summary, from ``vgf_dump`` (``summarize_vgf``) |

The readers are imported on first use (``summarize_tosa``, ``summarize_vgf``):
pytest loads this package in processes that never read an artifact.
"""

from __future__ import annotations

import importlib

from conformance.goldens.projections import golden_tosa, golden_vgf, pte_section
from conformance.goldens.sections import SECTIONS, GoldenSource, Section, build_golden
from conformance.goldens.store import (
    GOLDEN_DIR,
    GoldenExtension,
    changed_sections,
    describe_changes,
    golden_path,
    serialize,
)

_READERS = {
    "summarize_tosa": "conformance.goldens.tosa_reader",
    "summarize_vgf": "conformance.goldens.vgf_reader",
}

__all__ = [
    "GOLDEN_DIR", "SECTIONS", "GoldenExtension", "GoldenSource", "Section",
    "build_golden", "changed_sections", "describe_changes", "golden_path",
    "golden_tosa", "golden_vgf", "pte_section", "serialize", *_READERS,
]


def __getattr__(name: str):
    if name in _READERS:
        return getattr(importlib.import_module(_READERS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
