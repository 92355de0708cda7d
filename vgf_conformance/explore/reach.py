"""Drawing where the matrix is blind: ``explore --stack-target``.

With ``--stack-target`` the draw child records the stack lines each draw's
export reaches (coverage.py over the stack packages, as the suite's
``--vgf-stack-coverage`` does: :mod:`vgf_conformance.harness.measurements.stack_coverage`),
and the explorer compares them with every line the full matrix reaches (the
recorded ``vgf_conformance/stack_coverage.json``, which the nightly refreshes).
A draw that reaches a line neither the matrix nor an earlier draw reaches is
kept in a corpus: while the corpus holds any, half of the draws mutate a kept
draw's bytes instead of drawing fresh ones, so the search stays near what
reached the blind spots (coverage-guided, as a fuzzer is). The findings list
each such draw with its new lines by file and function, and the case-table
entry that would hold them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

from vgf_conformance.harness.schedule import stack_reach

#: The share of draws that mutate a kept draw while the corpus holds any.
MUTATE_SHARE = 0.5
#: At most this many bytes of a kept draw change in a mutation.
MUTATED_BYTES = 4
#: The request field that asks the draw child to record, and the outcome field it answers in.
REQUEST_FIELD = "stack_lines"


class DrawRecorder:
    """The draw child's side: a recorder kept for the child's life."""

    def __init__(self, directory: Path) -> None:
        from vgf_conformance.harness.measurements.stack_coverage import StackCoverage

        self.coverage = StackCoverage(Path(directory), "draw-child")

    def context(self, run_key: str):
        return self.coverage.context(run_key)

    def take(self, run_key: str) -> list[str]:
        return sorted(self.coverage.take(run_key))


class StackTarget:
    """The explorer's side: what the matrix reaches, what draws added, the corpus."""

    def __init__(self, known: Iterable[str], buffer_bytes: int) -> None:
        self.known = set(known)
        self.matrix_lines = len(self.known)
        self.buffer_bytes = buffer_bytes
        self.corpus: list[bytes] = []
        self.draws: list[dict] = []  # the draws that reached new lines, in order
        self.last_was_new = False

    @classmethod
    def recorded(cls, buffer_bytes: int, path: Path = stack_reach.RECORDED) -> "StackTarget":
        reach = stack_reach.load(path)
        if not reach.every_case_lines:
            raise ValueError(f"{path}: records no lines reached by every case (an older record): refresh it "
                             "with python -m vgf_conformance stack-coverage DIR --record")
        return cls(reach.lines(), buffer_bytes)

    def see(self, outcome: dict) -> list[str]:
        """Takes the draw's recorded lines out of ``outcome`` (they are many);
        the lines nothing reached before go back in as ``new_stack_lines``."""
        lines = outcome.pop(REQUEST_FIELD, None) or []
        new = sorted(set(lines) - self.known)
        self.last_was_new = bool(new)
        if new:
            self.known.update(new)
            outcome["new_stack_lines"] = stack_reach.line_ranges(new)
            self.draws.append({key: outcome.get(key) for key in ("draw", "phase", "family", "id", "code",
                                                                 "params", "signature")}
                              | {"new_lines": len(new), "lines": stack_reach.line_ranges(new)})
        return new

    def next_buffer(self, rng: random.Random) -> bytes:
        """A kept draw's bytes with a few changed (:data:`MUTATE_SHARE` of the
        draws while the corpus holds any), or fresh ones."""
        if not self.corpus or rng.random() >= MUTATE_SHARE:
            return rng.randbytes(self.buffer_bytes)
        buffer = bytearray(rng.choice(self.corpus))
        for _ in range(rng.randint(1, MUTATED_BYTES)):
            buffer[rng.randrange(len(buffer))] = rng.randrange(256)
        return bytes(buffer)

    def keep(self, buffer: bytes) -> None:
        """Keeps ``buffer`` when the draw it made reached new lines."""
        if self.last_was_new:
            self.corpus.append(buffer)
        self.last_was_new = False

    def summary(self, roots: dict[str, Path] | None = None) -> dict:
        """The findings' section: each draw's new lines with the functions they are in."""
        draws = [{**draw, "functions": functions_of(draw["lines"], roots)} for draw in self.draws]
        return {"matrix_lines": self.matrix_lines, "draws_with_new_lines": len(draws),
                "new_lines": sum(d["new_lines"] for d in draws), "draws": draws}


def functions_of(entries: Iterable[str], roots: dict[str, Path] | None = None) -> list[str]:
    """``file:function`` of each line of ``entries`` (line_ranges entries),
    from the installed stack's source: the innermost function or class
    (:class:`~vgf_conformance.harness.candidates.stack_changes.Source`), or
    ``file:<module>``."""
    from vgf_conformance.harness.candidates.stack_changes import MODULE, Source

    if roots is None:
        from vgf_conformance.harness.measurements import blind_spots, stack_coverage

        roots = blind_spots.stack_roots(stack_coverage.STACK_PACKAGES)
    found: dict[str, None] = {}
    for entry in entries:
        where, _, _ = entry.rpartition(":")
        path = next((Path(directory) / where.removeprefix(prefix + "/")
                     for prefix, directory in roots.items() if where.startswith(prefix + "/")), None)
        source = Source(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else None
        for unit in stack_reach.lines_of([entry]):
            line = int(unit.rpartition(":")[2])
            found[f"{where}:{source.scope(line) if source else MODULE}"] = None
    return list(found)


def markdown(section: dict) -> list[str]:
    """The findings' lines for the section (:meth:`StackTarget.summary`)."""
    lines = ["", "## Stack lines the matrix does not reach", "",
             f"{section['draws_with_new_lines']} draws reached {section['new_lines']} stack lines that none of "
             f"the matrix's {section['matrix_lines']} reached lines is (vgf_conformance/stack_coverage.json); "
             "each draw counts the lines no earlier draw reached."]
    for draw in section["draws"]:
        lines += ["", f"### draw #{draw['draw']} `{draw['id']}` ({draw['family']}): {draw['new_lines']} new lines"
                  + (f", fails as `{draw['signature']}`" if draw.get("signature") else ""), "",
                  "- in: " + ", ".join(f"`{f}`" for f in draw["functions"][:12])
                  + (f" (+{len(draw['functions']) - 12} more)" if len(draw["functions"]) > 12 else ""),
                  "- lines: " + ", ".join(f"`{entry}`" for entry in draw["lines"][:8])
                  + (f" (+{len(draw['lines']) - 8} more files)" if len(draw["lines"]) > 8 else "")]
        if draw.get("code"):
            lines += ["", "```python", draw["code"], "```"]
    return lines
