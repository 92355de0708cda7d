"""The reference of each delegate backend, one entry per backend id
(:data:`DELEGATES`): everything the oracles need to run a delegate without its
hardware.

* ``layouts`` and ``run``: how the lowered program
  (:class:`vgf_conformance.oracles.lowered.LoweredProgram`) runs a delegate
  call on logical tensors: the dim orders its bytes are laid out in, and the
  call itself (outputs in logical layout; failures are
  :class:`LoweredRunError`);
* ``execute``: how the shipped ``.pte``'s plan
  (:class:`vgf_conformance.oracles.pte.execute.PlanInterpreter`) runs the
  delegate's payload on raw buffers: the values the call passes (inputs, then
  outputs; failures are :class:`PlanError`).

A VGF delegate runs its TOSA flatbuffer through the TOSA reference model in a
child process (:mod:`vgf_conformance.oracles.tosa_reference`); a VGF payload
cannot be read back as TOSA, so the plan finds the flatbuffer the model
converter made it from by the payload's bytes. A grid-sampler delegate runs
on :mod:`vgf_conformance.oracles.grid_sampler_reference`. Adding a backend is
one entry here (the Vulkan tier's scenario builder has its own table:
:data:`vgf_conformance.oracles.vulkan.scenario.DELEGATES`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable

import numpy as np
import torch

from vgf_conformance.oracles.grid_sampler_reference import run_payload
from vgf_conformance.oracles.tosa_reference import TOSA_LEVEL, TOSA_TO_NUMPY, graph_io, run_tosa_in_child_ex
from vgf_export.grid_sampler_backend import GridSamplerPayload
from vgf_export.names import DELEGATES_DIR, GRID_SAMPLER_BACKEND, VGF_BACKEND

#: Seconds the TOSA reference model may take for one delegate call (the
#: explorer lowers it to a share of its draw timeout).
TOSA_TIMEOUT = 120.0


class LoweredRunError(RuntimeError):
    """The lowered program could not be run (e.g. the TOSA reference model
    rejected a delegate); the message says which delegate and why."""

    def __init__(self, message: str, tosa_status: str) -> None:
        super().__init__(message)
        self.tosa_status = tosa_status


class PlanError(RuntimeError):
    """The plan cannot be executed as serialized; the message names the
    instruction and the value."""


@dataclasses.dataclass(frozen=True)
class DelegateReference:
    """One backend's reference: ``layouts(lowered)`` -> (input dim orders,
    output dim orders); ``run(program, index, lowered, inputs, in_orders,
    out_orders)`` -> the outputs, logical; ``execute(interpreter, what,
    payload, values)`` writes the outputs into the plan's values."""

    layouts: Callable
    run: Callable
    execute: Callable


def to_layout(x: torch.Tensor, dim_order: tuple[int, ...]) -> np.ndarray:
    """The buffer of ``x`` in ``dim_order`` (what a delegate reads)."""
    return np.ascontiguousarray(x.permute(*dim_order).numpy()) if x.ndim > 1 else x.numpy()


def from_layout(a: np.ndarray, dim_order: tuple[int, ...]) -> torch.Tensor:
    """Back to logical order from a buffer laid out in ``dim_order``."""
    inverse = [dim_order.index(i) for i in range(len(dim_order))]
    return torch.from_numpy(np.ascontiguousarray(a)).permute(*inverse).contiguous()


def _dim_orders(nodes) -> list[tuple[int, ...]]:
    return [tuple(n.meta["val"].dim_order()) for n in nodes]


