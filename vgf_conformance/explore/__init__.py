"""``python -m vgf_conformance explore``: find what breaks, by drawing cases.

The explorer draws resize and grid_sample cases from the same space as the
case table (modes, scale factors as fractions or sizes, per axis,
``recompute_scale_factor``, odd and non-square sizes, channels, batch, int8 /
int16 / float / mixed IO, PT2E off; grid_sample channels, modes, padding,
align_corners, grids, grid sizes, IO variants), builds each as a real
:class:`~vgf_conformance.cases.Case` with the family's own builder, exports it
with the suite's ``run_case`` in a child process with a timeout, and checks it
with the suite's own tests, oracles and tolerances. Failing draws are grouped
by signature and each group is shrunk by Hypothesis to its smallest case;
``findings.md`` / ``findings.json`` in the out directory say, per signature,
the minimal case, the error or worst element, the RESIZE attributes against
PyTorch's sampling, and a ready-to-paste case entry with its Expectation.

Modules:

| module | idea |
|---|---|
| ``__main__.py`` | the command line (``--budget``, ``--seed``, ``--family``, ``--vulkan``, ``--out``, ...) |
| ``space.py`` | the strategies and the domain a draw is held to |
| ``entry.py`` | a draw as its case-table entry (a builder call) and the case built from that text |
| ``explorer.py`` | the two phases (drawing via ``fuzz_one_input``, shrinking per signature), outcome cache, budget, progress |
| ``worker.py`` | the draw child: one process, a timeout per draw, killed and replaced on a hang or crash |
| ``evaluate.py`` | one draw in the child: ``run_case`` and the suite's test functions |
| ``signature.py`` | failure signatures (stage + error class, comparison + size bucket, ...), one exception class each |
| ``sampling.py`` | a RESIZE's sampling positions against PyTorch's |
| ``findings.py`` | a run's summary, ``findings.json`` and ``findings.md`` |
| ``faults.py`` | planted faults for the explorer's own tests (``VGF_EXPLORE_FAULT``) |
| ``draw.py`` | ``python -m vgf_conformance draw '<json>'``: rerun one draw, in process |
"""
