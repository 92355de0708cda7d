"""The workaround ledger: every workaround in the export flow, named.

The entries live in ``workarounds.toml`` (data, reviewed like a golden). Each
entry says what the workaround does, what breaks without it (with the
upstream issue where there is one) and which conformance cases show it. All
are on by default; ``export_model(..., disable_workarounds=[...])`` turns
named ones off, which is how the suite checks, on whatever ExecuTorch is
installed, that each is still needed (``vgf_conformance/test_workarounds.py``).

The Arm backend patches are listed in :mod:`vgf_export.patches` and ledgered
the same way by name.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Iterable


@dataclasses.dataclass(frozen=True)
class Workaround:
    name: str
    what: str
    without_it: str
    upstream: str
    #: Conformance cases that fail or change without the workaround.
    probes: tuple[str, ...]


def _load(path: Path) -> dict[str, Workaround]:
    with path.open("rb") as f:
        table = tomllib.load(f)
    return {name: Workaround(name=name, probes=tuple(entry.pop("probes")), **entry)
            for name, entry in table.items()}


#: The ledger, kept as data in ``workarounds.toml`` beside this module.
WORKAROUNDS: dict[str, Workaround] = _load(Path(__file__).with_name("workarounds.toml"))


def check_disabled(disable_workarounds: Iterable[str]) -> frozenset[str]:
    disabled = frozenset(disable_workarounds)
    unknown = sorted(disabled - set(WORKAROUNDS))
    if unknown:
        raise ValueError(
            f"disable_workarounds names unknown workarounds {unknown}; "
            f"known: {sorted(WORKAROUNDS)}"
        )
    return disabled
