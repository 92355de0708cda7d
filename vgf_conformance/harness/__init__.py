"""The machinery around the cases, one room per job (lowest first; a room
imports only from the rooms before it):

- :mod:`~vgf_conformance.harness.schedule`: which cases a run or shard runs,
  in which batches and order, and the quick tier;
- :mod:`~vgf_conformance.harness.execution`: one case's export and runs, with
  its watchdog, a hung case's end, and the scheduler that survives a lost worker;
- :mod:`~vgf_conformance.harness.reporting`: ``report.json``, ``report.md``,
  ``report.html``, report diffs, skips, error maps;
- :mod:`~vgf_conformance.harness.measurements`: the measurements behind the
  bounds (slack, cross-machine drift, the model tier's seeds);
- :mod:`~vgf_conformance.harness.candidates`: a candidate stack's pins,
  preflight and compatibility matrix;
- :mod:`~vgf_conformance.harness.plugin`: the pytest plugin (its hooks, and
  the options, session, records and golden keeper they call).

The modules' paths before these rooms (``vgf_conformance.harness.runner``, ...)
still import, and ``python -m`` still runs them, for one release
(:mod:`~vgf_conformance.harness.moved`).
"""

from vgf_conformance.harness.moved import install as _install

_install()
