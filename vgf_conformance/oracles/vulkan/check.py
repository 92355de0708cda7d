"""A case on Vulkan: its scenario from the TOSA-reference run, and the
comparison of what the runner wrote with that run, tensor by tensor.

The grid sampler samples through the hardware sampler in both modes. A
NEAREST sampler picks texel ``floor(x + 0.5)`` where torch (and the
TOSA-reference run) round half to even, so a program with a nearest grid
sampler is compared with its TOSA-reference run redone with ties rounded up
(:func:`hardware_program`); how many elements that moves from torch's rounding
is recorded per tensor and bounded by the bound the caller passes
(:data:`vgf_conformance.cases.tolerances.VULKAN_NEAREST_TIES`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from vgf_conformance.oracles.compare import FLOAT_UNIT, signed_lsb
from vgf_conformance.oracles.vulkan.runner import VulkanRunError, rerun_command, run_scenario
from vgf_conformance.oracles.vulkan.scenario import ScenarioBuilder, build_scenario
from vgf_export.names import GRID_SAMPLER_BACKEND


@dataclasses.dataclass
class TensorDiff:
    """One delegate output on Vulkan against the TOSA-reference path, in its
    own unit: integer steps for an integer tensor, FLOAT_UNIT for a float one."""

    uid: str
    dtype: str
    max_diff: float
    mismatches: int  # elements that differ at all
    size: int
    worst: str  # where the largest difference is

    @property
    def integer(self) -> bool:
        return np.issubdtype(np.dtype(self.dtype), np.integer)

    def problem(self, float_bound: float) -> str | None:
        """Integer tensors must be bit-exact; float tensors within ``float_bound``."""
        if self.integer and self.mismatches:
            return (f"{self.uid} ({self.dtype}): {self.mismatches} of {self.size} elements differ "
                    f"from the TOSA-reference path (max {self.max_diff:g} steps; integer tensors "
                    f"must be bit-exact) at {self.worst}")
        if not self.integer and not self.max_diff <= float_bound:  # NaN is within no bound
            return (f"{self.uid} ({self.dtype}): max {self.max_diff:g} LSB of 1/127 > {float_bound:g} "
                    f"({self.mismatches} of {self.size} elements differ) at {self.worst}")
        return None


@dataclasses.dataclass
class VulkanCheck:
    """Vulkan outputs against the TOSA-reference path, tensor by tensor."""

    scenario: Path
    seconds: float
    tensors: list[TensorDiff]
    outputs: dict[str, np.ndarray] = dataclasses.field(repr=False, default_factory=dict)
    batch: int = 1  # cases that shared the runner process
    #: uid -> (elements, size): where the reference with hardware NEAREST's
    #: tie rounding (what Vulkan is compared with) differs from torch's.
    nearest_ties: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)

    @property
    def bit_exact(self) -> bool:
        return all(t.mismatches == 0 for t in self.tensors)

    def problems(self, float_bound: float, ties=None) -> list[str]:
        """What differs beyond the bounds: ``float_bound`` (LSB) for float
        tensors, and ``ties`` (a :class:`~vgf_conformance.cases.tolerances.HardwareDifference`:
        ``max_fraction``, ``why``) for the elements hardware NEAREST's tie
        rounding moves; without ``ties``, any such element is a problem."""
        found = [p for t in self.tensors if (p := t.problem(float_bound))]
        bound = ties.max_fraction if ties is not None else 0.0
        why = ties.why if ties is not None else "no bound given for them"
        found += [f"{uid}: hardware NEAREST's tie rounding moves {moved} of {size} elements from "
                  f"torch's ({moved / size:.2%} > {bound:.2%}: {why})"
                  for uid, (moved, size) in self.nearest_ties.items() if size and moved / size > bound]
        return found

    def same_outputs(self, other: "VulkanCheck") -> bool:
        return self.outputs.keys() == other.outputs.keys() and all(
            np.array_equal(self.outputs[k], other.outputs[k]) for k in self.outputs)

    def report_dict(self) -> dict:
        return {"bit_exact": self.bit_exact,
                "tensors": {t.uid: {"dtype": t.dtype, "max_diff": round(t.max_diff, 3),
                                    "mismatches": t.mismatches,
                                    **({"nearest_ties": self.nearest_ties[t.uid][0]}
                                       if t.uid in self.nearest_ties else {})}
                            for t in self.tensors}}


def hardware_program(program):
    """``program`` (a :class:`~vgf_conformance.oracles.lowered.LoweredProgram`
    run) as Vulkan computes it, and where that differs from it: the same run
    with nearest grid sampling rounding ties up like a NEAREST sampler (the
    run itself when no grid sampler samples nearest). Returns the run and
    ``{value name: (elements that differ, size)}`` over the delegate outputs."""
    from vgf_conformance.oracles.lowered import LoweredProgram
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    nearest = any(call.backend == GRID_SAMPLER_BACKEND
                  and GridSamplerPayload.from_bytes(call.processed_bytes).interpolation == "nearest"
                  for call in program.calls)
    if not nearest:
        return program, {}
    again = LoweredProgram(program.edge_program, program.tosa_files, nearest_ties="up",
                           tosa_runs=program.tosa_runs)
    again.run_program(*program.inputs)
    torch_values = {node.name: value for node, value in program.values.items()}
    moved = {}
    for call in again.calls:
        for node, _ in call.outputs:
            a, b = again.values[node].numpy(), torch_values[node.name].numpy()
            moved[f"v_{node.name}"] = (int(np.count_nonzero(a != b)), int(a.size))
    return again, moved


def prepare_case(numerics, result, workdir: Path) -> ScenarioBuilder:
    """Write the case's scenario (and its inputs) from its TOSA-reference run."""
    vgf_files = {f.index: f.path for f in result.artifacts.delegate_files("vgf")}
    program, moved = hardware_program(numerics.program)
    builder = build_scenario(program, workdir, vgf_files)
    builder.nearest_ties = moved
    return builder


