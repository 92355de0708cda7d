"""The sections of a golden: a registry, one entry per section.

A golden is one case's export seen section by section (its top-level keys).
:data:`SECTIONS` holds them in order, each a :class:`Section`: its name, what
it holds, how it is built from the export, and how a change of it is worded
in the report. :func:`build_golden` builds them in that order, and the store
(:mod:`vgf_conformance.goldens.store`) compares and words changes section by
section from the same registry. Adding a section is one ``Section(...)``
line in ``SECTIONS`` below.

Keys are sorted, floats rounded, and nothing machine- or version-specific
(paths, timestamps, tool versions) goes in, so a diff reads like a changelog
of ExecuTorch's behaviour.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from vgf_conformance.goldens import projections as view
from vgf_conformance.text import round_floats
from vgf_export.names import GRID_SAMPLER_BACKEND, VGF_BACKEND


@dataclasses.dataclass(frozen=True)
class GoldenSource:
    """What a golden is built from: the case, its export result
    (``vgf_export.ExportResult``), the numerics statistics when the
    numerics tier ran (None otherwise), and the model the case was exported
    from (None: the case builds one)."""

    case: Any
    result: Any
    numerics: dict | None = None
    model: Any = None


#: How a change of a section is worded: (stored golden, current golden) -> phrases.
Wording = Callable[[dict, dict], list[str]]


@dataclasses.dataclass(frozen=True)
class Section:
    """One section of a golden.

    ``build`` returns the section's content, or None to leave the section
    out of this golden; if it raises, the section is recorded as
    ``{"error": ...}`` and the other sections still compare. ``wording``
    says how a change is described (see
    :func:`vgf_conformance.goldens.store.describe_changes`); None: ``"<name>
    changed"``. A section that could not be built is worded as such.
    """

    name: str
    doc: str
    build: Callable[[GoldenSource], Any]
    wording: Wording | None = None

    def changes(self, stored: dict, current: dict) -> list[str]:
        """The phrases describing how this section changed ([] if it did not)."""
        before, after = stored.get(self.name), current.get(self.name)
        if before != after and _is_error(after):
            return [f"{self.name} could not be built"]
        if self.wording is not None and not _is_error(before):
            return self.wording(stored, current)
        return [f"{self.name} changed"] if before != after else []


def _is_error(content) -> bool:
    """Whether a section's content records that it could not be built."""
    return isinstance(content, dict) and set(content) == {"error"}


def unworded(stored: dict, current: dict) -> list[str]:
    """For a section whose change another section words, or that changes
    along with everything else (the case's own parameters)."""
    return []


def _compute_ops(ops: list[str]) -> list[str]:
    from vgf_export.qdq import is_qdq_name

    return [op for op in ops if not is_qdq_name(op)]


def delegation_changes(stored: dict, current: dict) -> list[str]:
    """Delegation (the ``delegates`` and ``cpu_ops`` sections together), in
    words that group well across cases ("no longer delegated", ...)."""
    before = [(d["backend"], _compute_ops(d["ops"])) for d in stored.get("delegates", [])]
    after = [(d["backend"], _compute_ops(d["ops"])) for d in current.get("delegates", [])]
    cpu_before = _compute_ops(stored.get("cpu_ops", []))
    cpu_after = _compute_ops(current.get("cpu_ops", []))
    if before and not after:
        return ["no longer delegated"]
    if after and not before:
        return ["newly delegated"]
    if len(cpu_after) > len(cpu_before):
        return ["more ops left on the CPU"]
    if len(cpu_after) < len(cpu_before):
        return ["fewer ops left on the CPU"]
    if before != after:
        return ["delegation changed"]
    if stored.get("delegates") != current.get("delegates"):
        return ["Q/DQ inside delegates changed"]
    return []


def _worst_vs_float(golden: dict) -> float | None:
    outputs = (golden.get("numerics") or {}).get("outputs") or []
    values = [o["vs_float"]["max_lsb"] for o in outputs if o.get("vs_float")]
    return max(values) if values else None


def numerics_changes(stored: dict, current: dict) -> list[str]:
    """The worst error against float, better or worse by more than half an LSB."""
    worst_before, worst_after = _worst_vs_float(stored), _worst_vs_float(current)
    if worst_before is None or worst_after is None:
        return []
    if worst_after > worst_before + 0.5:
        return ["numerics vs float worse by more than 0.5 LSB"]
    if worst_after < worst_before - 0.5:
        return ["numerics vs float better by more than 0.5 LSB"]
    if stored.get("numerics") != current.get("numerics"):
        return ["numerics statistics changed (within 0.5 LSB)"]
    return []


def _report(source: GoldenSource):
    return source.result.report


#: The registry: every section of a golden, in order.
SECTIONS: dict[str, Section] = {section.name: section for section in (
    Section("case", "the case's declarative parameters (what was exported)",
            lambda s: s.case.describe(s.model), wording=unworded),
    Section("graph", "the top-level edge graph, one line per node",
            lambda s: view.graph_section(s.result.edge_program)),
    Section("delegates", "each delegate's backend and ops, in order",
            lambda s: [{"backend": d.backend, "ops": d.ops} for d in _report(s).delegates],
            wording=delegation_changes),
    Section("cpu_ops", "ops left on the CPU",
            lambda s: _report(s).cpu_ops, wording=unworded),  # worded with delegates
    Section("io_quant_params", "the stripped IO quantization parameters",
            lambda s: view.io_section(_report(s).io_quant_params, s.result.edge_program)),
    Section("tosa", "each VGF delegate's TOSA operators and the attributes that matter, and "
                    "the TOSA version the flatbuffer declares (a TOSA flatbuffer has no profile "
                    "field: the profile the lowering used is the .pte delegate's compile spec "
                    "tosa_spec, in the report's pte.tosa_specs)",
            lambda s: view.delegate_entries(s.result, VGF_BACKEND, "tosa", view.tosa_file)),
    Section("vgf", "each VGF delegate's segments: bindings, SPIR-V and constant hashes (vgf_dump)",
            lambda s: view.delegate_entries(s.result, VGF_BACKEND, "vgf", view.vgf_file)),
    Section("grid_sampler", "each grid-sampler delegate's payload",
            lambda s: view.delegate_entries(
                s.result, GRID_SAMPLER_BACKEND, "json", view.grid_sampler_file)),
    Section("pte", "the serialized program's tensors and IO, its instruction chain "
                   "(kernel and delegate calls), and where its output layouts disagree "
                   "with what the delegates write",
            lambda s: view.pte_section(s.result.artifacts.program.read_bytes(),
                                       s.result.edge_program)),
    Section("numerics", "rounded error statistics (when the numerics tier ran)",
            lambda s: s.numerics, wording=numerics_changes),
)}


def build_golden(case, result, numerics: dict | None = None, model=None) -> dict:
    """All sections of one case's golden, from its export result."""
    source = GoldenSource(case, result, numerics, model)
    golden = {}
    for section in SECTIONS.values():
        content = view.recorded(section.build, source)
        if content is not None:
            golden[section.name] = content
    return round_floats(golden)
