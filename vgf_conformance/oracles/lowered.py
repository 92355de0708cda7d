"""The lowered program, run on reference backends.

:class:`LoweredProgram` interprets the exported program's top-level graph node
by node: ops left on the CPU run in torch, and each delegate call runs on the
reference of its backend (:data:`vgf_conformance.oracles.delegates.DELEGATES`,
one entry per backend id): a VGF delegate's TOSA flatbuffer through the TOSA
reference model in a child process, a grid-sampler delegate through its
reference implementation. Every value and delegate call of the run is kept:
the Vulkan tier replays the calls.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.fx import Interpreter

from vgf_conformance.oracles.delegates import DELEGATES, DelegateReference, LoweredRunError
from vgf_conformance.text import dtype_name
from vgf_export.artifacts import target_name

__all__ = ["DelegateCall", "LoweredProgram", "LoweredRunError", "output_quant", "quantize_inputs"]


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
                 tosa_runs=None, delegates: dict[str, DelegateReference] | None = None) -> None:
        self.edge_program = edge_program
        #: Where the reference model's runs are kept by content (a case's
        #: ``tosa_reference.RUNS_DIR``), or None.
        self.tosa_runs = tosa_runs
        #: The reference of each backend id (default: every backend's own).
        self.delegates = DELEGATES if delegates is None else delegates
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
        reference = self.delegates.get(lowered.backend_id)
        if reference is None:
            raise LoweredRunError(f"delegate {index}: no reference for backend {lowered.backend_id} "
                                  f"(known: {sorted(self.delegates)})", "n/a")
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
