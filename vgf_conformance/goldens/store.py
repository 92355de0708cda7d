"""Goldens on disk: one readable JSON file per case, kept by syrupy.

Every golden lives in :data:`GOLDEN_DIR` (``golden/cases/<case id>.json``),
whichever test module asserts it: :func:`golden_path` says where. The
``VGF_GOLDEN_DIR`` environment variable names another directory for those
files (the suite's own tests use it). A golden is serialized with sorted
keys, so a diff reads section by section; :func:`changed_sections` and
:func:`describe_changes` compare a stored golden with a new one, section by
section, in the order of the registry (:mod:`vgf_conformance.goldens.sections`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from syrupy.data import Snapshot, SnapshotCollection, SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from vgf_conformance.goldens import compliance
from vgf_conformance.goldens.sections import SECTIONS, build_golden  # noqa: F401 - re-exported
from vgf_conformance.text import atomic_write

#: The built-in table's goldens, ``<case id>.json`` each.
BUILTIN_GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden" / "cases"
#: Where this process reads and writes goldens: the built-in directory, or the
#: VGF_GOLDEN_DIR environment variable, or ``--vgf-golden-dir`` (set_golden_dir).
GOLDEN_DIR = Path(os.environ.get("VGF_GOLDEN_DIR") or BUILTIN_GOLDEN_DIR).resolve()


def set_golden_dir(path: str | Path) -> None:
    """Read and write this process's goldens in ``path`` (``--vgf-golden-dir``)."""
    global GOLDEN_DIR
    GOLDEN_DIR = Path(path).resolve()
#: The test function whose snapshots are goldens (syrupy names snapshots by test).
GOLDEN_TEST = "test_golden"


def golden_path(case_id: str) -> Path:
    """Where the golden of ``case_id`` (a run key: ``<flow>/<case id>`` in
    another flow than the default) is stored."""
    return GOLDEN_DIR / f"{case_id}.json"


