"""The stack's Python each case's export reaches: line and branch coverage.

A regression that depends on a value (a size's parity, a ratio that reaches
16) changes nothing a golden feature can see; whether the matrix can catch
it depends on which lines and branches of the lowering its cases take. So
with ``--vgf-stack-coverage DIR`` each process that runs cases records, during
each case's export only, the lines and branches (arcs) of
:data:`STACK_PACKAGES` that the export reaches (coverage.py, the run key as
its context), into ``DIR/.coverage.<worker>``.

``python -m vgf_conformance stack-coverage DIR [DIR ...] [--json FILE]``
reads them (several directories: the shards of one run, merged; a run key
in two of them is refused): the lines and branches the run reached, each
case's count, and how many cases reach each (a line reached by every case
weighs nothing; one reached by few is what a tier must hold). ``--json``
writes, per stack file, each line and branch with the cases that reach it;
``--record`` the figures the quick tier is held by
(:mod:`vgf_conformance.harness.schedule.stack_reach`); ``--blind-spots
REPORT_DIR`` the stack functions no case reaches, as JSON, Markdown and the
report's page ``stack.html``
(:mod:`vgf_conformance.harness.measurements.blind_spots`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

from vgf_conformance.harness.schedule import stack_reach

#: The stack's Python that lowers a case: ExecuTorch's Arm backend, exir's
#: passes and emitter, torchao's PT2E quantization, and our export package.
STACK_PACKAGES = ("executorch.backends.arm", "executorch.exir", "torchao.quantization.pt2e", "vgf_export")
#: Where a data file's name says which process wrote it.
DATA_PREFIX = ".coverage."


class StackCoverage:
    """One process's recorder: :meth:`context` measures a case's export."""

    def __init__(self, directory: Path, name: str) -> None:
        self.data_file = Path(directory) / f"{DATA_PREFIX}{name}"
        self._coverage = None

    @classmethod
    def of_worker(cls, config) -> "StackCoverage | None":
        directory = config.getoption("--vgf-stack-coverage")
        if not directory:
            return None
        Path(directory).mkdir(parents=True, exist_ok=True)
        return cls(Path(directory), getattr(config, "workerinput", {}).get("workerid", "main"))

    @contextlib.contextmanager
    def context(self, run_key: str):
        """Measure what runs in this thread (and threads it starts) as ``run_key``'s."""
        if self._coverage is None:
            import coverage

            # coverage.py looks each source package up with sys.modules saved and restored: a
            # package not imported yet would be imported (torch with it), then dropped, and a
            # C extension such as torch._C cannot be imported twice in one process.
            for package in STACK_PACKAGES:
                importlib.import_module(package)
            self._coverage = coverage.Coverage(data_file=str(self.data_file), source_pkgs=list(STACK_PACKAGES),
                                               branch=True, config_file=False)
            # The stack is imported before its first export: measured from then on, as it should be.
            self._coverage.set_option("run:disable_warnings",
                                      ["module-not-measured", "module-not-imported", "no-data-collected"])
        self._coverage.start()
        self._coverage.switch_context(run_key)
        try:
            yield
        finally:
            self._coverage.stop()

    def save(self) -> None:
        if self._coverage is not None:
            self._coverage.save()

    def take(self, run_key: str) -> set[str]:
        """The ``file:line``s measured as ``run_key``'s, then forgotten (the
        explorer's draw child asks after each draw and keeps no data file)."""
        if self._coverage is None:
            return set()
        data = self._coverage.get_data()
        data.set_query_contexts([f"^{re.escape(run_key)}$"])
        found = {f"{_where(name)}:{n}" for name in data.measured_files() for n in data.lines(name) or ()}
        self._coverage.erase()
        return found


def _where(path: str) -> str:
    """A stack file's path from its package root: no machine's paths."""
    for marker in ("/site-packages/", "/vgf_export/"):
        if marker in path:
            head, _, rest = path.partition(marker)
            return rest if marker == "/site-packages/" else f"vgf_export/{rest}"
    return path


