"""Names the export flow and the conformance suite share, defined once.

Backend ids, the stages of the flow, the artifact file names, and the
workaround ledger. This module imports nothing heavy: the suite's pytest
plugin reads it in processes that never export anything.

The workaround ledger names every workaround in the export flow. The entries
live in ``workarounds.toml`` (data, reviewed like a golden). Each entry says
what the workaround does, what breaks without it (with the upstream issue
where there is one) and which conformance cases show it. All are on by
default; ``export_model(..., disable_workarounds=[...])`` turns named ones off,
which is how the suite checks, on whatever ExecuTorch is installed, that each
is still needed (``vgf_conformance/test_workarounds.py``). The Arm backend
patches are listed in :mod:`vgf_export.patches` and ledgered the same way by
name.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Iterable

#: ExecuTorch's Arm VGF backend (``VgfBackend.__name__``).
VGF_BACKEND = "VgfBackend"
#: This package's grid-sampler backend (:mod:`vgf_export.grid_sampler_backend`).
GRID_SAMPLER_BACKEND = "GridSamplerBackend"

#: The stages of ``export_model``, in order; an ``ExportStageError`` names one.
STAGES = ("export", "quantize", "partition", "lower", "convert", "serialize")

#: Artifact names under ``artifacts_root`` (see :mod:`vgf_export.artifacts`).
PROGRAM_FILE = "program.pte"
DELEGATES_DIR = "delegates"
IO_QUANT_PARAMS_FILE = "io_quant_params.json"
REPORT_FILE = "report.json"
INTERMEDIATES_DIR = "vgf_intermediates"

#: The file stem of each backend's delegate files: ``NN_<stem>.<suffix>``.
BACKEND_FILE_STEMS = {VGF_BACKEND: "vgf", GRID_SAMPLER_BACKEND: "grid_sampler"}
_BACKEND_OF_STEM = {stem: backend for backend, stem in BACKEND_FILE_STEMS.items()}
_DELEGATE_FILE = re.compile(r"(\d+)_(\w+)\.(\w+)")


def delegate_file_name(index: int, backend: str, suffix: str) -> str:
    """``NN_<stem>.<suffix>``: NN is the delegate's position among the
    program's delegate calls."""
    return f"{index:02d}_{BACKEND_FILE_STEMS.get(backend, backend)}.{suffix}"


@dataclasses.dataclass(frozen=True)
class DelegateFile:
    """One file of ``delegates/``: which delegate call it belongs to, and what it is."""

    index: int
    backend: str
    path: Path

    @property
    def kind(self) -> str:
        """The file's suffix without the dot: ``tosa``, ``vgf``, ``json``, ``bin``."""
        return self.path.suffix.lstrip(".")

    @classmethod
    def parse(cls, path: str | Path) -> "DelegateFile":
        path = Path(path)
        match = _DELEGATE_FILE.fullmatch(path.name)
        if match is None:
            raise ValueError(f"delegate file {path.name!r}: expected NN_<backend>.<suffix>")
        index, stem, _ = match.groups()
        return cls(int(index), _BACKEND_OF_STEM.get(stem, stem), path)


# The workaround ledger.

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
