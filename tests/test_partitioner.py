"""The VGF partitioner wrapper's detagging, and keeping VGF off grid_sampler."""

import torch
from executorch.backends.arm.vgf import VgfCompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.dialects._ops import ops as exir_ops

from vgf_conformance.cases.op_models import GridSample
from tests.helpers import quantized_edge
from vgf_export import grid_qspec, image_qspec
from vgf_export.export import TOSA_SPEC
from vgf_export.partitioner import VgfPartitionerWrapper, make_vgf_partitioner
from vgf_export.qdq import is_dq_op, is_q_op


class TagEverything(Partitioner):
    """Tags every call_function 'all'; the first input quantize also gets its
    own tag 'lonely', which must vanish once that node is detagged."""

    def __init__(self):
        super().__init__()
        self.delegation_spec = DelegationSpec("VgfBackend", [])

    def partition(self, ep):
        nodes = [n for n in ep.graph_module.graph.nodes if n.op == "call_function"]
        for n in nodes:
            n.meta["delegation_tag"] = "all"
        first_q = next(n for n in nodes if is_q_op(n))
        first_q.meta["delegation_tag"] = "lonely"
        return PartitionResult(ep, {"all": self.delegation_spec, "lonely": self.delegation_spec})


def _program(grid_quantized=True):
    inputs = (torch.rand(1, 3, 8, 8) * 2 - 1, torch.rand(1, 4, 4, 2) * 2 - 1)
    in_qspecs = [image_qspec(), grid_qspec() if grid_quantized else None]
    return quantized_edge(GridSample(), inputs, in_qspecs, [image_qspec()]).exported_program()


def _tagged(ep):
    return {n.name for n in ep.graph_module.graph.nodes if "delegation_tag" in n.meta}


def test_detags_graph_io_and_grid_sampler_neighbours():
    ep = _program()
    result = VgfPartitionerWrapper(
        TagEverything(), quantized_input_idxs=[0, 1], quantized_output_idxs=[0]
    ).partition(ep)
    graph = result.tagged_exported_program.graph_module.graph
    by_name = {n.name: n for n in graph.nodes}
    tagged = _tagged(result.tagged_exported_program)
    (sampler,) = [n for n in graph.nodes if n.target == exir_ops.edge.aten.grid_sampler_2d.default]
    (out,) = graph.output_node().args[0]

    expected_detagged = {
        *(u.name for p in ("image", "grid") for u in by_name[p].users if is_q_op(u)),
        *(a.name for a in sampler.args[:2] if is_dq_op(a)),
        *(u.name for u in sampler.users if is_q_op(u)),
        out.name,
    }
    assert len(expected_detagged) == 6
    assert not expected_detagged & tagged
    # Everything else stays: the pad's and slice's own Q/DQ included.
    all_calls = {n.name for n in graph.nodes if n.op == "call_function"}
    assert tagged == all_calls - expected_detagged
    assert set(result.partition_tags) == {"all"}


def test_keeps_quantize_of_a_float_input():
    ep = _program(grid_quantized=False)
    result = VgfPartitionerWrapper(
        TagEverything(), quantized_input_idxs=[0], quantized_output_idxs=[0]
    ).partition(ep)
    graph = result.tagged_exported_program.graph_module.graph
    grid = next(n for n in graph.nodes if n.name == "grid")
    # The float grid is quantized inside the program; that Q is not graph IO,
    # but it feeds the sampler's DQ, not the sampler, so it stays tagged.
    (grid_q,) = [u for u in grid.users if is_q_op(u)]
    assert "delegation_tag" in grid_q.meta


def test_vgf_partitioner_kept_off_grid_sampler():
    spec = VgfCompileSpec(TOSA_SPEC)
    op = exir_ops.edge.aten.grid_sampler_2d.default
    assert op not in make_vgf_partitioner(spec)._custom_partition_ops
    assert op in make_vgf_partitioner(spec, claim_grid_sampler=True)._custom_partition_ops
