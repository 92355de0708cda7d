"""The grid-sampler backend: an ExecuTorch backend for ``grid_sampler_2d``.

The seed keeps ``grid_sampler_2d`` away from the VGF partitioner and lowers it
on its own, so that a runtime can execute it with a hardware sampler on an
image: the sampled image is an int8 NHWC tensor with 4 channels, i.e. a
``VK_FORMAT_R8G8B8A8_SNORM`` texel array, and the grid is int16 (SNORM16) or
int8 (SNORM8) coordinates in [-1, 1].

* :func:`pad_rgb_grid_sampler_channels_pass` pads a 3-channel image to 4
  channels before each grid sampler and slices the result back to 3.
* :class:`GridSamplerOnlyPartitioner` tags each ``dequantize -> grid_sampler_2d
  -> quantize`` chain (or a bare float ``grid_sampler_2d``) as one delegate.
* :class:`GridSamplerBackend` turns each delegate into a
  :class:`GridSamplerPayload`: a versioned JSON description of everything a
  runtime needs (shapes, dtypes, qparams, dim order, interpolation, padding,
  align_corners, and which delegate input is which).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, final

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import (
    DelegationSpec,
    Partitioner,
    PartitionResult,
)
from executorch.exir.backend.utils import tag_constant_data
from executorch.exir.dialects._ops import ops as exir_ops
from torch.export import ExportedProgram
from torch.fx import GraphModule, Node

from vgf_export.names import GRID_SAMPLER_BACKEND
from vgf_export.qdq import is_dq_op, is_q_op
from vgf_export.quantizer import GRID_SAMPLER_TARGETS

PAYLOAD_FORMAT = "vgf_export.grid_sampler"
PAYLOAD_VERSION = 1
BACKEND_ID = GRID_SAMPLER_BACKEND

#: aten.grid_sampler_2d's integer codes, by position.
INTERPOLATION_MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
#: Modes a sampler-based runtime can execute; others stay on the CPU.
SUPPORTED_INTERPOLATION = ("bilinear", "nearest")

_GRID_SAMPLER_2D = exir_ops.edge.aten.grid_sampler_2d.default


# ---------------------------------------------------------------------------
# Payload
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class QuantParams:
    """Per-tensor affine quantization: ``real = (q - zero_point) * scale``."""

    scale: float
    zero_point: int
    quant_min: int
    quant_max: int


@dataclasses.dataclass(frozen=True)
class TensorDesc:
    """One tensor at the delegate boundary.

    ``shape`` is logical (NCHW for images, [N, H, W, 2] for grids);
    ``dim_order`` is ExecuTorch's dim order of the buffer ((0, 2, 3, 1) is
    NHWC, channels-last). ``quant`` is None for a float tensor.
    """

    shape: tuple[int, ...]
    dtype: str
    dim_order: tuple[int, ...]
    quant: QuantParams | None

    @property
    def memory_format(self) -> str:
        if self.dim_order == (0, 2, 3, 1):
            return "channels_last"
        if self.dim_order == tuple(range(len(self.shape))):
            return "contiguous"
        return "strided"


@dataclasses.dataclass(frozen=True)
class GridSamplerPayload:
    """What a runtime needs to execute one grid-sampler delegate.

    ``inputs`` names the delegate's inputs in call order ("image", "grid").
    """

    image: TensorDesc
    grid: TensorDesc
    output: TensorDesc
    interpolation: str
    padding_mode: str
    align_corners: bool
    inputs: tuple[str, ...] = ("image", "grid")

    def to_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        for key in ("image", "grid", "output"):
            body[key]["memory_format"] = getattr(self, key).memory_format
        return {"format": PAYLOAD_FORMAT, "version": PAYLOAD_VERSION, **body}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GridSamplerPayload":
        if data.get("format") != PAYLOAD_FORMAT:
            raise ValueError(
                f"payload: expected format {PAYLOAD_FORMAT!r}, got {data.get('format')!r}"
            )
        if data.get("version") != PAYLOAD_VERSION:
            raise ValueError(
                f"payload: expected version {PAYLOAD_VERSION}, got {data.get('version')!r}"
            )

        def tensor(d: dict[str, Any]) -> TensorDesc:
            quant = d["quant"]
            return TensorDesc(
                shape=tuple(d["shape"]),
                dtype=d["dtype"],
                dim_order=tuple(d["dim_order"]),
                quant=QuantParams(**quant) if quant is not None else None,
            )

        return cls(
            image=tensor(data["image"]),
            grid=tensor(data["grid"]),
            output=tensor(data["output"]),
            interpolation=data["interpolation"],
            padding_mode=data["padding_mode"],
            align_corners=bool(data["align_corners"]),
            inputs=tuple(data["inputs"]),
        )

    @classmethod
    def from_bytes(cls, blob: bytes) -> "GridSamplerPayload":
        return cls.from_dict(json.loads(blob.decode()))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _qparams(node: Node) -> QuantParams:
    # quantize/dequantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype)
    _, scale, zero_point, qmin, qmax, _ = node.args[:6]
    return QuantParams(float(scale), int(zero_point), int(qmin), int(qmax))


def _desc(value: torch.Tensor, quant: QuantParams | None) -> TensorDesc:
    return TensorDesc(
        shape=tuple(int(s) for s in value.shape),
        dtype=_dtype_name(value.dtype),
        dim_order=tuple(int(d) for d in value.dim_order()),
        quant=quant,
    )


def _boundary(node: Node) -> TensorDesc:
    """Describe the tensor entering the sampler through ``node``: the int
    tensor before a dequantize, or ``node`` itself when float."""
    if is_dq_op(node):
        return _desc(node.args[0].meta["val"], _qparams(node))
    return _desc(node.meta["val"], None)


def _mode(names: tuple[str, ...], code: int, what: str) -> str:
    if not 0 <= int(code) < len(names):
        raise ValueError(f"grid_sampler_2d: unknown {what} code {code}")
    return names[int(code)]


def payload_from_graph(graph_module: GraphModule) -> GridSamplerPayload:
    """Build the payload of a delegated ``[dq] -> grid_sampler_2d -> [q]`` graph."""
    samplers = [
        n
        for n in graph_module.graph.nodes
        if n.op == "call_function" and n.target == _GRID_SAMPLER_2D
    ]
    if len(samplers) != 1:
        raise ValueError(
            f"grid-sampler delegate: expected exactly one grid_sampler_2d, found {len(samplers)}"
        )
    sampler = samplers[0]
    image, grid, interp, padding, align_corners = sampler.args[:5]
    out_node = sampler
    users = list(sampler.users)
    if len(users) == 1 and is_q_op(users[0]):
        out_node = users[0]
        output = _desc(out_node.meta["val"], _qparams(out_node))
    else:
        output = _desc(sampler.meta["val"], None)

    def source_placeholder(node: Node) -> Node:
        return node.args[0] if is_dq_op(node) else node

    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    roles = {source_placeholder(image): "image", source_placeholder(grid): "grid"}
    inputs = tuple(roles[p] for p in placeholders if p in roles)
    return GridSamplerPayload(
        image=_boundary(image),
        grid=_boundary(grid),
        output=output,
        interpolation=_mode(INTERPOLATION_MODES, interp, "interpolation"),
        padding_mode=_mode(PADDING_MODES, padding, "padding"),
        align_corners=bool(align_corners),
        inputs=inputs,
    )


@final
class GridSamplerBackend(BackendDetails):
    """Lowers one grid-sampler delegate to its :class:`GridSamplerPayload`."""

    @staticmethod
    def preprocess(
        edge_program: ExportedProgram, compile_specs: list[CompileSpec]
    ) -> PreprocessResult:
        payload = payload_from_graph(edge_program.graph_module)
        return PreprocessResult(processed_bytes=payload.to_bytes())


# ---------------------------------------------------------------------------
# Partitioner
# ---------------------------------------------------------------------------
def _sampler_supported(node: Node) -> bool:
    interp = node.args[2]
    return _mode(INTERPOLATION_MODES, interp, "interpolation") in SUPPORTED_INTERPOLATION


class GridSamplerOnlyPartitioner(Partitioner):
    """Tags every supported ``grid_sampler_2d`` with its adjacent Q/DQ nodes.

    Each sampler is its own delegate: the dequantize nodes feeding it (when
    they feed nothing else), the sampler, and a quantize node that is its only
    user. Bicubic sampling stays on the CPU.
    """

    def __init__(self) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec(BACKEND_ID, [])

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        partition_tags: dict[str, DelegationSpec] = {}
        graph = exported_program.graph_module.graph
        samplers = [
            n
            for n in graph.nodes
            if n.op == "call_function"
            and n.target == _GRID_SAMPLER_2D
            and "delegation_tag" not in n.meta
            and _sampler_supported(n)
        ]
        for idx, sampler in enumerate(samplers):
            tag = f"grid_sampler_{idx}"
            members = [sampler]
            for arg in sampler.args[:2]:
                if is_dq_op(arg) and set(arg.users) == {sampler}:
                    members.append(arg)
            users = list(sampler.users)
            if len(users) == 1 and is_q_op(users[0]):
                members.append(users[0])
            for node in members:
                node.meta["delegation_tag"] = tag
            partition_tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(
            tagged_exported_program=exported_program, partition_tags=partition_tags
        )


# ---------------------------------------------------------------------------
# RGB -> RGBA
# ---------------------------------------------------------------------------
def pad_rgb_grid_sampler_channels_pass(graph_module: GraphModule) -> int:
    """Pad 3-channel images to 4 before each grid sampler, slice back after.

    Works on the ATen graph before quantization. The pad's zero fourth channel
    makes the sampled image an RGBA texel array; the quantizer makes the pad
    share the image qspec. Returns the number of samplers rewritten.
    """
    graph = graph_module.graph
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in GRID_SAMPLER_TARGETS:
            continue
        image = node.args[0]
        image_val = image.meta.get("val")
        if image_val is None or image_val.ndim != 4 or image_val.shape[1] != 3:
            continue
        pad_args = ([0, 0, 0, 0, 0, 1], "constant", 0.0)
        with graph.inserting_before(node):
            pad = graph.call_function(torch.ops.aten.pad.default, (image, *pad_args))
        pad.meta = {k: v for k, v in image.meta.items() if k in ("stack_trace", "nn_module_stack")}
        pad.meta["val"] = torch.ops.aten.pad.default(image_val, *pad_args)
        node.replace_input_with(image, pad)
        old_val = node.meta["val"]
        node.meta["val"] = node.target(pad.meta["val"], node.args[1].meta["val"], *node.args[2:])
        with graph.inserting_after(node):
            sliced = graph.call_function(torch.ops.aten.slice.Tensor, (node, 1, 0, 3))
        node.replace_all_uses_with(sliced, delete_user_cb=lambda user, sliced=sliced: user is not sliced)
        sliced.meta = dict(node.meta)
        sliced.meta["val"] = old_val
        rewritten += 1
    if rewritten:
        graph.lint()
        graph_module.recompile()
    return rewritten
