"""How a stored golden is compared with a new one: a compliance mode per field.

A golden diff must mean "the stack changed", never "the run was on another
CPU". The same pinned stack calibrates PT2E observers on float convolutions
whose summation order depends on oneDNN's ISA dispatch and on torch's thread
count, so calibrated values move by about 1e-7 relative from one machine to
the next; everything else an export produces is exact. So each field of a
golden has a mode, as each output of a TOSA conformance test has one:

* **exact** (the default): structure, op order, shapes, dtypes, zero points,
  rounding modes, weights and their hashes, delegation, the ``.pte``, the
  error statistics' codes outside the range, every text.
* **tolerant**, within a :class:`Band` measured across machines
  (``docs/portability.md``, ``python -m vgf_conformance drift``):
  a RESCALE's effective scale ``multiplier * 2^-shift`` (relative), a
  convolution's bias codes (codes), a quantization scale (relative), the
  numerics statistics (LSB, dB).
* **derived**: a field computed from tolerant ones. A VGF segment's SPIR-V
  embeds the TOSA graph's RESCALE constants, so its ``code_hash`` is exact
  when its delegate's TOSA is exact; otherwise ``code_hash_masked`` (the
  same code with the tolerant constants masked) must be exact and the TOSA
  within its bands. A VGF constant that is a TOSA operand with a tolerant
  mode is recorded as that operand (``tosa:op[7].bias``), whose values the
  ``tosa`` section compares.

:func:`compare` returns a :class:`Verdict`: the drift of each tolerant field
(what ``drift`` measures), the exact fields that differ, and the tolerant
ones outside their band, each naming section, field, stored and new value.
The syrupy extension (:mod:`vgf_conformance.goldens.store`) matches with it, so a
golden inside every band is left byte-identical by ``--snapshot-update``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from typing import Any

from vgf_conformance.goldens.bands import BANDS, STAT_BANDS, Band  # noqa: F401 - re-exported
from vgf_conformance.goldens.op_lines import (  # noqa: F401 - re-exported
    CALIBRATED_INTS, NO_ATTRIBUTE, op_changes, split_op_line)


@dataclasses.dataclass(frozen=True)
class Drift:
    value: float
    where: str


#: A finding's mode when it is exact (a band's name otherwise).
EXACT = "exact"
#: How a field absent on one side is shown.
ABSENT = "<absent>"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One field outside its compliance mode: where it is (``section``, the
    JSON ``path`` to it, the TOSA ``op`` and the op's ``field`` when it is
    an attribute of an op line), its ``stored`` and ``new`` values, and its
    ``mode`` (:data:`EXACT`, or the name of the band it left, with its
    ``drift``). Its :meth:`message` is the line pytest prints; the golden
    review (:mod:`vgf_conformance.review`) groups findings across cases."""

    section: str
    path: str
    stored: Any
    new: Any
    mode: str = EXACT
    op: str = ""
    field: str = ""
    drift: float | None = None

    @property
    def where(self) -> str:
        return " ".join(part for part in (self.path, self.op, self.field) if part)

    def message(self) -> str:
        if self.mode == EXACT:
            return f"{self.where}: stored {_short(self.stored)}, new {_short(self.new)} (exact)"
        band = BANDS[self.mode]
        return (f"{self.where}: stored {self.stored}, new {self.new}: drift {self.drift:.3g} {band.unit} is "
                f"outside the band {band.limit:.3g} ({band.name}: {band.reason})")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Verdict:
    """The comparison of one stored golden with a new one."""

    drifts: dict[str, Drift] = dataclasses.field(default_factory=dict)
    #: Every field outside its mode, in the order the comparison met them.
    findings: list[Finding] = dataclasses.field(default_factory=list)
    #: Sections that differ at all (byte-wise), in or out of band.
    differing: set[str] = dataclasses.field(default_factory=set)
    #: Sections with a difference outside every band: what "changed" means.
    changed: set[str] = dataclasses.field(default_factory=set)

    @property
    def matches(self) -> bool:
        return not self.findings

    @property
    def exact_mismatches(self) -> list[str]:
        return [f.message() for f in self.findings if f.mode == EXACT]

    @property
    def out_of_band(self) -> list[str]:
        return [f.message() for f in self.findings if f.mode != EXACT]

    def drift(self, band: str, value: float, path: str, section: str, stored, new, op: str = "",
              field: str = "") -> None:
        """Record a tolerant field's drift; out of band unless within its
        limit (a NaN drift is within no limit)."""
        where = Finding(section, path, stored, new, op=op, field=field).where
        if not value <= self.drifts.get(band, Drift(-1.0, "")).value:
            self.drifts[band] = Drift(value, where)
        if not value <= BANDS[band].limit:
            self.changed.add(section)
            self.findings.append(Finding(section, path, stored, new, band, op, field, value))

    def exact(self, path: str, section: str, stored, new, op: str = "", field: str = "") -> None:
        self.changed.add(section)
        self.findings.append(Finding(section, path, stored, new, EXACT, op, field))

    def messages(self) -> list[str]:
        return self.exact_mismatches + self.out_of_band


