"""The argument checks of ``export_model``: each bad argument is a ``ValueError`` naming it.

:func:`check_arguments` runs before anything is exported; the model is then run
once eagerly (:func:`probe_eager`, which also refuses non-4-D grid_sample
arguments) to count its outputs for :func:`check_output_qspecs`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torchao.quantization.pt2e.quantizer import QuantizationSpec


def _check_qspec_types(name: str, qspecs: tuple) -> None:
    for i, q in enumerate(qspecs):
        if q is not None and not isinstance(q, QuantizationSpec):
            raise ValueError(
                f"{name}[{i}] must be a QuantizationSpec or None, got {type(q).__name__}"
            )


def check_arguments(
    model: torch.nn.Module,
    example_inputs: tuple,
    quantized_input_qspecs: tuple,
    module_name_quant_configs: dict,
    enable_pt2e_quantization: bool,
) -> None:
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not example_inputs:
        raise ValueError("export_model requires at least one model input tensor.")
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise ValueError(
                f"model_inputs[{i}] must be a torch.Tensor, got {type(x).__name__}"
            )
    _check_qspec_types("quantized_input_qspecs", quantized_input_qspecs)
    if enable_pt2e_quantization and len(quantized_input_qspecs) != len(example_inputs):
        raise ValueError(
            "quantized_input_qspecs must have one entry per model input when PT2E "
            f"quantization is enabled, got {len(quantized_input_qspecs)} qspecs for "
            f"{len(example_inputs)} inputs"
        )
    known = {name for name, _ in model.named_modules()}  # "" is the whole model
    unknown = sorted(set(module_name_quant_configs) - known)
    if unknown:
        raise ValueError(
            f"module_name_quant_configs names unknown modules {unknown}; "
            f"the model's submodules are {sorted(known)}"
        )


class _GridSampleShapeCheck(TorchFunctionMode):
    """Refuses grid_sample calls whose image or grid is not 4-D, before
    torch.export turns them into a less readable error (or a 3-D sampler)."""

    _FUNCS = (F.grid_sample, torch.grid_sampler, torch.grid_sampler_2d)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self._FUNCS and len(args) >= 2:
            image, grid = args[0], args[1]
            if image.ndim != 4:
                raise ValueError(
                    "model_inputs: grid_sample needs a 4-D image [N, C, H, W], "
                    f"got shape {list(image.shape)}"
                )
            if grid.ndim != 4 or grid.shape[-1] != 2:
                raise ValueError(
                    "model_inputs: grid_sample needs a 4-D grid [N, H_out, W_out, 2], "
                    f"got shape {list(grid.shape)}"
                )
        return func(*args, **(kwargs or {}))


def probe_eager(model: torch.nn.Module, example_inputs: tuple) -> int:
    """Run the model once on the example inputs, refusing non-4-D grid_sample
    arguments; returns the number of tensor outputs."""
    with torch.no_grad(), _GridSampleShapeCheck():
        outputs = model(*example_inputs)
    leaves = torch.utils._pytree.tree_leaves(outputs)
    return sum(isinstance(leaf, torch.Tensor) for leaf in leaves)


def check_output_qspecs(
    quantized_output_qspecs: tuple, output_count: int, enable_pt2e_quantization: bool
) -> None:
    _check_qspec_types("quantized_output_qspecs", quantized_output_qspecs)
    if enable_pt2e_quantization and len(quantized_output_qspecs) != output_count:
        raise ValueError(
            "quantized_output_qspecs must have one entry per model output when PT2E "
            f"quantization is enabled, got {len(quantized_output_qspecs)} qspecs for "
            f"{output_count} outputs"
        )
