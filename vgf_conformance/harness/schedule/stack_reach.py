"""The stack lines and branches the full matrix's exports reach, as recorded:
``vgf_conformance/stack_coverage.json``, the way durations are recorded.

A line or branch of the stack's lowering (coverage.py, during each case's
export: vgf_conformance/harness/measurements/stack_coverage.py) that every
case reaches weighs nothing for choosing a tier: any case holds it. The
others are recorded in **groups**: the lines and branches reached by exactly
the same cases, with those cases. The quick tier's set cover
(:mod:`vgf_conformance.harness.schedule.coverage`) takes each group as one
element weighing its lines and branches; the check that holds it reads this
file, so no pull request needs a coverage run of the whole matrix. The
nightly refreshes it (``python -m vgf_conformance stack-coverage DIR
--record``).

A group's cases are written as ``cases`` or, when it is reached by more than
half of the run's cases, as ``all_but`` (the ones that do not reach it), by
their index in the file's sorted ``cases``.
Lines are written per file as ranges (``file.py:10-12,15``); branches, which
are arcs between two lines, are counted.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

#: The recorded figures, kept in the repository.
RECORDED = Path(__file__).resolve().parents[2] / "stack_coverage.json"
#: A group's set-cover element is this and its index.
ELEMENT = "stack#"


def line_ranges(units: Iterable[str]) -> list[str]:
    """``file:line`` units as one ``file:a-b,c`` entry per file, sorted."""
    by_file: dict[str, list[int]] = {}
    for unit in units:
        where, _, line = unit.rpartition(":")
        by_file.setdefault(where, []).append(int(line))
    entries = []
    for where, lines in sorted(by_file.items()):
        lines.sort()
        runs, start = [], lines[0]
        for previous, line in zip(lines, lines[1:] + [None]):
            if line != previous + 1:
                runs.append(f"{start}" if start == previous else f"{start}-{previous}")
                start = line
        entries.append(f"{where}:{','.join(runs)}")
    return entries


def lines_of(entries: Iterable[str]) -> list[str]:
    """The ``file:line`` units of :func:`line_ranges`' entries."""
    units = []
    for entry in entries:
        where, _, runs = entry.rpartition(":")
        for run in runs.split(","):
            first, _, last = run.partition("-")
            units.extend(f"{where}:{n}" for n in range(int(first), int(last or first) + 1))
    return units


@dataclasses.dataclass(frozen=True)
class Group:
    """Lines and branches reached by exactly ``cases``."""

    cases: frozenset[str]
    lines: tuple[str, ...]  # line_ranges entries
    line_count: int
    arcs: int

    @property
    def weight(self) -> int:
        return self.line_count + self.arcs


@dataclasses.dataclass(frozen=True)
class Reach:
    """The recorded reach of the full matrix."""

    cases: frozenset[str]
    groups: tuple[Group, ...]
    by_every_case: Mapping[str, int]  # {"lines": n, "arcs": n}
    stack: Mapping[str, str]
    #: The lines every case reaches (line_ranges entries); empty in a record
    #: written before they were kept.
    every_case_lines: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Lines and branches the full matrix reaches."""
        return sum(self.by_every_case.values()) + sum(g.weight for g in self.groups)

    def elements(self) -> dict[str, frozenset[str]]:
        """Each case's groups, as set-cover elements (:data:`ELEMENT` and the group's index)."""
        found: dict[str, set[str]] = {case: set() for case in self.cases}
        for index, group in enumerate(self.groups):
            for case in group.cases:
                found[case].add(f"{ELEMENT}{index}")
        return {case: frozenset(names) for case, names in found.items()}

    def weight(self, element: str) -> int:
        return self.groups[int(element.removeprefix(ELEMENT))].weight

    def reached_by(self, tier: Iterable[str]) -> int:
        """Lines and branches some case of ``tier`` reaches (every case's included)."""
        tier = set(tier)
        return sum(self.by_every_case.values()) + sum(g.weight for g in self.groups if g.cases & tier)

    def lines(self) -> frozenset[str]:
        """Every ``file:line`` the full matrix reaches (by every case or by some)."""
        return frozenset(lines_of(self.every_case_lines)).union(*(lines_of(g.lines) for g in self.groups))

    def left_out(self, tier: Iterable[str]) -> list[Group]:
        """The groups no case of ``tier`` reaches, heaviest first."""
        tier = set(tier)
        return sorted((g for g in self.groups if not g.cases & tier), key=lambda g: (-g.weight, sorted(g.cases)))


def record(by_case: Mapping[str, Mapping[str, set[str]]], stack: Mapping[str, str]) -> dict:
    """The JSON of a run's reach (``by_case``: run key -> {"lines", "arcs"})."""
    cases = sorted(by_case)
    reached_by: dict[str, set[str]] = {}
    for case, entry in by_case.items():
        for what in ("lines", "arcs"):
            for unit in entry[what]:
                reached_by.setdefault(f"{what}|{unit}", set()).add(case)
    every = {"lines": 0, "arcs": 0}
    every_lines: list[str] = []
    grouped: dict[frozenset[str], dict[str, list[str]]] = {}
    for key, holders in reached_by.items():
        what, _, unit = key.partition("|")
        if len(holders) == len(cases):
            every[what] += 1
            if what == "lines":
                every_lines.append(unit)
        else:
            grouped.setdefault(frozenset(holders), {"lines": [], "arcs": []})[what].append(unit)
    groups = []
    for holders, units in grouped.items():
        index = {case: i for i, case in enumerate(cases)}
        others = sorted(index[c] for c in set(cases) - holders)
        who = {"all_but": others} if len(holders) > len(cases) / 2 else {"cases": sorted(index[c] for c in holders)}
        groups.append({**who, "lines": line_ranges(units["lines"]) if units["lines"] else [],
                       "line_count": len(units["lines"]), "arcs": len(units["arcs"])})
    groups.sort(key=lambda g: (-(g["line_count"] + g["arcs"]), g["lines"], g.get("cases", g.get("all_but"))))
    return {"about": __doc__.split("\n\n")[0].replace("\n", " "), "stack": dict(sorted(stack.items())),
            "cases": cases, "by_every_case": every, "every_case_lines": line_ranges(every_lines),
            "groups": groups}


def dumps(recorded: dict) -> str:
    """The recorded JSON as it is kept: sorted keys, one group a line (a
    refresh's diff reads group by group)."""
    head = json.dumps({k: v for k, v in recorded.items() if k != "groups"}, indent=1, sort_keys=True)
    groups = ",\n".join(f"  {json.dumps(group, sort_keys=True)}" for group in recorded["groups"])
    return f'{head[:-2]},\n "groups": [\n{groups}\n ]\n}}\n'


def load(path: Path = RECORDED) -> Reach:
    """The recorded reach; a ``ValueError`` naming the file when it is not one."""
    try:
        data = json.loads(Path(path).read_text())
        names = data["cases"]
        cases = frozenset(names)
        groups = tuple(Group(cases=frozenset(names[i] for i in g["cases"]) if "cases" in g
                             else cases - {names[i] for i in g["all_but"]},
                             lines=tuple(g["lines"]), line_count=g["line_count"], arcs=g["arcs"])
                       for g in data["groups"])
        return Reach(cases=cases, groups=groups, by_every_case=data["by_every_case"], stack=data["stack"],
                     every_case_lines=tuple(data.get("every_case_lines", ())))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file (python -m vgf_conformance stack-coverage DIR --record "
                         f"writes it from a run with --vgf-stack-coverage DIR)") from None
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a recorded stack coverage ({error})") from None