def _short(value, limit: int = 300) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def compare(stored: dict, new: dict) -> Verdict:
    """Compare two goldens (parsed JSON) field by field, in their modes."""
    verdict = Verdict()
    for section in sorted(set(stored) | set(new)):
        before, after = stored.get(section), new.get(section)
        if before == after:
            continue
        verdict.differing.add(section)
        if section == "tosa" and isinstance(before, list) and isinstance(after, list):
            _compare_tosa(before, after, verdict)
        elif section == "vgf" and isinstance(before, list) and isinstance(after, list):
            _compare_list(before, after, section, verdict, section,
                          lambda b, a, where: _compare_vgf(b, a, where, verdict, stored, new)
                          if isinstance(b, dict) and isinstance(a, dict) else _walk(b, a, where, "vgf", verdict))
        else:
            _walk(before, after, section, section, verdict)
    return verdict


def _walk(before, after, where: str, section: str, verdict: Verdict, key: str = "") -> None:
    """Exact, except the tolerant fields named by their key."""
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for k in sorted(set(before) | set(after)):
            if k not in before or k not in after:
                verdict.exact(f"{where}.{k}", section, before.get(k, ABSENT), after.get(k, ABSENT))
            else:
                _walk(before[k], after[k], f"{where}.{k}", section, verdict, k)
        return
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            verdict.exact(where, section, len(before), f"{len(after)}: {list_change(before, after)}",
                      field="(length)")
            return
        for i, (b, a) in enumerate(zip(before, after)):
            _walk(b, a, f"{where}[{i}]", section, verdict, key)
        return
    if _is_number(before) and _is_number(after):
        if key in ("scale", "unit"):
            verdict.drift("quant_scale", _relative(before, after), where, section, before, after)
            return
        if section == "numerics" and key in STAT_BANDS:
            verdict.drift(STAT_BANDS[key], _absolute(before, after), where, section, before, after)
            return
    verdict.exact(where, section, before, after)


def list_change(before: list, after: list) -> str:
    """Entries removed from and added to a list, in order (``difflib``), for
    a list whose length changed: which ops, kernels or instructions."""
    matcher = difflib.SequenceMatcher(a=[json.dumps(v, sort_keys=True) for v in before],
                                      b=[json.dumps(v, sort_keys=True) for v in after], autojunk=False)
    parts = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("delete", "replace"):
            parts.append(f"removed at {i1}: {_short(before[i1:i2], 200)}")
        if tag in ("insert", "replace"):
            parts.append(f"added at {j1}: {_short(after[j1:j2], 200)}")
    return "; ".join(parts)


def _compare_list(before: list, after: list, where: str, verdict: Verdict, section: str, each) -> None:
    if len(before) != len(after):
        verdict.exact(where, section, len(before), f"{len(after)}: {list_change(before, after)}",
                      field="(length)")
        return
    for i, (b, a) in enumerate(zip(before, after)):
        if b != a:
            each(b, a, f"{where}[{i}]")


# ---------------------------------------------------------------------------
# TOSA: op lines with tolerant operands
# ---------------------------------------------------------------------------
def _effective(multipliers: list[int], shifts: list[int]) -> list[float]:
    if len(shifts) == 1 and len(multipliers) > 1:
        shifts = shifts * len(multipliers)
    return [m * 2.0 ** -s for m, s in zip(multipliers, shifts)]


def _compare_tosa(before: list, after: list, verdict: Verdict) -> None:
    def delegate(b: dict, a: dict, where: str) -> None:
        if not (isinstance(b, dict) and isinstance(a, dict)):
            _walk(b, a, where, "tosa", verdict)
            return
        for key in sorted(set(b) | set(a)):
            if key == "ops" and isinstance(b.get(key), list) and isinstance(a.get(key), list):
                _compare_list(b["ops"], a["ops"], f"{where}.ops", verdict, "tosa",
                              lambda sb, sa, w: _compare_op(sb, sa, w, verdict))
            elif b.get(key) != a.get(key):
                _walk(b.get(key), a.get(key), f"{where}.{key}", "tosa", verdict)

    _compare_list(before, after, "tosa", verdict, "tosa", delegate)


