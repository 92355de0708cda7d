"""Op families: how the case table grows.

A :class:`Family` is declared in one module of
:mod:`vgf_conformance.cases.families` (found there by name: adding the module is
the only step) or in a case file given with ``--vgf-cases``. It says which
cases it has, its default tolerance, which of its cases form the
pull-request tier (``quick``), and its known failures on the pinned stack
(``expectations``). :func:`build_table` checks all of that once: unique ids,
quick and expectation ids that name real cases, known traits, sample-input
files that exist and hold what their cases declare.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from typing import Callable, Iterable

from vgf_conformance.cases.case import Case, Expectation
from vgf_conformance.cases.tolerances import TRAITS, Tolerance, resolve


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    #: What the family covers (its module's docstring; the first paragraph is its summary).
    doc: str
    #: Builds the family's cases (each with ``family=name``).
    cases: Callable[[], Iterable[Case]]
    #: The default tolerance of its outputs (``tolerances.family_tolerance``);
    #: None: each case states its bounds through a trait (the model tier).
    tolerance: Tolerance | None
    #: Ids of its cases in the pull-request tier.
    quick: frozenset[str] = frozenset()
    #: Known failures on the pinned stack, by case id (strict xfails).
    expectations: dict[str, Expectation] = dataclasses.field(default_factory=dict)
    #: The directory relative sample-input paths (``InputSpec.file``) resolve
    #: against: the case file's, set by :func:`load_case_file`.
    root: Path | None = None

    @property
    def summary(self) -> str:
        return " ".join(self.doc.strip().split("\n\n")[0].split())

    def build(self) -> list[Case]:
        cases = list(self.cases())
        ids = {c.id for c in cases}
        for what, named in (("quick", self.quick), ("expectations", self.expectations)):
            unknown = set(named) - ids
            if unknown:
                raise ValueError(f"family {self.name!r}: {what} names unknown cases {sorted(unknown)}")
        wrong = sorted(c.id for c in cases if c.family != self.name)
        if wrong:
            raise ValueError(f"family {self.name!r}: cases {wrong[:3]} say another family")
        unknown_traits = sorted({t for c in cases for t in c.traits} - set(TRAITS))
        if unknown_traits:
            raise ValueError(f"family {self.name!r}: unknown traits {unknown_traits}; known: {sorted(TRAITS)}")
        return [self.finish(c) for c in cases]

    def finish(self, case: Case) -> Case:
        """``case`` as the table holds it: its quick-tier mark, its known
        failure, its sample inputs checked and its tolerances resolved (the
        family default loosened by its traits, one per output)."""
        tolerances = tuple(resolve(self.tolerance, f"{self.name} default", case.all_traits, qspec, case.quantized)
                           for qspec in case.output_qspecs)
        return dataclasses.replace(case, quick=case.id in self.quick, expect=self.expectations.get(case.id, case.expect),
                                   inputs=self._sample_inputs(case), tolerances=tolerances)

    def _sample_inputs(self, case: Case) -> tuple:
        """The case's inputs, each file input resolved against :attr:`root`
        and checked now (it exists, is read without executing code, holds
        the declared shape and dtype), so a bad sample stops the run at
        collection with the case and argument named."""
        inputs = tuple(dataclasses.replace(s, root=self.root) if s.kind == "file" else s for s in case.inputs)
        for index, spec in enumerate(inputs):
            if spec.kind == "file":
                try:
                    spec.load()
                except ValueError as error:
                    raise ValueError(f"family {self.name!r}, case {case.id}, input {index}: {error}") from None
        return inputs


#: Every family known to this process, by name (the built-in ones and those
#: of ``--vgf-cases`` files).
FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    existing = FAMILIES.get(family.name)
    if existing is not None and existing is not family:
        raise ValueError(f"family {family.name!r} is registered twice")
    FAMILIES[family.name] = family
    return family


def load_case_file(path: str | Path) -> list[Family]:
    """The families a case file declares (``FAMILY`` or ``FAMILIES``), registered.

    The file's directory goes on ``sys.path`` (as pytest does for a test
    module's), so a case file imports the team's models beside it
    (``from models import Thumbnailer``) however pytest was started, and its
    families resolve relative sample-input paths against it."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--vgf-cases: {str(path)!r} is not a file")
    path = path.resolve()
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"vgf_cases_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.export looks models' classes up by module name
    spec.loader.exec_module(module)
    declared = getattr(module, "FAMILIES", None) or ([module.FAMILY] if hasattr(module, "FAMILY") else [])
    if not declared or not all(isinstance(f, Family) for f in declared):
        raise ValueError(f"--vgf-cases: {path} must define FAMILY (a vgf_conformance.cases.Family) "
                         "or FAMILIES (a list of them)")
    return [register(dataclasses.replace(f, root=f.root or path.parent)) for f in declared]


def build_table(families: Iterable[Family]) -> dict[str, Case]:
    """Case id -> case, over ``families``, checked."""
    table: dict[str, Case] = {}
    for family in families:
        for case in family.build():
            if case.id in table:
                raise ValueError(f"duplicate case id {case.id!r} (families {table[case.id].family!r} "
                                 f"and {family.name!r})")
            table[case.id] = case
    return table