def serialize(golden: dict) -> str:
    return json.dumps(golden, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _section_names(stored: dict, current: dict) -> list[str]:
    """The sections of two goldens: the registry's, then any other key."""
    names = [name for name in SECTIONS if name in stored or name in current]
    return names + sorted((set(stored) | set(current)) - set(SECTIONS))


#: The section a golden that is not JSON changed in, for the report.
NOT_JSON = "<not JSON>"


def parse_stored(stored_text: str | None) -> dict | None:
    """A stored golden's content; None when there is none or it is not a
    JSON object (a merge conflict's markers, a truncated file)."""
    try:
        content = json.loads(stored_text) if stored_text is not None else None
    except ValueError:
        return None
    return content if isinstance(content, dict) else None


def mismatch_message(case_id: str, stored: Path, stored_text: str | None, golden: dict, changed: list[str],
                     accept: str) -> str:
    """What a golden that does not match says: the fields outside their
    modes, or that there is none, or that the stored file is not JSON; and
    the command that accepts the new golden (which rewrites any of them)."""
    if stored_text is None:
        what = f"no golden for {case_id}"
    elif parse_stored(stored_text) is None:
        what = (f"the stored golden of {case_id} is not a JSON object (a merge conflict's markers, a cut file?): "
                f"{stored_text[:120]!r}...")
    else:
        what = compliance.describe(case_id, verdict(stored_text, golden), changed)
    return f"{what}\n({stored})\nIf the change is intended, accept it with:\n  {accept}"


def verdict(stored_text: str, golden: dict) -> compliance.Verdict:
    """The stored golden against a new one, each field in its compliance
    mode (:mod:`vgf_conformance.goldens.compliance`)."""
    return compliance.compare(json.loads(stored_text), json.loads(serialize(golden)))


def changed_sections(stored_text: str | None, golden: dict) -> list[str]:
    """Sections that changed against the stored golden, outside the compliance
    modes (a drift inside its band is no change); "<new>" when none is stored."""
    if stored_text is None:
        return ["<new>"]
    if parse_stored(stored_text) is None:
        return [NOT_JSON]
    changed = verdict(stored_text, golden).changed
    return [k for k in _section_names(json.loads(stored_text), golden) if k in changed]


def describe_changes(stored_text: str | None, golden: dict | None, failed_stage: str | None = None) -> list[str]:
    """What changed against the stored golden, in words that group well
    across cases ("no longer delegated", "tosa changed", ...): each section's
    own wording, in registry order; a section the registry does not know
    (any more) is "<name> changed"."""
    if stored_text is None:
        return ["new case (no golden)"] if golden is not None else []
    if golden is None:
        return [f"now fails at {failed_stage} (exported on the baseline)"]
    if parse_stored(stored_text) is None:
        return ["the stored golden is not JSON (a merge conflict?)"]
    stored, current = json.loads(stored_text), json.loads(serialize(golden))
    changed = compliance.compare(stored, current).changed
    changes = []
    for name in _section_names(stored, current):
        if name not in changed:
            continue  # equal, or within the bands of its compliance modes
        if name in SECTIONS:
            changes += SECTIONS[name].changes(stored, current)
        elif stored.get(name) != current.get(name):
            changes.append(f"{name} changed")
    return changes


# ---------------------------------------------------------------------------
# syrupy extension
# ---------------------------------------------------------------------------
def case_id_of(test_location) -> str:
    """The case id in a test's name, e.g. ``test_golden[<case id>]``."""
    name = test_location.nodename or ""
    return name[name.index("[") + 1 : name.rindex("]")] if "[" in name else name


class GoldenExtension(SingleFileSnapshotExtension):
    """Stores each case's golden as ``GOLDEN_DIR/<case id>.json`` (a run of
    another flow: ``GOLDEN_DIR/<flow>/<case id>.json``).

    syrupy names a snapshot after its test (``test_golden[<case id>]``) and
    puts it next to the test module; this extension keeps that name
    internally but uses the bare case id as the file name and GOLDEN_DIR as
    the directory for every test. syrupy discovers none of them: stale
    goldens are found and removed by the plugin
    (:mod:`vgf_conformance.harness.plugin.golden_keeper`), never a failing case's.
    """

    _write_mode = WriteMode.TEXT
    file_extension = "json"

    def serialize(self, data, *, exclude=None, include=None, matcher=None) -> str:
        return serialize(data)

    def matches(self, *, serialized_data, snapshot_data) -> bool:
        """Each field in its compliance mode: a golden whose every difference
        is inside its band matches, so ``--snapshot-update`` leaves its file
        byte-identical (machine noise never churns a golden)."""
        try:
            return compliance.compare(json.loads(snapshot_data), json.loads(serialized_data)).matches
        except ValueError:  # not JSON (a hand-edited file): only equal text matches
            return serialized_data == snapshot_data

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection, name_order=None) -> None:
        """Each golden written whole or not at all (a killed run never leaves half a golden)."""
        location = Path(snapshot_collection.location)
        location.parent.mkdir(parents=True, exist_ok=True)  # a flow's folder
        atomic_write(location, next(iter(snapshot_collection)).data)

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(GOLDEN_DIR)

    @classmethod
    def discovery_dirname(cls, *, test_location) -> str:
        return str(GOLDEN_DIR)

    @classmethod
    def get_file_basename(cls, *, test_location, index) -> str:
        return case_id_of(test_location)

    def discover_snapshots(self, *, test_location, ignore_extensions=None) -> SnapshotCollections:
        """None: syrupy's unused detection would delete the golden of every
        case that fails or xfails before its comparison, and any ``*.json``
        under the directory. Stale goldens are the plugin's to find and remove
        (:mod:`vgf_conformance.harness.plugin.golden_keeper`)."""
        return SnapshotCollections()

    def read_snapshot_collection(self, *, snapshot_location: str) -> SnapshotCollection:
        collection = SnapshotCollection(location=snapshot_location)
        run_key = Path(snapshot_location).relative_to(GOLDEN_DIR).with_suffix("").as_posix()
        collection.add(Snapshot(name=f"{GOLDEN_TEST}[{run_key}]"))
        return collection

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location: str) -> bool:
        return Path(snapshot_location) == golden_path(case_id_of(test_location))
