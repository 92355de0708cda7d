"""The lowered program, run on reference backends.

:class:`LoweredProgram` interprets the exported program's top-level graph node
by node: ops left on the CPU run in torch, and each delegate call runs on the
reference of its backend (:data:`REFERENCES`, one entry per backend id): a
VGF delegate's TOSA flatbuffer through the TOSA reference model in a child
process (:mod:`vgf_conformance.oracles.tosa_reference`), a grid-sampler delegate
through :mod:`vgf_conformance.oracles.grid_sampler_reference`. Every value and
delegate call of the run is kept: the Vulkan tier replays the calls.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch
from torch.fx import Interpreter

from vgf_conformance.oracles.grid_sampler_reference import run_payload
from vgf_conformance.oracles.tosa_reference import TOSA_LEVEL, run_tosa_in_child_ex
from vgf_conformance.text import dtype_name
from vgf_export.names import GRID_SAMPLER_BACKEND, VGF_BACKEND
from vgf_export.reports import target_name

TOSA_TIMEOUT = 120.0


class LoweredRunError(RuntimeError):
    """The lowered program could not be run (e.g. the TOSA reference model
    rejected a delegate); the message says which delegate and why."""

    def __init__(self, message: str, tosa_status: str) -> None:
        super().__init__(message)
        self.tosa_status = tosa_status


# ---------------------------------------------------------------------------
# Running the lowered program
# ---------------------------------------------------------------------------
def _to_layout(x: torch.Tensor, dim_order: tuple[int, ...]) -> np.ndarray:
    """The buffer of ``x`` in ``dim_order`` (what a delegate reads)."""
    return np.ascontiguousarray(x.permute(*dim_order).numpy()) if x.ndim > 1 else x.numpy()


def _from_layout(a: np.ndarray, dim_order: tuple[int, ...]) -> torch.Tensor:
    """Back to logical order from a buffer laid out in ``dim_order``."""
    inverse = [dim_order.index(i) for i in range(len(dim_order))]
    return torch.from_numpy(np.ascontiguousarray(a)).permute(*inverse).contiguous()


def _dim_orders(nodes) -> list[tuple[int, ...]]:
    return [tuple(n.meta["val"].dim_order()) for n in nodes]


@dataclasses.dataclass
class DelegateCall:
    """One delegate call of a run: which values went in and came out, and the
    dim order of their bytes as the delegate reads or writes them."""

    index: int
    backend: str
    processed_bytes: bytes
    inputs: list  # [(node, dim_order)]
    outputs: list  # [(getitem node, dim_order)]


class LoweredProgram(Interpreter):
    """Interprets the top-level graph; delegates run on the reference backends.

    ``tosa_files`` are the VGF delegates' flatbuffers in call order (the
    artifacts' ``NN_vgf.tosa``). After :meth:`run_program`, ``values`` holds
    every node's value (logical layout), ``outputs`` the program's outputs (as
    the program returns them: quantized where its IO is), ``calls`` every
    delegate call, and ``tosa_statuses`` the reference model's status of each VGF delegate run.
    """

    def __init__(self, edge_program, tosa_files: dict[int, bytes], nearest_ties: str = "even",
                 tosa_runs=None) -> None:
        self.edge_program = edge_program
        #: Where the reference model's runs are kept by content (a case's
        #: ``tosa_reference.RUNS_DIR``), or None.
        self.tosa_runs = tosa_runs
        self.program = edge_program.exported_program()
        super().__init__(self.program.graph_module, garbage_collect_values=False)
        self.tosa_files = tosa_files
        #: How the grid-sampler reference rounds nearest's ties ("even": torch;
        #: "up": a hardware NEAREST sampler, for the Vulkan tier).
        self.nearest_ties = nearest_ties
        self.inputs: list[torch.Tensor] = []
        self.delegate_index = 0
        self.tosa_statuses: list[str] = []
        self.calls: list[DelegateCall] = []
        self.values: dict = {}
        self.outputs: list[torch.Tensor] = []
        self._node = None

    def run_node(self, n):
        self._node = n
        return super().run_node(n)

    def run_program(self, *user_inputs: torch.Tensor) -> list[torch.Tensor]:
        self.delegate_index = 0
        self.inputs = list(user_inputs)
        signature = self.program.graph_signature
        state = {**self.program.state_dict, **self.program.constants}
        user = iter(user_inputs)
        args = []
        for spec in signature.input_specs:
            args.append(state[spec.target] if spec.target in state else next(user))
        outputs = self.run(*args)
        self.values = {n: v for n, v in self.env.items() if isinstance(v, torch.Tensor)}
        self.outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        return self.outputs

    def call_function(self, target, args, kwargs):
        if target_name(target) != "executorch_call_delegate":
            return super().call_function(target, args, kwargs)
        lowered, *inputs = args
        index = self.delegate_index
        self.delegate_index += 1
        reference = REFERENCES.get(lowered.backend_id)
        if reference is None:
            raise LoweredRunError(f"delegate {index}: no reference for backend {lowered.backend_id} "
                                  f"(known: {sorted(REFERENCES)})", "n/a")
        in_orders, out_orders = reference.layouts(lowered)
        call_node = self._node
        getitems = {u.args[1]: u for u in call_node.users if target_name(u.target) == "getitem"}
        self.calls.append(DelegateCall(
            index=index,
            backend=lowered.backend_id,
            processed_bytes=lowered.processed_bytes,
            inputs=list(zip(call_node.args[1:], in_orders)),
            outputs=[(getitems[i], order) for i, order in enumerate(out_orders) if i in getitems],
        ))
        return reference.run(self, index, lowered, inputs, in_orders, out_orders)


@dataclasses.dataclass(frozen=True)
class BackendReference:
    """How the lowered program runs one backend's delegates: the dim orders of
    a delegate's inputs and outputs (what its bytes are laid out as), and the
    run itself (``run(program, index, lowered, inputs, in_orders, out_orders)``
    returns the outputs in logical layout)."""

    layouts: Callable
    run: Callable


def _vgf_layouts(lowered):
    graph = lowered.original_module.graph_module.graph
    user_inputs = set(lowered.original_module.graph_signature.user_inputs)
    placeholders = [n for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    return _dim_orders(placeholders), _dim_orders(list(graph.output_node().args[0]))


def _run_vgf(program, index, lowered, inputs, in_orders, out_orders):
    buffers = [_to_layout(x.contiguous(), order) for x, order in zip(inputs, in_orders)]
    result = run_tosa_in_child_ex(program.tosa_files[index], buffers, TOSA_TIMEOUT, tosa_level=TOSA_LEVEL,
                                  cache_dir=program.tosa_runs)
    program.tosa_statuses.append(result.status)
    if not result.ok:
        raise LoweredRunError(
            f"delegate {index} ({VGF_BACKEND}): TOSA reference model: {result.describe()}",
            result.status,
        )
    return tuple(_from_layout(a, order) for a, order in zip(result.outputs, out_orders))


def _grid_sampler_layouts(lowered):
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    payload = GridSamplerPayload.from_bytes(lowered.processed_bytes)
    layouts = {"image": payload.image.dim_order, "grid": payload.grid.dim_order}
    return [layouts[role] for role in payload.inputs], [payload.output.dim_order]


def _run_grid_sampler(program, index, lowered, inputs, in_orders, out_orders):
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    payload = GridSamplerPayload.from_bytes(lowered.processed_bytes)
    by_role = dict(zip(payload.inputs, inputs))
    out = run_payload(payload, by_role["image"].numpy(), by_role["grid"].numpy(), program.nearest_ties)
    return (torch.from_numpy(np.ascontiguousarray(out)),)


#: The reference of each backend id: adding a backend is one entry here.
REFERENCES: dict[str, BackendReference] = {
    VGF_BACKEND: BackendReference(_vgf_layouts, _run_vgf),
    GRID_SAMPLER_BACKEND: BackendReference(_grid_sampler_layouts, _run_grid_sampler),
}


def quantize_inputs(inputs, edge_program, io_quant_params: dict) -> list[torch.Tensor]:
    """Program inputs: quantized with the stripped IO params where there are some."""
    names = [
        n.name for n in edge_program.exported_program().graph_module.graph.nodes
        if n.op == "placeholder"
    ]
    user_names = [n for n in names if n in set(edge_program.exported_program().graph_signature.user_inputs)]
    quantized = []
    for name, x in zip(user_names, inputs):
        params = io_quant_params.get("inputs", {}).get(name)
        if params is None:
            quantized.append(x)
            continue
        q = torch.round(x * (1.0 / params["scale"])) + params["zero_point"]
        q = torch.clamp(q, params["quant_min"], params["quant_max"])
        quantized.append(q.to(_DTYPES[dtype_name(params["dtype"])]))
    return quantized


_DTYPES = {"int8": torch.int8, "int16": torch.int16, "uint8": torch.uint8, "int32": torch.int32}


def output_quant(edge_program, io_quant_params: dict) -> list[dict | None]:
    """Each program output's stripped quant params (None: a float output)."""
    graph = edge_program.exported_program().graph_module.graph
    params = io_quant_params.get("outputs", {})
    return [params.get(n.name) for n in graph.output_node().args[0]]
