"""Which files of a golden directory are goldens, and which goldens are stale.

A golden is a file ``<case id>.json`` at the top level of the golden
directory (or ``<flow>/<case id>.json`` for a run of another flow than the
default, in the folder of a flow the table runs), its name a valid case id
(``vgf_conformance.text.CASE_ID_PATTERN``), holding a JSON object with a
``case`` section. Nothing else there is ours: a README, the files of any other
subfolder, a ``notes.json`` are never reported or removed. A golden is
*stale* when its case is no longer in the table; only such a golden is
removed, and only by a full, unfiltered ``--snapshot-update`` run
(:mod:`vgf_conformance.harness.plugin.golden_keeper`): a case that fails, errors, is skipped
or xfails keeps its stored golden untouched.

``python -m vgf_conformance stale [--golden-dir DIR] [--vgf-cases FILE ...]``
lists the stale goldens of a table and exits 1 when there are any: the one
unsharded step of a sharded run (each shard skips the check).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vgf_conformance.text import CASE_ID_PATTERN as ID_PATTERN

SUFFIX = ".json"


def is_golden(path: Path) -> bool:
    """Whether ``path`` is a golden: a top-level ``<valid id>.json`` holding a
    JSON object with a ``case`` section (every golden states its case; a
    ``notes.json`` of the team's is not one)."""
    if not (path.is_file() and path.name.endswith(SUFFIX) and ID_PATTERN.fullmatch(path.name[: -len(SUFFIX)])):
        return False
    try:
        content = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(content, dict) and "case" in content


def golden_files(directory: Path, flows=()) -> dict[str, Path]:
    """Run key -> its golden file, for every golden at the top level of
    ``directory`` and in the folders of ``flows`` (``<flow>/<case id>``)."""
    directory = Path(directory)
    if not directory.is_dir():
        return {}
    found = {path.name[: -len(SUFFIX)]: path for path in sorted(directory.iterdir()) if is_golden(path)}
    for flow in sorted(flows):
        if ID_PATTERN.fullmatch(flow) and (directory / flow).is_dir():
            found.update((f"{flow}/{path.name[: -len(SUFFIX)]}", path)
                         for path in sorted((directory / flow).iterdir()) if is_golden(path))
    return found


def run_key(directory: Path, path: Path) -> str:
    """The run key a golden file of ``directory`` stands for."""
    return Path(path).relative_to(directory).with_suffix("").as_posix()


def flows_of(run_keys) -> set[str]:
    """The flows (other than the default) that some of ``run_keys`` run in."""
    return {key.partition("/")[0] for key in run_keys if "/" in key}


def stale_goldens(directory: Path, run_keys) -> list[Path]:
    """The goldens in ``directory`` whose run is not among ``run_keys`` (the
    runs of every flow of the table: a flow a run does not lower keeps its goldens)."""
    keys = set(run_keys)
    return [path for key, path in golden_files(directory, flows_of(keys)).items() if key not in keys]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance stale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--golden-dir", type=Path, default=None,
                        help="the golden directory (default: the built-in golden/cases)")
    parser.add_argument("--vgf-cases", action="append", default=[], metavar="FILE",
                        help="the case files of a team's table (default: the built-in table)")
    args = parser.parse_args(argv)
    from vgf_conformance.cases import TABLE, build_table, flows, load_case_file
    from vgf_conformance.goldens.store import BUILTIN_GOLDEN_DIR

    if args.vgf_cases and args.golden_dir is None:
        parser.error("--vgf-cases needs --golden-dir: a case file's goldens live apart from the built-in ones")
    directory = args.golden_dir or BUILTIN_GOLDEN_DIR
    if not directory.is_dir():
        parser.error(f"--golden-dir: {directory} is not a directory")
    try:
        table = flows.expand(build_table([f for path in args.vgf_cases for f in load_case_file(path)])
                             if args.vgf_cases else TABLE, flows.FLOWS)
    except ValueError as error:
        parser.error(f"--vgf-cases: {error}")
    stale = stale_goldens(directory, table)
    for path in stale:
        print(f"stale golden: {path} (run {run_key(directory, path)} is not in the table)")
    print(f"{len(stale)} stale of {len(golden_files(directory, flows_of(table)))} goldens in {directory}")
    return 1 if stale else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("stale", "vgf_conformance.goldens.stale")
