"""``export_model``: the seed's export flow on the pinned ExecuTorch.

PyTorch module -> torch.export -> large-resize split -> RGB->RGBA pad ->
PT2E quantization (VgfQuantizerWrapper) -> to_edge_transform_and_lower with
the VGF partitioner (wrapped) -> separate lowering of grid samplers ->
IO quant params stripped and recorded -> report and artifacts.

Failures inside the toolchain are raised as :class:`ExportStageError` naming
the stage (export, quantize, partition, lower, convert, serialize); bad
arguments are ``ValueError``s naming the argument.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F
from executorch.backends.arm.vgf import VgfCompileSpec
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.passes.quantize_io_pass import extract_io_quant_params
from torch.overrides import TorchFunctionMode
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from vgf_export import artifacts as _artifacts
from vgf_export.grid_sampler_backend import (
    GridSamplerOnlyPartitioner,
    pad_rgb_grid_sampler_channels_pass,
)
from vgf_export.partitioner import VgfPartitionerWrapper, make_vgf_partitioner
from vgf_export.patches import BILINEAR_SCALE_FACTOR, apply_arm_backend_monkey_patch
from vgf_export.passes import (
    rewrite_large_bilinear_downsample_pass,
    set_tensors_to_channels_last_pass,
)
from vgf_export.quantizer import build_quantizer
from vgf_export.reports import (
    ExportReport,
    build_export_report,
    emit_export_report,
    enable_vgf_debug_logging,
)
from vgf_export.workarounds import check_disabled

#: Need FP for grid positions and int16 for the SNORM16 grid.
TOSA_SPEC = "TOSA-1.0+INT+FP+int16"

#: How ``grid_sampler_2d`` is lowered (``export_model(grid_sampler_lowering=...)``):
#: "project": this package's GridSamplerBackend, the VGF partitioner kept off
#: the op (the seed's flow, the default); "upstream": ExecuTorch's own VGF
#: lowering (TOSA CUSTOM + SPIR-V inside the VGF delegate) with its SNORM
#: quantization config, and none of this package's grid-sampler steps.
GRID_SAMPLER_LOWERINGS = ("project", "upstream")



class ExportStageError(RuntimeError):
    """A toolchain failure, with the stage of the flow it happened in. For a
    child process that timed out, the message ends with its output's tail."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        self.stage = stage
        self.cause = cause
        message = f"[{stage}] {type(cause).__name__}: {cause}"
        if isinstance(cause, subprocess.TimeoutExpired):
            tail = _tail(cause.stdout) + _tail(cause.stderr)
            message += f"\n--- output tail ---\n{tail}" if tail else " (no output)"
        super().__init__(message)


def _tail(output: bytes | str | None, lines: int = 20) -> str:
    if not output:
        return ""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    return "\n".join(text.splitlines()[-lines:]) + "\n"


@dataclasses.dataclass
class ExportResult:
    """The seed's return value ``(edge_program, example_inputs,
    io_quant_params)`` (it unpacks like the seed's tuple), plus the report and
    the paths of the artifacts written."""

    edge_program: Any
    example_inputs: tuple[torch.Tensor, ...]
    io_quant_params: dict[str, Any]
    report: ExportReport
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


class _Stage:
    """Tracks the stage of the flow and the seconds spent in each; wraps
    toolchain errors with the stage they happened in."""

    def __init__(self) -> None:
        self.current = "export"
        self.seconds: dict[str, float] = {}
        self._since = time.perf_counter()

    @property
    def current(self) -> str:
        return self._current

    @current.setter
    def current(self, name: str) -> None:
        now = time.perf_counter()
        if hasattr(self, "_current"):
            self.seconds[self._current] = self.seconds.get(self._current, 0.0) + now - self._since
        self._current, self._since = name, now

    def __call__(self, name: str) -> "_Stage":
        self.current = name
        return self

    def stop(self) -> dict[str, float]:
        self.current = "done"
        self.seconds.pop("done", None)
        return self.seconds

    def __enter__(self) -> "_Stage":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None or isinstance(exc, (ExportStageError, KeyboardInterrupt)):
            return False
        stage = self.current
        if stage == "lower" and (
            "Vgf compiler failed" in str(exc) or isinstance(exc, subprocess.TimeoutExpired)
        ):
            stage = "convert"
        raise ExportStageError(stage, exc) from exc


