"""Nothing lost: which goldens a run keeps, reports stale, and removes.

syrupy's own unused-snapshot detection is off for goldens
(``GoldenExtension.discover_snapshots`` claims no file): it would delete the
golden of every case that fails or xfails before its golden is compared, and
every ``*.json`` under the golden directory. Instead, on the process that
gathers the run's results (the xdist controller, or the only process):

* a golden is **stale** when its case is no longer in the table
  (:mod:`vgf_conformance.goldens.stale`: top-level ``<valid id>.json`` files only);
  a run that ran any case reports each stale golden and fails, whatever paths
  pytest was given; ``--snapshot-update`` on a full, unfiltered run removes
  them (and only them); a sharded run skips the check (its unsharded step runs
  ``python -m vgf_conformance stale``);
* under ``--snapshot-update``, a case whose ``test_golden`` did not compare
  (the export failed, the case xfailed, was skipped or errored) keeps its
  stored golden byte for byte, and the run lists those cases.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vgf_conformance.goldens.stale import golden_files, run_key, stale_goldens

#: workeroutput key: the ids of the run's whole case table (a worker loads it).
TABLE_KEY = "vgf_case_table"


def is_full_run(config) -> bool:
    """Whether this run selects every test it collects: no ``-k``, ``-m``,
    node ids, ``--lf``/``--ff``/``--sw``, shard or ``--vgf-case``."""
    option = config.option
    filtered = (
        getattr(option, "keyword", "") or getattr(option, "markexpr", "")
        or getattr(option, "lf", False) or getattr(option, "failedfirst", False)
        or getattr(option, "stepwise", False) or getattr(option, "deselect", None)
        or config.getoption("--vgf-shard") or config.getoption("--vgf-case")
        or any("::" in str(arg) for arg in config.args)
    )
    return not filtered


class GoldenKeeper:
    """Registered by the plugin on the process that gathers results."""

    def __init__(self, config, case_of, table_ids) -> None:
        self.config = config
        self.case_of = case_of  # node id -> case id or None
        self.table_ids = table_ids  # () -> the table's case ids, or None when unknown here
        self.worker_tables: list[list[str]] = []
        self.golden_outcomes: dict[str, str] = {}  # case id -> test_golden's outcome
        self.ran_cases = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        ids = getattr(node, "workeroutput", {}).get(TABLE_KEY)
        if ids is not None:
            self.worker_tables.append(ids)

    def pytest_runtest_logreport(self, report) -> None:
        case_id = self.case_of(report.nodeid)
        if case_id is None:
            return
        self.ran_cases = True
        if report.nodeid.split("::")[-1].startswith("test_golden["):
            if report.when == "call" or report.failed or report.skipped:
                passed = report.passed and not hasattr(report, "wasxfail")
                self.golden_outcomes[case_id] = "passed" if passed else (
                    "xfailed" if hasattr(report, "wasxfail") else report.outcome)

    def _table(self) -> set[str] | None:
        if self.worker_tables:
            return set(self.worker_tables[0])
        ids = self.table_ids()
        return set(ids) if ids is not None else None

    def _say(self, text: str, red: bool = False) -> None:
        writer = self.config.get_terminal_writer()
        writer.line(text, red=red, yellow=not red)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        if not self.ran_cases:
            return
        from vgf_conformance.goldens import store

        directory = store.GOLDEN_DIR
        updating = bool(getattr(self.config.option, "update_snapshots", False))
        if updating:
            kept = sorted(c for c, outcome in self.golden_outcomes.items()
                          if outcome != "passed" and store.golden_path(c).exists())
            if kept:
                self._say(f"vgf goldens: kept {len(kept)} stored golden(s) untouched: their case did not "
                          f"reach its golden comparison ({', '.join(f'{c} [{self.golden_outcomes[c]}]' for c in kept)})")
        if self.config.getoption("--vgf-shard"):
            return  # the unsharded step checks: python -m vgf_conformance stale
        table = self._table()
        if table is None:
            return
        stale = stale_goldens(directory, table)
        if not stale:
            return
        if updating and is_full_run(self.config):
            for path in stale:
                path.unlink()
                self._say(f"vgf goldens: removed stale golden {path.name} (run {run_key(directory, path)} is no "
                          "longer in the table)")
            return
        for path in stale:
            self._say(f"vgf goldens: stale golden {path} (run {run_key(directory, path)} is not in the table)", red=True)
        how = ("a full, unfiltered run with --snapshot-update removes them" if not updating
               else "this run is filtered, so nothing was removed: run the whole suite with --snapshot-update")
        self._say(f"vgf goldens: {len(stale)} stale golden(s): {how} (or delete the files)", red=True)
        if not getattr(self.config.option, "warn_unused_snapshots", False):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def table_ids_of(config, session_cases) -> list[str] | None:
    """The ids of the session's whole case table, where this process loaded it."""
    try:
        return list(session_cases(config, whole=True))
    except Exception:  # noqa: BLE001 - the table failed to load: collection reports that
        return None


def golden_dir_refusal(golden_dir: str | None, case_files: list[str], builtin: Path) -> str | None:
    """Why ``--vgf-golden-dir`` is refused for a team's case files, or None:
    the built-in golden directory (or a folder holding it) is not a team's."""
    if not golden_dir or not case_files:
        return None
    chosen = Path(golden_dir).resolve()
    if chosen == builtin or chosen in builtin.parents:
        return (f"--vgf-golden-dir {golden_dir} holds the built-in goldens ({builtin}); a case file's "
                "goldens need a directory of their own")
    return None


def foreign_table_refusal(config, session_cases) -> str | None:
    """Why the run's golden directory (``--vgf-golden-dir``, or the
    ``VGF_GOLDEN_DIR`` environment variable) is refused for its case table,
    or None. A golden directory belongs to one table: one that holds goldens
    none of which is a case of this table is another table's (a team's,
    pointed at with the built-in table), whose goldens a full
    ``--snapshot-update`` would delete as stale. Checked when the suite's
    case tests are parametrized, before any case runs (a run of other tests
    that use the golden extension is not the table's)."""
    option = config.getoption("--vgf-golden-dir")
    chosen, what = (option, "--vgf-golden-dir") if option else (os.environ.get("VGF_GOLDEN_DIR"), "VGF_GOLDEN_DIR")
    if not chosen or not Path(chosen).is_dir():
        return None
    found = golden_files(Path(chosen))
    if not found:
        return None
    table = set(session_cases(config, whole=True))
    if set(found) & table:
        return None
    which = "the case files given with --vgf-cases" if config.getoption("--vgf-cases") else "the built-in table"
    sample = ", ".join(sorted(found)[:3]) + (", ..." if len(found) > 3 else "")
    return (f"{what} {chosen} holds {len(found)} golden(s) ({sample}), none of them a case of {which}: it is "
            "another table's golden directory, and a full --snapshot-update would delete its goldens as stale. "
            "Run it with that table's --vgf-cases, or choose another directory.")

