"""The harness modules' paths before its rooms, kept for one release.

A team's conftest or script may import ``vgf_conformance.harness.runner``
or run ``python -m vgf_conformance.harness.slack``: both still work, with a
DeprecationWarning naming the new path. The old path is the same module
object as the new one (no second copy of its state).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: The old module name under ``vgf_conformance.harness`` -> its path now.
MOVED = {
    "durations": "schedule.durations", "plan": "schedule.plan", "coverage": "schedule.coverage",
    "runner": "execution.runner", "batches": "execution.batches", "hangs": "execution.hangs",
    "report": "reporting.records", "summary": "reporting.summary", "publish": "reporting.publish",
    "html": "reporting.html", "diff": "reporting.diff", "case_log": "reporting.case_log",
    "machine": "reporting.machine", "skips": "reporting.skips", "errormaps": "reporting.errormaps",
    "slack": "measurements.slack", "drift": "measurements.drift", "model_bounds": "measurements.model_bounds",
    "compat": "candidates.compat", "preflight": "candidates.preflight",
    "options": "plugin.options", "session": "plugin.session", "recording": "plugin.recording",
    "progress": "plugin.progress", "golden_keeper": "plugin.golden_keeper",
}
PACKAGE = "vgf_conformance.harness"


def new_name(old: str) -> str | None:
    """The module's path now, for an old ``vgf_conformance.harness.X`` (None: not moved)."""
    parent, _, leaf = old.rpartition(".")
    return f"{PACKAGE}.{MOVED[leaf]}" if parent == PACKAGE and leaf in MOVED else None


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as the module at its new one; ``python -m`` runs its code."""

    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_file_location(fullname, importlib.util.find_spec(new).origin, loader=self)

    def create_module(self, spec):
        new = new_name(spec.name)
        warnings.warn(f"{spec.name} moved to {new}; the old path is kept for one release",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._spec = module.__spec__  # the import system sets __spec__ to the old one: put it back
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = self._spec

    def get_code(self, fullname):  # runpy: python -m OLD runs the new module's code
        new = new_name(fullname)
        return importlib.util.find_spec(new).loader.get_code(new)


def install() -> None:
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())
