"""The quantizer wrapper: per-IO qspecs and the grid_sample boundary qspecs.

ExecuTorch 1.5's ``TOSAQuantizer`` delegates to an inner composable quantizer,
so the private hooks the seed overrode (``_annotate_io``,
``_annotate_for_static_quantization_config``) are never called. This wrapper
overrides the public ``annotate()`` instead: the base annotation runs first,
then the caller's choices are applied on top of it:

* graph inputs and outputs get the caller's qspec, positionally; ``None``
  leaves that input or output in float;
* each grid_sample gets the image, grid and output qspecs, and an RGB->RGBA
  pad in front of it shares the image qspec (else PT2E would requantize
  between the pad and the sampler).
"""

from __future__ import annotations

from typing import Sequence

import torch
from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationSpec,
    SharedQuantizationSpec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from vgf_export.qdq import grid_qspec, image_qspec

GRID_SAMPLER_TARGETS = (
    torch.ops.aten.grid_sampler.default,
    torch.ops.aten.grid_sampler_2d.default,
)
_PAD_TARGETS = (torch.ops.aten.pad.default, torch.ops.aten.constant_pad_nd.default)


def user_placeholders(model: GraphModule) -> list[Node]:
    """Graph inputs in order, as the seed counts them (placeholders in use)."""
    return [n for n in model.graph.nodes if n.op == "placeholder" and n.users]


def graph_outputs(model: GraphModule) -> list[Node]:
    """The nodes feeding the graph output, in order."""
    return list(model.graph.output_node().all_input_nodes)


def _annotation(node: Node) -> QuantizationAnnotation:
    annotation = node.meta.get(Q_ANNOTATION_KEY)
    if annotation is None:
        annotation = QuantizationAnnotation()
        node.meta[Q_ANNOTATION_KEY] = annotation
    if annotation.input_qspec_map is None:
        annotation.input_qspec_map = {}
    annotation._annotated = True
    return annotation


class VgfQuantizerWrapper(VgfQuantizer):
    """``VgfQuantizer`` with caller-chosen IO and grid_sample qspecs."""

    def __init__(
        self,
        compile_spec,
        *,
        input_qspecs: Sequence[QuantizationSpec | None],
        output_qspecs: Sequence[QuantizationSpec | None],
        grid_sampler_image_input_qspec: QuantizationSpec | None = None,
        grid_sampler_grid_input_qspec: QuantizationSpec | None = None,
        grid_sampler_output_qspec: QuantizationSpec | None = None,
    ) -> None:
        super().__init__(compile_spec)
        self._input_qspecs = tuple(input_qspecs)
        self._output_qspecs = tuple(output_qspecs)
        self._gs_image_qspec = grid_sampler_image_input_qspec
        self._gs_grid_qspec = grid_sampler_grid_input_qspec
        self._gs_output_qspec = grid_sampler_output_qspec

    def annotate(self, model: GraphModule) -> GraphModule:
        model = super().annotate(model)
        self.annotate_io(model)
        if any(
            q is not None
            for q in (self._gs_image_qspec, self._gs_grid_qspec, self._gs_output_qspec)
        ):
            self.annotate_grid_sample(model)
        return model

    def annotate_io(self, model: GraphModule) -> None:
        """Apply the positional input and output qspecs (``None``: float)."""
        for node, qspec in zip(user_placeholders(model), self._input_qspecs):
            _annotation(node).output_qspec = qspec

        output_node = model.graph.output_node()
        for parent, qspec in zip(graph_outputs(model), self._output_qspecs):
            annotation = _annotation(output_node)
            # Keep the caller's output qspec even where the producer's qspec has the same
            # dtype, range and scheme (an a16w8 layer before an SNORM16 output): torchao's
            # implicit sharing would merge the output into the producer's observer and
            # drop the qspec silently (the output scale then follows calibration).
            annotation.allow_implicit_sharing = False
            if qspec is None:
                annotation.input_qspec_map.pop(parent, None)
            else:
                annotation.input_qspec_map[parent] = qspec

    def _annotate_image_pad(self, pad_node: Node) -> None:
        # Keep the inserted RGB->RGBA pad in the image domain of the sampler.
        source = pad_node.args[0]
        annotation = _annotation(pad_node)
        annotation.input_qspec_map = {source: self._gs_image_qspec}
        annotation.output_qspec = SharedQuantizationSpec((source, pad_node))

    def annotate_grid_sample(self, model: GraphModule) -> None:
        """Set image, grid and output qspecs on every grid sampler."""
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in GRID_SAMPLER_TARGETS:
                continue
            image, grid = node.args[0], node.args[1]
            annotation = _annotation(node)
            qspec_map = dict(annotation.input_qspec_map)
            if self._gs_image_qspec is not None:
                if image.op == "call_function" and image.target in _PAD_TARGETS:
                    self._annotate_image_pad(image)
                    qspec_map[image] = SharedQuantizationSpec(image)
                else:
                    qspec_map[image] = self._gs_image_qspec
            if self._gs_grid_qspec is not None:
                qspec_map[grid] = self._gs_grid_qspec
            else:
                qspec_map.pop(grid, None)
            annotation.input_qspec_map = qspec_map
            annotation.output_qspec = self._gs_output_qspec


def build_quantizer(
    compile_spec,
    *,
    input_qspecs: Sequence[QuantizationSpec | None],
    output_qspecs: Sequence[QuantizationSpec | None],
    grid_sampler_grid_input_qspec: QuantizationSpec | None = None,
    quantize_grid_sample_output: bool = True,
    module_name_quant_configs: dict[str, object | None] | None = None,
    upstream_grid_sampler: bool = False,
) -> VgfQuantizerWrapper:
    """The seed's quantizer: int8 symmetric activations and weights in
    [-127, 127] (per-channel weights), SNORM8 images at grid samplers, an
    SNORM16 grid unless another grid qspec is given, per-module overrides.

    ``upstream_grid_sampler``: ExecuTorch's own grid-sampler quantization
    instead: the global config is ``get_vgf_snorm_quantization_config()``
    (SNORM8 image and output, the grid as an int8 activation) and no
    grid_sample qspec of this package is applied on top.
    """
    if upstream_grid_sampler:
        # ExecuTorch 1.5+ only: imported here so that older versions still import this module.
        from executorch.backends.arm.quantizer import get_vgf_snorm_quantization_config

        quantizer = VgfQuantizerWrapper(compile_spec, input_qspecs=input_qspecs,
                                        output_qspecs=output_qspecs)
        config = get_vgf_snorm_quantization_config(is_per_channel=True)
        quantizer.set_global(config).set_io(config)
        for module_name, module_config in (module_name_quant_configs or {}).items():
            quantizer.set_module_name(module_name, module_config)
        return quantizer
    quantizer = VgfQuantizerWrapper(
        compile_spec,
        input_qspecs=input_qspecs,
        output_qspecs=output_qspecs,
        grid_sampler_image_input_qspec=image_qspec(),
        grid_sampler_grid_input_qspec=grid_sampler_grid_input_qspec or grid_qspec(),
        grid_sampler_output_qspec=image_qspec() if quantize_grid_sample_output else None,
    )
    config = get_symmetric_quantization_config(
        is_per_channel=True,
        act_qmin=-127,
        act_qmax=127,
        weight_qmin=-127,
        weight_qmax=127,
    )
    # set_io gives IO nodes a base annotation; annotate() then replaces it
    # with the caller's per-input and per-output qspecs.
    quantizer.set_global(config).set_io(config)
    for module_name, module_config in (module_name_quant_configs or {}).items():
        quantizer.set_module_name(module_name, module_config)
    return quantizer
