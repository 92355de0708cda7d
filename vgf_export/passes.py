"""Graph passes of the export flow (the seed's own passes).

* ``rewrite_large_bilinear_downsample_pass``: splits a bilinear downscale by 16
  or more per axis into a chain of legal resize stages, before quantization.
  Workaround for pytorch/executorch#19069 (TOSA RESIZE requires
  ``scale_d < 16 * scale_n``; the reference model rejects 1/16 and beyond).
* ``set_tensors_to_channels_last_pass``: marks image inputs, image outputs and
  the image tensors around ``grid_sampler_2d`` channels-last, so the VGF side
  needs no transposes and a runtime can alias those tensors as images.

The RGB->RGBA pad pass lives with the grid-sampler backend, whose contract it
serves (:mod:`vgf_export.grid_sampler_backend`).
"""

from __future__ import annotations

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.shape_prop import _extract_tensor_metadata

from vgf_export.qdq import is_dq_op, is_q_op

#: TOSA RESIZE accepts a downscale only while ``input < 16 * output`` per axis.
MAX_RESIZE_DOWNSCALE = 16

_RESIZE_BILINEAR = torch.ops.aten.upsample_bilinear2d.vec


# ---------------------------------------------------------------------------
# Large bilinear downscale split
# ---------------------------------------------------------------------------
def min_bilinear_resize_stage_count(input_size: int, output_size: int) -> int:
    """Fewest resize stages that take one axis from ``input_size`` to
    ``output_size`` with every stage's downscale below 16."""
    if input_size <= 0 or output_size <= 0:
        raise ValueError(
            f"Resize sizes must be positive, got input={input_size}, output={output_size}"
        )
    if output_size >= input_size or input_size < MAX_RESIZE_DOWNSCALE * output_size:
        return 1
    stage_count = 1
    max_total_factor = MAX_RESIZE_DOWNSCALE
    while input_size >= output_size * max_total_factor:
        stage_count += 1
        max_total_factor *= MAX_RESIZE_DOWNSCALE
    return stage_count


def build_bilinear_resize_axis_sizes(
    input_size: int, output_size: int, *, stage_count: int
) -> list[int]:
    """Sizes of one axis after each of ``stage_count`` stages (last = output).

    Each intermediate size is the largest one that still lets the remaining
    stages reach ``output_size`` legally: ``output * 16**(stages-1) - 1``.
    An axis that needs fewer stages than the other stays at ``input_size``
    until its last stage.
    """
    if stage_count <= 0:
        raise ValueError(f"stage_count must be positive, got {stage_count}")
    if stage_count == 1:
        return [output_size]
    if output_size >= input_size or input_size < MAX_RESIZE_DOWNSCALE * output_size:
        return [input_size] * (stage_count - 1) + [output_size]
    next_size = min(
        input_size, output_size * (MAX_RESIZE_DOWNSCALE ** (stage_count - 1)) - 1
    )
    if next_size <= 0:
        raise ValueError(
            f"Computed invalid intermediate resize size {next_size} "
            f"for input={input_size}, output={output_size}, stages={stage_count}"
        )
    return [next_size] + build_bilinear_resize_axis_sizes(
        next_size, output_size, stage_count=stage_count - 1
    )


def make_bilinear_resize_stage_shapes(
    input_hw: tuple[int, int], output_hw: tuple[int, int]
) -> list[tuple[int, int]]:
    """(H, W) after each stage; a single entry means no split is needed."""
    stage_count = max(
        min_bilinear_resize_stage_count(input_hw[0], output_hw[0]),
        min_bilinear_resize_stage_count(input_hw[1], output_hw[1]),
    )
    if stage_count == 1:
        return [tuple(output_hw)]
    axis_sizes = [
        build_bilinear_resize_axis_sizes(i, o, stage_count=stage_count)
        for i, o in zip(input_hw, output_hw, strict=True)
    ]
    return list(zip(*axis_sizes, strict=True))


def rewrite_large_bilinear_downsample_pass(
    graph_module: torch.fx.GraphModule,
) -> tuple[PassResult, int]:
    """Split oversized ``upsample_bilinear2d`` (align_corners=False) downscales.

    Returns the pass result and the number of resize nodes rewritten. The last
    stage keeps the original node's name and metadata so that later stages of
    the flow (and the goldens) still find it.
    """
    graph = graph_module.graph
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != _RESIZE_BILINEAR:
            continue
        if len(node.args) != 4 or node.args[2] is not False:
            continue
        input_node = node.args[0]
        input_val = getattr(input_node, "meta", {}).get("val")
        output_val = node.meta.get("val")
        if input_val is None or output_val is None:
            continue
        if input_val.ndim != 4 or output_val.ndim != 4:
            continue
        input_hw = (int(input_val.shape[2]), int(input_val.shape[3]))
        output_hw = (int(output_val.shape[2]), int(output_val.shape[3]))
        stage_shapes = make_bilinear_resize_stage_shapes(input_hw, output_hw)
        if len(stage_shapes) == 1:
            continue

        prev_node, prev_val = input_node, input_val
        with graph.inserting_before(node):
            for idx, stage_shape in enumerate(stage_shapes):
                resize = graph.call_function(
                    _RESIZE_BILINEAR, args=(prev_node, list(stage_shape), False, None)
                )
                resize.meta = dict(node.meta)
                if idx == len(stage_shapes) - 1:
                    resize.name = node.name  # `node` is erased just below
                else:
                    resize.name = f"{node.name}_split_{idx}"
                    prev_val = _RESIZE_BILINEAR(prev_val, list(stage_shape), False, None)
                    resize.meta["val"] = prev_val
                    resize.meta["tensor_meta"] = _extract_tensor_metadata(prev_val)
                prev_node = resize
        node.replace_all_uses_with(prev_node)
        graph.erase_node(node)
        rewritten += 1

    if rewritten:
        graph.lint()
        graph_module.recompile()
    return PassResult(graph_module=graph_module, modified=bool(rewritten)), rewritten


