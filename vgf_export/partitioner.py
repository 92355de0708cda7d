"""The VGF partitioner wrapper: graph-IO and grid-sampler Q/DQ stay top level.

Two workarounds of the seed live here:

* **Q/DQ detagging.** With an INT+FP TOSA profile, Arm's partitioner does not
  detag boundary Q/DQ nodes, so the VGF delegate can swallow the graph-IO
  quantize/dequantize; ``extract_io_quant_params`` then finds nothing to strip.
  The grid-sampler backend also needs the dequantize before and the quantize
  after each ``grid_sampler_2d`` at top level to take the chain as one
  delegate. The wrapper detags exactly those nodes; Q/DQ inside a VGF delegate
  stay there.
* **Grid-sampler routing.** Since ExecuTorch 1.5 the VGF partitioner claims
  ``grid_sampler_2d`` itself (TOSA CUSTOM + SPIR-V, int8 grid only). Our flow
  lowers it with its own backend and an int16 grid, so the VGF partitioner is
  built without that claim; otherwise partitioning ends in "Invalid partition,
  found dependency cycles".
"""

from __future__ import annotations

from typing import Sequence

from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from executorch.exir.dialects._ops import ops as exir_ops

from vgf_export.qdq import is_dq_op, is_q_op

_GRID_SAMPLER_2D = exir_ops.edge.aten.grid_sampler_2d.default


def make_vgf_partitioner(
    compile_spec: VgfCompileSpec, *, claim_grid_sampler: bool = False
) -> VgfPartitioner:
    """A ``VgfPartitioner`` that leaves ``grid_sampler_2d`` alone unless asked."""
    partitioner = VgfPartitioner(compile_spec)
    custom_ops = getattr(partitioner, "_custom_partition_ops", None)
    if not claim_grid_sampler and custom_ops is not None:
        custom_ops.discard(_GRID_SAMPLER_2D)
    return partitioner


def _tag_order(tag: str) -> tuple[int, str]:
    digits = "".join(ch for ch in tag if ch.isdigit())
    return (int(digits) if digits else -1, tag)


def _is_grid_sampler(node) -> bool:
    return node.op == "call_function" and node.target == _GRID_SAMPLER_2D


class VgfPartitionerWrapper(Partitioner):
    """Run an inner partitioner, then detag:

    1. quantize nodes that consume a quantized graph input,
    2. dequantize nodes that feed a quantized graph output,
    3. quantize/dequantize nodes adjacent to ``grid_sampler_2d``.

    Tags left without nodes are dropped from the result.
    """

    def __init__(
        self,
        inner_partitioner: Partitioner,
        *,
        quantized_input_idxs: Sequence[int] = (),
        quantized_output_idxs: Sequence[int] = (),
        detag_qdq: bool = True,
        sort_tags: bool = True,
        detag_grid_sampler_qdq: bool = True,
    ) -> None:
        super().__init__()
        self.inner = inner_partitioner
        self._quantized_input_idxs = frozenset(quantized_input_idxs)
        self._quantized_output_idxs = frozenset(quantized_output_idxs)
        self._detag_qdq = detag_qdq  # off only to show the workaround is needed
        self._sort_tags = sort_tags
        # Off for ExecuTorch's own grid-sampler lowering: its Q/DQ stay in the VGF delegate.
        self._near_sampler = _is_grid_sampler if detag_grid_sampler_qdq else (lambda node: False)

    def ops_to_not_decompose(self, ep):
        return self.inner.ops_to_not_decompose(ep)

    def transform_for_pre_decomposition(self, ep):
        hook = getattr(self.inner, "transform_for_pre_decomposition", None)
        return hook(ep) if hook is not None else ep

    def partition(self, exported_program) -> PartitionResult:
        result = self.inner.partition(exported_program)
        program = result.tagged_exported_program
        graph = program.graph_module.graph
        user_inputs = list(program.graph_signature.user_inputs)
        quantized_inputs = {
            user_inputs[i] for i in self._quantized_input_idxs if i < len(user_inputs)
        }
        output_position = {
            parent: i for i, parent in enumerate(graph.output_node().all_input_nodes)
        }

        for node in graph.nodes:
            if "delegation_tag" not in node.meta or not self._detag_qdq:
                continue
            if is_q_op(node):
                detag = any(
                    (inp.op == "placeholder" and inp.name in quantized_inputs)
                    or self._near_sampler(inp)
                    for inp in node.all_input_nodes
                )
            elif is_dq_op(node):
                detag = any(
                    (
                        user.op == "output"
                        and output_position.get(node) in self._quantized_output_idxs
                    )
                    or self._near_sampler(user)
                    for user in node.users
                )
            else:
                detag = False
            if detag:
                del node.meta["delegation_tag"]

        active = {n.meta["delegation_tag"] for n in graph.nodes if "delegation_tag" in n.meta}
        # ExecuTorch lowers partitions in the order of this dict. Arm's
        # partitioner builds it from a set of tag strings, whose order changes
        # with PYTHONHASHSEED, and so would the lowered graph (node order,
        # delegate input order, output names). Sort for a deterministic export.
        order = sorted(result.partition_tags, key=_tag_order) if self._sort_tags else result.partition_tags
        result.partition_tags = {
            tag: result.partition_tags[tag] for tag in order if tag in active
        }
        return result