#: The stage of the export running on each thread (thread id -> its tracker):
#: a watchdog outside the export reads it (current_stage) to say where a hung
#: export is. Nothing else reads or changes it.
_RUNNING: dict[int, _Stage] = {}


def current_stage(thread_id: int) -> str | None:
    """The stage of the flow the export on thread ``thread_id`` is in (None:
    no export running there)."""
    stage = _RUNNING.get(thread_id)
    return stage.current if stage is not None else None


class _StageTrackingPartitioner(VgfPartitionerWrapper):
    """Marks the end of partitioning, so later errors count as lowering."""

    def __init__(self, *args, stage: _Stage, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._stage = stage

    def partition(self, exported_program):
        self._stage.current = "partition"
        result = super().partition(exported_program)
        self._stage.current = "lower"
        return result


def _ensure_model_converter_found() -> None:
    # ExecuTorch looks for model-converter on PATH; a venv's bin may not be.
    if os.environ.get("MODEL_CONVERTER_PATH") or shutil.which("model-converter"):
        return
    candidate = Path(sys.executable).parent / "model-converter"
    if candidate.exists():
        os.environ["MODEL_CONVERTER_PATH"] = str(candidate)


def _check_qspec_types(name: str, qspecs: tuple) -> None:
    for i, q in enumerate(qspecs):
        if q is not None and not isinstance(q, QuantizationSpec):
            raise ValueError(
                f"{name}[{i}] must be a QuantizationSpec or None, got {type(q).__name__}"
            )


def _check_arguments(
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


def _probe_eager(model: torch.nn.Module, example_inputs: tuple) -> int:
    """Run the model once on the example inputs, refusing non-4-D grid_sample
    arguments; returns the number of tensor outputs."""
    with torch.no_grad(), _GridSampleShapeCheck():
        outputs = model(*example_inputs)
    leaves = torch.utils._pytree.tree_leaves(outputs)
    return sum(isinstance(leaf, torch.Tensor) for leaf in leaves)


def _check_output_qspecs(
    quantized_output_qspecs: tuple, output_count: int, enable_pt2e_quantization: bool
) -> None:
    _check_qspec_types("quantized_output_qspecs", quantized_output_qspecs)
    if enable_pt2e_quantization and len(quantized_output_qspecs) != output_count:
        raise ValueError(
            "quantized_output_qspecs must have one entry per model output when PT2E "
            f"quantization is enabled, got {len(quantized_output_qspecs)} qspecs for "
            f"{output_count} outputs"
        )


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
    workarounds of :mod:`vgf_export.workarounds` off (to show they are needed).

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
    enable_vgf_debug_logging(verbose)
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
        _check_arguments(
            model,
            example_inputs,
            quantized_input_qspecs,
            module_name_quant_configs,
            enable_pt2e_quantization,
        )
        output_count = _probe_eager(model, example_inputs)
        _check_output_qspecs(quantized_output_qspecs, output_count, enable_pt2e_quantization)
        paths = _artifacts.prepare(
            artifacts_root, intermediate_artifacts_root, overwrite=overwrite_artifacts
        )
        compile_spec = VgfCompileSpec(TOSA_SPEC).dump_intermediate_artifacts_to(
            str(paths.intermediates)
        )

        stage = _Stage()
        _RUNNING[threading.get_ident()] = stage
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
            vgf_partitioner = _StageTrackingPartitioner(
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

        report = build_export_report(
            edge_program, io_quant_params, rewritten_resizes=rewritten_resizes, patches=patches
        )
        emit_export_report(report, verbose)
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
        _RUNNING.pop(threading.get_ident(), None)
        BILINEAR_SCALE_FACTOR.reset(scale_factor_fix)