# ---------------------------------------------------------------------------
# Channels-last layout for images
# ---------------------------------------------------------------------------
_GRID_SAMPLER_2D = exir_ops.edge.aten.grid_sampler_2d.default
_QUANTIZE = exir_ops.edge.quantized_decomposed.quantize_per_tensor.default
_DEQUANTIZE = exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default


def feeds_grid_sampler_grid_input(node: torch.fx.Node) -> bool:
    """True when ``node`` reaches a grid_sampler_2d's grid argument, directly
    or through Q/DQ nodes. Sampling grids are [N, H, W, 2] coordinates, not
    images, and keep their layout."""
    visited: set[torch.fx.Node] = set()

    def visit(current: torch.fx.Node) -> bool:
        if current in visited:
            return False
        visited.add(current)
        for user in current.users:
            if user.op != "call_function":
                continue
            if (
                user.target == _GRID_SAMPLER_2D
                and len(user.args) > 1
                and user.args[1] is current
            ):
                return True
            if (is_q_op(user) or is_dq_op(user)) and visit(user):
                return True
        return False

    return visit(node)


def _mark_channels_last(node: torch.fx.Node) -> None:
    node.meta["val"] = node.meta["val"].contiguous(memory_format=torch.channels_last)


def set_tensors_to_channels_last_pass(graph_module: torch.fx.GraphModule) -> PassResult:
    """Mark image tensors channels-last (NHWC dim order).

    Images are the 4-D graph inputs and outputs (except sampling grids) and the
    image input and output of each ``grid_sampler_2d``, including the Q/DQ
    nodes on their far side, since those become delegate boundaries.
    """
    graph = graph_module.graph
    for node in graph.nodes:
        if node.op != "placeholder" or node.meta["val"].ndim != 4:
            continue
        if feeds_grid_sampler_grid_input(node):
            continue
        _mark_channels_last(node)
        # An input quantized at once: the delegate sees the quantized tensor.
        for user in node.users:
            if user.op == "call_function" and user.target == _QUANTIZE:
                _mark_channels_last(user)

    output_node = graph.output_node()
    for out in output_node.args[0]:
        if not isinstance(out, torch.fx.Node) or out.meta["val"].ndim != 4:
            continue
        _mark_channels_last(out)
        # A dequantized output: the delegate produces the quantized tensor.
        if out.op == "call_function" and out.target == _DEQUANTIZE:
            _mark_channels_last(out.args[0])

    for node in graph.nodes:
        if node.op != "call_function" or node.target != _GRID_SAMPLER_2D:
            continue
        image = node.args[0]
        _mark_channels_last(image)
        if image.op == "call_function" and image.target == _DEQUANTIZE:
            _mark_channels_last(image.args[0])
        _mark_channels_last(node)
        for user in node.users:
            if user.op == "call_function" and user.target == _QUANTIZE:
                _mark_channels_last(user)

    return PassResult(graph_module=graph_module, modified=True)


def pin_delegate_output_layouts(edge_program) -> int:
    """End each delegate's original graph with a ``_clone_dim_order`` to the
    layout its backend compiled against; returns how many outputs it pinned.

    ``to_executorch()`` re-derives each delegate call's output metadata by
    fake-running the delegate's original graph (the retrace of
    ``SpecPropPass`` / ``LegalizePortableDimOrderPass``). The channels-last
    marks of :func:`set_tensors_to_channels_last_pass` live only in
    ``meta["val"]``, and ops whose fake kernels return contiguous tensors
    (``grid_sampler_2d``, ``slice_copy``) lose them, so the ``.pte`` labels
    NHWC delegate outputs NCHW. The clone makes the retrace derive the right
    layout, for the delegate outputs and for CPU ops after them. Processed
    bytes are untouched: the original graph is only retraced. Apply it to the
    copy that is serialized."""
    from executorch.exir.delegate import executorch_call_delegate
    from executorch.exir.dialects._ops import ops as exir_ops
    from torch.export.graph_signature import TensorArgument

    clone_op = exir_ops.edge.dim_order_ops._clone_dim_order.default
    gm = edge_program.exported_program().graph_module
    pinned = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not executorch_call_delegate:
            continue
        program = getattr(gm, node.args[0].target).original_module
        graph = program.graph_module.graph
        output = graph.output_node()
        results = list(output.args[0])
        for i, result in enumerate(results):
            val = result.meta.get("val")
            if not isinstance(val, torch.Tensor):
                continue
            dim_order = [int(d) for d in val.dim_order()]
            if dim_order == list(range(val.dim())):
                continue  # contiguous: what a retrace derives anyway
            with graph.inserting_before(output):
                clone = graph.call_function(clone_op, (result,), {"dim_order": dim_order})
            clone.meta = {"val": val}
            for spec in program.graph_signature.output_specs:
                if isinstance(spec.arg, TensorArgument) and spec.arg.name == result.name:
                    spec.arg = TensorArgument(name=clone.name)
            results[i] = clone
            pinned += 1
        output.args = (results,)
        program.graph_module.recompile()
    return pinned