def _compare_op(before: str, after: str, where: str, verdict: Verdict) -> None:
    if not (isinstance(before, str) and isinstance(after, str)):
        _walk(before, after, where, "tosa", verdict)
        return
    skeleton_b, values_b = split_op_line(before)
    skeleton_a, values_a = split_op_line(after)
    op = before.split("(", 1)[0].split("] ", 1)[-1]
    if skeleton_b != skeleton_a or set(values_b) != set(values_a):
        changes = op_changes(before, after, tolerant=set(values_b) & set(values_a))
        if not changes:  # not op lines this reader knows: the whole line
            verdict.exact(where, "tosa", before, after)
        for field, (b, a) in changes.items():
            verdict.exact(where, "tosa", b, a, op, field)
        if skeleton_b.split("(", 1)[0] != skeleton_a.split("(", 1)[0] or set(values_b) != set(values_a):
            return
    if "multiplier" in values_b:
        scales_b = _effective(values_b["multiplier"], values_b.get("shift", [0]))
        scales_a = _effective(values_a["multiplier"], values_a.get("shift", [0]))
        if len(scales_b) != len(scales_a):
            verdict.exact(where, "tosa", before, after, field="multiplier (channels)")
        else:
            worst = max((_relative(b, a) for b, a in zip(scales_b, scales_a)), default=0.0)
            verdict.drift("rescale_scale", worst, where, "tosa", _pairs(values_b), _pairs(values_a), op,
                          "multiplier*2^-shift")
    elif values_b.get("shift") != values_a.get("shift"):  # a shift without a multiplier (MUL): exact
        verdict.exact(where, "tosa", values_b.get("shift"), values_a.get("shift"), field="shift")
    for name in sorted(set(values_b) - set(CALIBRATED_INTS)):
        b, a = values_b[name], values_a[name]
        if len(b) != len(a):
            verdict.exact(where, "tosa", b, a, field=f"{name} (length)")
        else:
            worst = max((_relative(x, y) for x, y in zip(b, a)), default=0.0)
            verdict.drift("quant_scale", worst, where, "tosa", b, a, op, name)
    if "bias" in values_b:
        b, a = values_b["bias"], values_a["bias"]
        if len(b) != len(a):
            verdict.exact(where, "tosa", b, a, field="bias (channels)")
        else:
            worst = max((_absolute(x, y) for x, y in zip(b, a)), default=0)
            verdict.drift("bias_code", float(worst), where, "tosa", b, a, op, "bias")


def _pairs(values: dict[str, list[int]]) -> str:
    return f"multiplier={values.get('multiplier')} shift={values.get('shift')}"


# ---------------------------------------------------------------------------
# VGF: hashes derived from the TOSA
# ---------------------------------------------------------------------------
def _compare_vgf(before: dict, after: dict, where: str, verdict: Verdict, stored: dict, new: dict) -> None:
    tosa_exact = _delegate_tosa(stored, before.get("delegate")) == _delegate_tosa(new, after.get("delegate"))
    for key in sorted(set(before) | set(after)):
        if key != "segments" or not isinstance(before.get(key), list) or not isinstance(after.get(key), list):
            _walk(before.get(key), after.get(key), f"{where}.{key}", "vgf", verdict)
            continue
        _compare_list(before[key], after[key], f"{where}.segments", verdict, "vgf",
                      lambda b, a, w: _compare_segment(b, a, w, verdict, tosa_exact)
                      if isinstance(b, dict) and isinstance(a, dict) else _walk(b, a, w, "vgf", verdict))


def _compare_segment(before: dict, after: dict, where: str, verdict: Verdict, tosa_exact: bool) -> None:
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b == a:
            continue
        if key == "code_hash" and not tosa_exact and "code_hash_masked" in before \
                and before.get("code_hash_masked") == after.get("code_hash_masked"):
            continue  # derived: the SPIR-V differs only in the TOSA's tolerant constants
        verdict.exact(f"{where}.{key}", "vgf", before.get(key, ABSENT), after.get(key, ABSENT))


def _delegate_tosa(golden: dict, index) -> Any:
    for entry in golden.get("tosa") or []:
        if isinstance(entry, dict) and entry.get("delegate") == index:
            return entry
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(before: float, after: float) -> bool:
    """Equal, NaN included: a NaN is equal to a NaN and to nothing else."""
    return before == after or (math.isnan(before) and math.isnan(after))


def _relative(before: float, after: float) -> float:
    """The relative drift; infinite when a side is NaN or infinite and the
    other is not the same (no band holds it)."""
    if _same(before, after):
        return 0.0
    if not (math.isfinite(before) and math.isfinite(after)):
        return math.inf
    scale = max(abs(before), abs(after))
    return abs(after - before) / scale if scale else 0.0


def _absolute(before: float, after: float) -> float:
    """The absolute drift, infinite as :func:`_relative` is."""
    if _same(before, after):
        return 0.0
    if not (math.isfinite(before) and math.isfinite(after)):
        return math.inf
    return abs(after - before)


def describe(case_id: str, verdict: Verdict, sections: list[str] | None = None) -> str:
    """A failure's text: the sections that changed (``sections``: in the
    registry's order), then every field outside its mode, one per line."""
    sections = sections if sections is not None else sorted(verdict.changed)
    lines = [f"golden of {case_id} changed in sections {sections}: {len(verdict.messages())} field(s) "
             "outside their compliance mode (exact, or beyond a measured band):"]
    lines += [f"  {message}" for message in verdict.messages()]
    return "\n".join(lines)