def reached(directory: Path) -> dict[str, dict[str, set[str]]]:
    """Run key -> {"lines": {"file:line"}, "arcs": {"file:from->to"}} over the
    data files of ``directory`` (a branch is an arc between two lines)."""
    import coverage

    files = sorted(Path(directory).glob(f"{DATA_PREFIX}*"))
    if not files:
        raise ValueError(f"{directory}: no {DATA_PREFIX}* data files (a run with --vgf-stack-coverage "
                         f"{directory} writes them)")
    by_case: dict[str, dict[str, set[str]]] = {}
    for path in files:
        data = coverage.CoverageData(str(path))
        data.read()
        measured = sorted(data.measured_files())
        for key in sorted(c for c in data.measured_contexts() if c):
            data.set_query_contexts([f"^{re.escape(key)}$"])
            entry = by_case.setdefault(key, {"lines": set(), "arcs": set()})
            for name in measured:
                where = _where(name)
                entry["lines"].update(f"{where}:{n}" for n in data.lines(name) or ())
                entry["arcs"].update(f"{where}:{a}->{b}" for a, b in data.arcs(name) or () if a > 0 and b > 0)
    return by_case


def reached_in(directories: list[Path]) -> dict[str, dict[str, set[str]]]:
    """:func:`reached` over several directories (the shards of one run, whose
    data files have the same names), merged; a ``ValueError`` names both
    directories of a run key found in two."""
    by_case: dict[str, dict[str, set[str]]] = {}
    source: dict[str, Path] = {}
    for directory in directories:
        for key, entry in reached(directory).items():
            if key in source:
                raise ValueError(f"run key {key!r} is in both {source[key]} and {directory}: give each "
                                 f"shard's directory once, and directories of one run")
            by_case[key], source[key] = entry, directory
    return by_case


def summary(by_case: dict[str, dict[str, set[str]]]) -> dict:
    """What the run reached, and how many of its cases reach each line and branch."""
    out = {"cases": len(by_case)}
    for what in ("lines", "arcs"):
        counts = Counter(x for entry in by_case.values() for x in entry[what])
        out[what] = {"reached": len(counts),
                     "by every case": sum(1 for n in counts.values() if n == len(by_case)),
                     "by one case": sum(1 for n in counts.values() if n == 1),
                     "by 2 to 5 cases (not every)": sum(1 for n in counts.values()
                                                        if 2 <= n <= 5 and n < len(by_case))}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance stack-coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directories", type=Path, nargs="+", metavar="DIR",
                        help="the --vgf-stack-coverage directory of a run (or one per shard of a run)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write each stack file's lines and branches with the cases that reach them")
    parser.add_argument("--record", type=Path, nargs="?", const=stack_reach.RECORDED, default=None,
                        help="write the recorded figures the quick tier is chosen and checked by "
                             "(default vgf_conformance/stack_coverage.json; a run of the whole matrix)")
    parser.add_argument("--blind-spots", type=Path, default=None, metavar="REPORT_DIR",
                        help="write the stack functions no case reaches: REPORT_DIR/stack-blind-spots.json, "
                             ".md and stack.html (report.html links it when REPORT_DIR holds a report)")
    args = parser.parse_args(argv)
    if args.blind_spots and args.blind_spots.exists() and not args.blind_spots.is_dir():
        parser.error(f"--blind-spots: {args.blind_spots} is a file; give a report directory")
    try:
        by_case = reached_in(args.directories)
    except ValueError as error:
        parser.error(f"directories: {error}")
    print(json.dumps(summary(by_case), indent=1))
    if args.json:
        table: dict[str, dict[str, list[str]]] = {}
        for key, entry in sorted(by_case.items()):
            for what in ("lines", "arcs"):
                for x in entry[what]:
                    table.setdefault(what, {}).setdefault(x, []).append(key)
        args.json.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.record:
        recorded = stack_reach.record(by_case, stack_versions())
        args.record.write_text(stack_reach.dumps(recorded))
        print(f"wrote {args.record}: {len(recorded['groups'])} groups of lines and branches over "
              f"{len(recorded['cases'])} cases", file=sys.stderr)
    if args.blind_spots:
        from vgf_conformance.harness.measurements import blind_spots

        lines = set().union(*(entry["lines"] for entry in by_case.values()))
        try:
            roots = blind_spots.stack_roots(STACK_PACKAGES)
        except ValueError as error:
            parser.error(f"--blind-spots: {error}")
        files, unparsed = blind_spots.find(lines, roots)
        listing = blind_spots.listing(files, unparsed, stack_versions(), len(by_case))
        written = blind_spots.write(listing, args.blind_spots)
        print(f"wrote {', '.join(map(str, written))}: {sum(a['functions_unreached'] for a in listing['areas'])} "
              f"of {sum(a['functions'] for a in listing['areas'])} stack functions unreached", file=sys.stderr)
    return 0


def stack_versions() -> dict[str, str]:
    """The versions of the measured stack's distributions."""
    import importlib.metadata

    return {name: importlib.metadata.version(name) for name in ("executorch", "torch", "torchao")}
