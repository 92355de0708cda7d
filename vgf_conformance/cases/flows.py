"""Flows: the ways of lowering a case, one registry entry each (:data:`FLOWS`).

The case table says *what* is exported; a flow says *how*. A flow filters
the table and overrides a case's export options; it never copies a case, and
its runs draw the same seeded inputs as the case (ExecuTorch's
``backends/test/suite`` flows, with our goldens and strict expectations).

* ``vgf`` (the default): ``vgf_export`` as the reference export script runs
  it. Its runs keep the case ids, test ids and golden paths.
* ``without-bilinear-scale-factor``: the export with that workaround of the
  ledger off, on the bilinear resizes whose factor the lowering ignores
  without it: how each diverges is its expectation here.
* ``upstream-grid-sampler``: ExecuTorch's own grid-sampler lowering
  (``grid_sampler_lowering="upstream"``) on every case that samples a grid.

Another flow's run of a case is keyed ``<flow>/<case id>``: in test ids,
goldens (``golden/cases/<flow>/<case id>.json``), durations, artifacts and
reports. ``--vgf-flow NAME`` (repeatable, or ``all``) picks the flows of a
run; without it, the gating ones run. A new flow is one entry here.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Mapping

from vgf_conformance.cases.case import Case, Expectation
from vgf_conformance.text import DEFAULT_FLOW
from vgf_conformance.cases.families.resize.expectations import WITHOUT_BILINEAR_SCALE_FACTOR
from vgf_export.names import WORKAROUNDS

#: Every case test: a flow that names no ``checks`` runs them all.
ALL_CHECKS = None


@dataclasses.dataclass(frozen=True)
class Flow:
    name: str
    #: What this way of lowering is, in a sentence (reports and ``--help`` show it).
    what: str
    #: ``export_model`` options it sets over each case's own
    #: (``disable_workarounds`` adds to the case's own).
    options: Mapping = dataclasses.field(default_factory=dict)
    #: Case options this lowering has no use for: dropped from its runs.
    drops: tuple[str, ...] = ()
    #: Which cases it runs.
    applies: Callable[[Case], bool] = lambda case: True
    #: The case tests that apply to its runs (None: all); each of the others
    #: skips with :attr:`why_not`, a reason declared in the skip ledger.
    checks: tuple[str, ...] | None = ALL_CHECKS
    why_not: str = ""
    #: Case id -> its expected failure in this flow (replaces the case's own).
    expectations: Mapping[str, Expectation] = dataclasses.field(default_factory=dict)
    #: Case id -> why this lowering leaves the case on the CPU (replaces the
    #: case's expected delegation, as ``Case.stays_on_cpu`` declares it).
    stays_on_cpu: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Case ids whose runs are in the pull-request tier (``-m quick``).
    quick: frozenset[str] = frozenset()
    #: Runs when no ``--vgf-flow`` is given: in the nightly and the PR gate.
    gates: bool = False
    #: The entry of the workaround ledger (``vgf_export/workarounds.toml``) it
    #: answers for: its runs show what breaks without that workaround.
    answers_for: str | None = None

    def key(self, case_id: str) -> str:
        """The run key of a case in this flow."""
        return case_id if self.name == DEFAULT_FLOW else f"{self.name}/{case_id}"

    def run(self, case: Case) -> Case:
        """``case`` as this flow runs it: its key, its options, its expectation."""
        if self.name == DEFAULT_FLOW:
            return case
        options = {key: value for key, value in case.options.items() if key not in self.drops}
        for key, value in self.options.items():
            options[key] = tuple(dict.fromkeys((*options.get(key, ()), *value))) \
                if key == "disable_workarounds" else value
        delegation = {"stays_on_cpu": self.stays_on_cpu[case.id], "cpu_ops": (), "cpu_ops_reason": None} \
            if case.id in self.stays_on_cpu else {}
        return dataclasses.replace(case, id=self.key(case.id), flow=self.name, options=options,
                                   expect=self.expectations.get(case.id, case.expect),
                                   quick=case.id in self.quick, **delegation)

    def applies_to(self, test_name: str) -> bool:
        return self.checks is None or test_name in self.checks


def samples_a_grid(case: Case) -> bool:
    """A case whose model samples with a grid: grid_sample, and the composites
    that warp by a grid (:data:`GRID_COMPOSITES`)."""
    return case.family == "grid_sample" or case.id.startswith(GRID_COMPOSITES)


#: Composite cases that sample with a grid (flow warps, a base grid plus a flow).
GRID_COMPOSITES = ("flow-warp-", "basegrid-flow-")
#: Options of the project's own grid-sampler lowering that ExecuTorch's has no
#: use for (its quantization config decides the grid and the output).
PROJECT_GRID_OPTIONS = ("grid_sampler_grid_input_qspec", "quantize_grid_sample_output")

#: Where ExecuTorch 1.5.1's own grid-sampler lowering fails (measured with
#: ``--vgf-flow upstream-grid-sampler``; docs/native-grid-sampler.md): its int8
#: sampler rewrite at stage lower, on every batch above 1 and every one- or
#: two-channel image.
UPSTREAM_REWRITE_REFUSED = Expectation(
    "lower", r"grid_sampler int8 sampler rewrite requires a quantized int8 grid with explicit scale/zero-point",
    "ExecuTorch 1.5.1's grid-sampler lowering: its int8 sampler rewrite needs a quantized int8 grid with explicit "
    "scale and zero-point shader inputs, which it does not find for a batch above 1 or a one- or two-channel image")
UPSTREAM_GRID_SAMPLER_FAILS = {case_id: UPSTREAM_REWRITE_REFUSED for case_id in (
    "basegrid-flow-buffer-rgba-bilinear-border-n2-int8io", "basegrid-flow-buffer-rgba-nearest-border-n2-int8io",
    "flow-warp-rgba-border-n2-int8io", "grid-c1-bilinear-zeros-ac0-rotation-int8io",
    "grid-c1-nearest-zeros-ac0-rotation-int8io", "grid-c2-bilinear-zeros-ac0-rotation-int8io",
    "grid-c2-nearest-zeros-ac0-rotation-int8io", "grid-rgb-nearest-border-ac1-random-n2-int8io",
    "grid-rgba-bilinear-reflection-ac0-random-n4-int8io", "grid-rgba-bilinear-zeros-ac0-rotation-n2-floatout",
    "grid-rgba-bilinear-zeros-ac0-rotation-n2-int8io")}

FLOWS: dict[str, Flow] = {flow.name: flow for flow in (
    Flow(DEFAULT_FLOW, "vgf_export as the reference export script runs it", gates=True),
    Flow("without-bilinear-scale-factor",
         "the export without the bilinear-scale-factor workaround: ExecuTorch's own RESIZE parameters for a "
         "bilinear (align_corners=False) scale factor whose output is not an exact multiple",
         options={"disable_workarounds": ("bilinear-scale-factor",)},
         applies=lambda case: case.id in WITHOUT_BILINEAR_SCALE_FACTOR,
         expectations=WITHOUT_BILINEAR_SCALE_FACTOR,
         quick=frozenset({"resize-bilinear-ac0-in10x13-s7_10-int8io"}),
         gates=True, answers_for="bilinear-scale-factor"),
    Flow("without-resize-split",
         "the export without the resize-split workaround: ExecuTorch's own RESIZE for a bilinear downscale by 16 "
         "or more, on the ledger entry's probes",
         options={"disable_workarounds": ("resize-split",)},
         applies=lambda case: case.id in WORKAROUNDS["resize-split"].probes,
         stays_on_cpu=dict.fromkeys(WORKAROUNDS["resize-split"].probes,
                                    "without the split, TOSA RESIZE cannot express a bilinear downscale by 16 or more "
                                    "(scale_d < 16 * scale_n): the VGF partitioner refuses it (pytorch/executorch#19069)"),
         quick=frozenset({"resize-bilinear-ac0-down32-int8io"}), answers_for="resize-split"),
    Flow("upstream-grid-sampler",
         "ExecuTorch's own grid-sampler lowering: the VGF partitioner claims grid_sampler_2d as a TOSA CUSTOM "
         "operator with a SPIR-V shader (no GridSamplerBackend, no grid-sampler routing)",
         options={"grid_sampler_lowering": "upstream"}, drops=PROJECT_GRID_OPTIONS, applies=samples_a_grid,
         checks=("test_export", "test_delegation"),
         why_not="the upstream-grid-sampler flow keeps no goldens, and its TOSA CUSTOM operator runs on no "
                 "reference but Vulkan",
         expectations=UPSTREAM_GRID_SAMPLER_FAILS, quick=frozenset(WORKAROUNDS["grid-sampler-routing"].probes),
         answers_for="grid-sampler-routing"),
)}

#: The flows of a run without --vgf-flow.
GATING_FLOWS = tuple(name for name, flow in FLOWS.items() if flow.gates)


def check_flows(names: Iterable[str]) -> tuple[str, ...]:
    """``--vgf-flow`` values as flow names (``all``: every flow); an unknown
    name is refused with the list."""
    chosen: list[str] = []
    for name in names:
        if name == "all":
            chosen += FLOWS
        elif name in FLOWS:
            chosen.append(name)
        else:
            raise ValueError(f"--vgf-flow: no flow {name!r}; the flows are {', '.join(FLOWS)} (or all)")
    return tuple(dict.fromkeys(chosen))


def expand(table: Mapping[str, Case], flows: Iterable[str] = GATING_FLOWS) -> dict[str, Case]:
    """Run key -> run: the table's cases under each of ``flows`` that applies."""
    runs: dict[str, Case] = {}
    for name in flows:
        flow = FLOWS[name]
        runs.update((flow.key(case_id), flow.run(case)) for case_id, case in table.items() if flow.applies(case))
    return runs
