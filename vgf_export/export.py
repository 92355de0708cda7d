"""``export_model``: the seed's export flow on the pinned ExecuTorch.

PyTorch module -> torch.export -> large-resize split -> RGB->RGBA pad ->
PT2E quantization (VgfQuantizerWrapper) -> to_edge_transform_and_lower with
the VGF partitioner (wrapped) -> separate lowering of grid samplers ->
IO quant params stripped and recorded -> report and artifacts.

Failures inside the toolchain are raised as :class:`ExportStageError` naming
the stage (export, quantize, partition, lower, convert, serialize; see
:mod:`vgf_export.stages`); bad arguments are ``ValueError``s naming the
argument (:mod:`vgf_export.arguments`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from executorch.backends.arm.vgf import VgfCompileSpec
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.passes.quantize_io_pass import extract_io_quant_params
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from vgf_export import artifacts as _artifacts
from vgf_export.arguments import check_arguments, check_output_qspecs, probe_eager
from vgf_export.grid_sampler_backend import (
    GridSamplerOnlyPartitioner,
    pad_rgb_grid_sampler_channels_pass,
)
from vgf_export.partitioner import make_vgf_partitioner
from vgf_export.patches import BILINEAR_SCALE_FACTOR, apply_arm_backend_monkey_patch
from vgf_export.passes import (
    rewrite_large_bilinear_downsample_pass,
    set_tensors_to_channels_last_pass,
)
from vgf_export.quantizer import build_quantizer
from vgf_export.stages import (
    ExportStageError,
    StageTrackingPartitioner,
    start_tracking,
    stop_tracking,
)
from vgf_export.names import check_disabled

# The flow's public names; ExportStageError is vgf_export.stages', re-exported here.
__all__ = ["ExportResult", "ExportStageError", "GRID_SAMPLER_LOWERINGS", "TOSA_SPEC", "export_model"]

#: Need FP for grid positions and int16 for the SNORM16 grid.
TOSA_SPEC = "TOSA-1.0+INT+FP+int16"

#: How ``grid_sampler_2d`` is lowered (``export_model(grid_sampler_lowering=...)``):
#: "project": this package's GridSamplerBackend, the VGF partitioner kept off
#: the op (the seed's flow, the default); "upstream": ExecuTorch's own VGF
#: lowering (TOSA CUSTOM + SPIR-V inside the VGF delegate) with its SNORM
#: quantization config, and none of this package's grid-sampler steps.
GRID_SAMPLER_LOWERINGS = ("project", "upstream")


@dataclasses.dataclass
class ExportResult:
    """The seed's return value ``(edge_program, example_inputs,
    io_quant_params)`` (it unpacks like the seed's tuple), plus the report and
    the paths of the artifacts written."""

    edge_program: Any
    example_inputs: tuple[torch.Tensor, ...]
    io_quant_params: dict[str, Any]
    report: _artifacts.ExportReport
    artifacts: _artifacts.ArtifactPaths
    #: The PT2E-converted (fake-quantized) module; None for a float export.
    quantized_module: torch.fx.GraphModule | None = None
    #: Wall seconds per stage of the flow.
    stage_seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def _as_tuple(self) -> tuple[Any, Any, Any]:
        return (self.edge_program, self.example_inputs, self.io_quant_params)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._as_tuple())

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> Any:
        return self._as_tuple()[index]


def _ensure_model_converter_found() -> None:
    # ExecuTorch looks for model-converter on PATH; a venv's bin may not be.
    if os.environ.get("MODEL_CONVERTER_PATH") or shutil.which("model-converter"):
        return
    candidate = Path(sys.executable).parent / "model-converter"
    if candidate.exists():
        os.environ["MODEL_CONVERTER_PATH"] = str(candidate)


def export_model(
    model: torch.nn.Module,
    model_inputs,
    *,
    artifacts_root: str | Path = Path("artifacts"),
    intermediate_artifacts_root: str | Path | None = None,
    quantized_input_qspecs: Sequence[QuantizationSpec | None] = (),
    quantized_output_qspecs: Sequence[QuantizationSpec | None] = (),
    module_name_quant_configs: dict[str, object | None] | None = None,
    grid_sampler_grid_input_qspec: QuantizationSpec | None = None,
    quantize_grid_sample_output: bool = True,
    enable_pt2e_quantization: bool = True,
    overwrite_artifacts: bool = False,
    disable_workarounds: Sequence[str] = (),
    grid_sampler_lowering: str = "project",
) -> ExportResult:
    """Export ``model`` for VGF as the seed does; see the module docstring.

    Artifacts already present under ``artifacts_root`` are never replaced
    unless ``overwrite_artifacts=True``. ``disable_workarounds`` turns named
    workarounds of :mod:`vgf_export.names` off (to show they are needed).

    ``grid_sampler_lowering="upstream"`` lowers ``grid_sampler_2d`` the way
    ExecuTorch 1.5 does by itself (see :data:`GRID_SAMPLER_LOWERINGS`): the
    VGF partitioner claims it, the quantizer's global config is
    ``get_vgf_snorm_quantization_config()`` (the caller's IO qspecs still
    apply; ``grid_sampler_grid_input_qspec`` and ``quantize_grid_sample_output``
    belong to this package's lowering and are not used), no RGB->RGBA pad,
    no Q/DQ detagging next to the sampler, no GridSamplerBackend. It is how
    ``python -m vgf_conformance.native`` compares the two paths.
    """
    if grid_sampler_lowering not in GRID_SAMPLER_LOWERINGS:
        raise ValueError(
            f"grid_sampler_lowering must be one of {list(GRID_SAMPLER_LOWERINGS)}, "
            f"got {grid_sampler_lowering!r}"
        )
    upstream_sampler = grid_sampler_lowering == "upstream"
    verbose = os.environ.get("EXPORT_EXECUTORCH_VERBOSE", "0") == "1"
    _artifacts.enable_vgf_debug_logging(verbose)
    patches = apply_arm_backend_monkey_patch()
    _ensure_model_converter_found()

    example_inputs = tuple(model_inputs)
    quantized_input_qspecs = tuple(quantized_input_qspecs)
    quantized_output_qspecs = tuple(quantized_output_qspecs)
    module_name_quant_configs = dict(module_name_quant_configs or {})
    disabled = check_disabled(disable_workarounds)
    # The bilinear-scale-factor workaround is a patch of the Arm backend that
    # acts per export (off when disabled here).
    scale_factor_fix = BILINEAR_SCALE_FACTOR.set("bilinear-scale-factor" not in disabled)
    try:
        check_arguments(
            model,
            example_inputs,
            quantized_input_qspecs,
            module_name_quant_configs,
            enable_pt2e_quantization,
        )
        output_count = probe_eager(model, example_inputs)
        check_output_qspecs(quantized_output_qspecs, output_count, enable_pt2e_quantization)
        paths = _artifacts.prepare(
            artifacts_root, intermediate_artifacts_root, overwrite=overwrite_artifacts
        )
        compile_spec = VgfCompileSpec(TOSA_SPEC).dump_intermediate_artifacts_to(
            str(paths.intermediates)
        )

        stage = start_tracking()
        with stage("export"):
            exported_program = torch.export.export(model, example_inputs, strict=True)
            # torch 2.13's module() adds a `_guards_fn` call_module node, which
            # Arm's annotation passes reject ("call_module is not supported").
            captured_graph = exported_program.module(check_guards="no-guards-module" in disabled)
        rewritten_resizes = 0
        if "resize-split" not in disabled:
            _, rewritten_resizes = rewrite_large_bilinear_downsample_pass(captured_graph)
        if verbose and rewritten_resizes:
            print("Rewrote oversized bilinear downsample nodes before quantization:",
                  rewritten_resizes)

        quantized_input_idxs = [i for i, q in enumerate(quantized_input_qspecs) if q is not None]
        quantized_output_idxs = [i for i, q in enumerate(quantized_output_qspecs) if q is not None]

        if not upstream_sampler:  # upstream pads RGB to RGBA in its own rewrite
            pad_rgb_grid_sampler_channels_pass(captured_graph)

        if enable_pt2e_quantization:
            with stage("quantize"):
                quantizer = build_quantizer(
                    compile_spec,
                    input_qspecs=quantized_input_qspecs,
                    output_qspecs=quantized_output_qspecs,
                    grid_sampler_grid_input_qspec=grid_sampler_grid_input_qspec,
                    quantize_grid_sample_output=quantize_grid_sample_output,
                    module_name_quant_configs=module_name_quant_configs,
                    upstream_grid_sampler=upstream_sampler,
                )
                quantized_graph = quantizer._quantize_with_submodules(
                    captured_graph, calibration_samples=[example_inputs], is_qat=False
                )
                exported = torch.export.export(quantized_graph, example_inputs)
        else:
            with stage("export"):
                exported = torch.export.export(captured_graph, example_inputs, strict=True)

        with stage("partition"):
            vgf_partitioner = StageTrackingPartitioner(
                make_vgf_partitioner(
                    compile_spec,
                    claim_grid_sampler=upstream_sampler or "grid-sampler-routing" in disabled,
                ),
                quantized_input_idxs=quantized_input_idxs,
                quantized_output_idxs=quantized_output_idxs,
                detag_qdq="qdq-detag" not in disabled,
                detag_grid_sampler_qdq=not upstream_sampler,
                sort_tags="partition-order" not in disabled,
                stage=stage,
            )
            edge_program = to_edge_transform_and_lower(
                exported,
                # Channels-last after any RGB->RGBA padding.
                transform_passes=[set_tensors_to_channels_last_pass],
                partitioner=[vgf_partitioner],
                compile_config=EdgeCompileConfig(_check_ir_validity=False),
            )
        # A separate lowering: with both partitioners in one call, EXIR would
        # decompose every op the grid-sampler partitioner does not name, and VGF
        # cannot take the results (affine_grid -> linspace -> int64 ops).
        with stage("lower"):
            if not upstream_sampler:
                edge_program = edge_program.to_backend(GridSamplerOnlyPartitioner())
            if enable_pt2e_quantization:
                io_quant_params = extract_io_quant_params(
                    edge_program,
                    input_idxs=quantized_input_idxs,
                    output_idxs=quantized_output_idxs,
                )
            else:
                io_quant_params = {"inputs": {}, "outputs": {}}

        report = _artifacts.build_export_report(
            edge_program, io_quant_params, rewritten_resizes=rewritten_resizes, patches=patches
        )
        _artifacts.emit_export_report(report, verbose)
        with stage("serialize"):
            _artifacts.write(paths, edge_program, report,
                             pin_layouts="pte-delegate-layouts" not in disabled)
        return ExportResult(
            edge_program,
            example_inputs,
            io_quant_params,
            report,
            paths,
            quantized_module=quantized_graph if enable_pt2e_quantization else None,
            stage_seconds=stage.stop(),
        )
    finally:
        stop_tracking()
        BILINEAR_SCALE_FACTOR.reset(scale_factor_fix)
