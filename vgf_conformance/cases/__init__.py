"""The case table: every model the suite exports, declared once.

* :mod:`vgf_conformance.cases.case`: what a case is (:class:`Case`,
  :class:`InputSpec`, :class:`Expectation`, the id grammar);
* :mod:`vgf_conformance.cases.families`: one module (or package) per op family, each
  declaring its cases, default tolerance, pull-request tier and known
  failures (:class:`Family`); a new module there is a new family;
* :mod:`vgf_conformance.cases.tolerances`: the traits that loosen bounds, and how
  a case's tolerance is resolved;
* :mod:`vgf_conformance.cases.op_models`: the small models (one op or a few) the families export;
* :mod:`vgf_conformance.cases.zoo`: the model tier's realistic architectures;
* :mod:`vgf_conformance.cases.flows`: the ways of lowering a case (flows).

``TABLE`` is the built-in table (case id -> case); ``CASES`` its runs in the
gating flows (run key -> run: the table itself in the default flow).
"""

import importlib
import pkgutil

import vgf_conformance.cases.families as families
from vgf_conformance.cases.case import QSPECS, STAGES, Case, Expectation, measured_lsb
from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.cases.family import FAMILIES, Family, build_table, load_case_file, register
from vgf_conformance.cases.tolerances import check_traits
from vgf_conformance.cases import flows


def builtin_families() -> list[Family]:
    """The families of :mod:`vgf_conformance.cases.families`: each module's ``FAMILY``, registered."""
    return [register(importlib.import_module(f"{families.__name__}.{info.name}").FAMILY)
            for info in sorted(pkgutil.iter_modules(families.__path__), key=lambda i: i.name)]


BUILTIN_FAMILIES = builtin_families()
check_traits([f.tolerance for f in BUILTIN_FAMILIES])
TABLE = build_table(BUILTIN_FAMILIES)
CASES = flows.expand(TABLE)

__all__ = ["BUILTIN_FAMILIES", "CASES", "FAMILIES", "TABLE", "QSPECS", "STAGES", "Case", "Expectation", "Family",
           "InputSpec", "build_table", "load_case_file", "measured_lsb"]
