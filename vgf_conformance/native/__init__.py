"""ExecuTorch's own grid-sampler lowering next to the project's (issue 14, part 4).

``python -m vgf_conformance native`` exports each grid_sample case and each
flow-warp composite the upstream way (``export_model(...,
grid_sampler_lowering="upstream")``: no GridSamplerBackend, no routing), with
and without ``glslc`` on PATH, runs it on the Vulkan tier, and compares its
numerics with the project's path on the same references. It answers when the
``grid-sampler-routing`` workaround (``vgf_export/workarounds.toml``) can go.

| module | idea |
|---|---|
| ``evaluate.py`` | one case, both paths (in the worker child) |
| ``worker.py`` | the worker child (the explorer's protocol: timeout per case, its own process group) |
| ``report.py`` | outcome and verdict per case, the summary, results.md/json and the docs page |
| ``__main__.py`` | the command |
"""

from __future__ import annotations

#: Composite cases that sample with a grid (flow warps, base grid + flow).
COMPOSITE_PREFIXES = ("flow-warp-", "basegrid-flow-")


def default_cases() -> list[str]:
    """The grid_sample family and the flow-warp composites, in table order."""
    from vgf_conformance.cases import CASES

    return [cid for cid, case in CASES.items()
            if case.family == "grid_sample" or (case.family == "composite" and cid.startswith(COMPOSITE_PREFIXES))]