# ---------------------------------------------------------------------------
# VGF: the TOSA reference model
# ---------------------------------------------------------------------------
def vgf_layouts(lowered):
    graph = lowered.original_module.graph_module.graph
    user_inputs = set(lowered.original_module.graph_signature.user_inputs)
    placeholders = [n for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    return _dim_orders(placeholders), _dim_orders(list(graph.output_node().args[0]))


def _run_vgf(program, index, lowered, inputs, in_orders, out_orders):
    buffers = [to_layout(x.contiguous(), order) for x, order in zip(inputs, in_orders)]
    result = run_tosa_in_child_ex(program.tosa_files[index], buffers, TOSA_TIMEOUT, tosa_level=TOSA_LEVEL,
                                  cache_dir=program.tosa_runs)
    program.tosa_statuses.append(result.status)
    if not result.ok:
        raise LoweredRunError(f"delegate {index} ({VGF_BACKEND}): TOSA reference model: {result.describe()}",
                              result.status)
    return tuple(from_layout(a, order) for a, order in zip(result.outputs, out_orders))


def _execute_vgf(interpreter, what: str, payload: bytes, tensors: list) -> None:
    digest = hashlib.sha256(payload).hexdigest()
    tosa = interpreter.context.get("vgf_to_tosa", {}).get(digest)
    if tosa is None:
        raise PlanError(f"{what}: its VGF payload (sha256 {digest[:12]}) is none of the export's "
                        f"{DELEGATES_DIR}/NN_vgf.vgf: no TOSA flatbuffer to run it on")
    io = graph_io(tosa)
    if len(tensors) != len(io["inputs"]) + len(io["outputs"]):
        raise PlanError(f"{what}: {len(tensors)} values passed, the TOSA graph has "
                        f"{len(io['inputs'])} inputs and {len(io['outputs'])} outputs")
    buffers = []
    for role, spec, tensor in zip(["input"] * len(io["inputs"]) + ["output"] * len(io["outputs"]),
                                  io["inputs"] + io["outputs"], tensors):
        want = TOSA_TO_NUMPY.get(spec["dtype"])
        if tensor.dtype != want or tensor.flat.size != int(np.prod(spec["shape"], dtype=np.int64)):
            raise PlanError(f"{what}: {role} {tensor.describe()}, the TOSA graph has "
                            f"{spec['dtype']}[{'x'.join(map(str, spec['shape']))}]")
        if role == "input":
            buffers.append(tensor.flat.reshape(spec["shape"]).copy())  # the raw bytes
    result = run_tosa_in_child_ex(tosa, buffers, TOSA_TIMEOUT, tosa_level=TOSA_LEVEL,
                                  cache_dir=interpreter.context.get("tosa_runs"))
    if not result.ok:
        raise PlanError(f"{what}: TOSA reference model: {result.describe()}")
    for tensor, out in zip(tensors[len(buffers):], result.outputs):
        tensor.flat[...] = np.asarray(out, tensor.dtype).ravel()


# ---------------------------------------------------------------------------
# The grid sampler: its reference implementation
# ---------------------------------------------------------------------------
def _grid_sampler_layouts(lowered):
    payload = GridSamplerPayload.from_bytes(lowered.processed_bytes)
    layouts = {"image": payload.image.dim_order, "grid": payload.grid.dim_order}
    return [layouts[role] for role in payload.inputs], [payload.output.dim_order]


def _run_grid_sampler(program, index, lowered, inputs, in_orders, out_orders):
    payload = GridSamplerPayload.from_bytes(lowered.processed_bytes)
    by_role = dict(zip(payload.inputs, inputs))
    out = run_payload(payload, by_role["image"].numpy(), by_role["grid"].numpy(), program.nearest_ties)
    return (torch.from_numpy(np.ascontiguousarray(out)),)


def _execute_grid_sampler(interpreter, what: str, payload_bytes: bytes, tensors: list) -> None:
    payload = GridSamplerPayload.from_bytes(payload_bytes)
    descs = {"image": payload.image, "grid": payload.grid}
    roles = [*payload.inputs, "output"]
    if len(tensors) != len(roles):
        raise PlanError(f"{what}: {len(tensors)} values passed, the payload has {roles}")
    arrays = {}
    for role, tensor in zip(roles, tensors):
        desc = descs.get(role, payload.output)
        if tensor.dtype != np.dtype(desc.dtype) or tensor.flat.size != int(np.prod(desc.shape)):
            raise PlanError(f"{what}: the {role} is {tensor.describe()}, the payload reads "
                            f"{desc.dtype}{list(desc.shape)}")
        physical = tensor.flat.reshape([desc.shape[d] for d in desc.dim_order])  # the raw bytes
        arrays[role] = np.transpose(physical, np.argsort(desc.dim_order))
    out = run_payload(payload, arrays["image"], arrays["grid"])
    tensors[-1].flat[...] = np.transpose(out, payload.output.dim_order).ravel()


#: The reference of each backend id: adding a backend is one entry here.
DELEGATES: dict[str, DelegateReference] = {
    VGF_BACKEND: DelegateReference(vgf_layouts, _run_vgf, _execute_vgf),
    GRID_SAMPLER_BACKEND: DelegateReference(_grid_sampler_layouts, _run_grid_sampler, _execute_grid_sampler),
}