def run_case_on_vulkan(numerics, result, workdir: Path) -> VulkanCheck:
    """Build the case's scenario, run it alone, compare."""
    builder = prepare_case(numerics, result, workdir)
    return check_case(builder, run_scenario(builder.scenario))


def check_case(builder: ScenarioBuilder, seconds: float, batch: int = 1) -> VulkanCheck:
    """Compare the outputs the runner wrote with the TOSA-reference path,
    tensor by tensor. ``batch``: how many cases shared the runner process."""
    scenario = builder.scenario
    got, expected = builder.outputs(), builder.expected()
    tensors = []
    for uid in expected:
        a, b = got[uid], expected[uid]
        if a.shape != b.shape:
            raise VulkanRunError(f"{uid}: Vulkan wrote {a.shape}, expected {b.shape}\n"
                                 f"rerun: {rerun_command(scenario)}")
        tensors.append(tensor_diff(uid, a, b, builder.layouts[uid]))
    return VulkanCheck(scenario, seconds, tensors, got, batch, getattr(builder, "nearest_ties", {}))


def tensor_diff(uid: str, got: np.ndarray, expected: np.ndarray, layout: str) -> TensorDiff:
    """One tensor Vulkan wrote against the TOSA-reference path: integer
    steps, or FLOAT_UNIT for a float tensor, NaN and infinity counted as
    :func:`~vgf_conformance.oracles.compare.signed_lsb` counts them."""
    if np.issubdtype(expected.dtype, np.integer):
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64)).astype(np.float64)
    else:
        diff = np.abs(signed_lsb(expected, got, FLOAT_UNIT))
    index = np.unravel_index(int(diff.argmax()), diff.shape) if diff.size else ()
    worst = (f"{uid}[{', '.join(map(str, index))}] (layout {layout}): "
             f"vulkan {got[index]}, TOSA path {expected[index]}") if diff.size else "empty"
    return TensorDiff(uid, str(expected.dtype), float(diff.max()) if diff.size else 0.0,
                      int(np.count_nonzero(diff)), int(diff.size), worst)
