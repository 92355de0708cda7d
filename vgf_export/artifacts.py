"""What one export leaves: its report, and its files under stable names.

:func:`build_export_report` describes a lowered program as data: each
delegate's backend and the ops inside it, the ops left on the CPU, and the IO
quantization parameters (the seed's ``utils`` module, with
:func:`enable_vgf_debug_logging`). :func:`emit_export_report` prints it when
verbose; either way it is returned, and written among the artifacts:

``artifacts_root/``
  ``program.pte``               the ExecuTorch program
  ``delegates/NN_vgf.tosa``     each VGF delegate's TOSA flatbuffer
  ``delegates/NN_vgf.vgf``      ... and its VGF
  ``delegates/NN_grid_sampler.json``  each grid-sampler delegate's payload
  ``io_quant_params.json``      the stripped IO quantization parameters
  ``report.json``               the export report

``NN`` is the delegate's position among the program's delegate calls. The
backend's own intermediates go to ``<intermediate root>/vgf_intermediates``.
Nothing already there is replaced unless ``overwrite`` is asked for.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import torch
from torch.fx import GraphModule, Node

from vgf_export import names


#: Loggers of the Arm backend that explain partitioning and lowering.
_ARM_LOGGERS = (
    "executorch.backends.arm",
    "executorch.exir.backend",
)


def enable_vgf_debug_logging(verbose: bool) -> None:
    """INFO-level logs of the Arm backend when ``verbose``, warnings otherwise."""
    level = logging.INFO if verbose else logging.WARNING
    if verbose and not logging.getLogger().handlers:
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    for name in _ARM_LOGGERS:
        logging.getLogger(name).setLevel(level)


def target_name(target) -> str:
    """Stable name of a call_function target: ``aten.add.Tensor``,
    ``quantized_decomposed.quantize_per_tensor.default``, ``getitem``."""
    name = getattr(target, "_name", None) or getattr(target, "__name__", None) or str(target)
    overload = getattr(target, "_overloadname", None)
    if "::" in name:
        name = name.replace("::", ".")
        if overload and not name.endswith(f".{overload}"):
            name = f"{name}.{overload}"
    return name


def op_name(node: Node) -> str:
    return target_name(node.target)


def call_functions(graph_module: GraphModule) -> list[Node]:
    return [n for n in graph_module.graph.nodes if n.op == "call_function"]


@dataclasses.dataclass
class DelegateReport:
    index: int
    backend: str
    ops: list[str]
    processed_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ExportReport:
    """What ended up where, as plain data."""

    delegates: list[DelegateReport]
    cpu_ops: list[str]
    io_quant_params: dict[str, Any]
    rewritten_resizes: int = 0
    patches: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delegates": [d.to_dict() for d in self.delegates],
            "cpu_ops": list(self.cpu_ops),
            "io_quant_params": self.io_quant_params,
            "rewritten_resizes": self.rewritten_resizes,
            "patches": list(self.patches),
        }

    def format(self) -> str:
        lines = [f"{len(self.delegates)} delegate(s)"]
        for d in self.delegates:
            lines.append(f"  [{d.index}] {d.backend}: {', '.join(d.ops) or '(no ops)'}")
        lines.append(f"CPU ops: {', '.join(self.cpu_ops) or '(none)'}")
        for side in ("inputs", "outputs"):
            for name, params in sorted(self.io_quant_params.get(side, {}).items()):
                lines.append(f"{side[:-1]} {name}: {params}")
        if self.rewritten_resizes:
            lines.append(f"split oversized bilinear downscales: {self.rewritten_resizes}")
        if self.patches:
            lines.append(f"backend patches applied: {', '.join(self.patches)}")
        return "\n".join(lines)


def lowered_modules(graph_module: GraphModule) -> list[torch.nn.Module]:
    """The lowered backend modules, in the order their calls appear."""
    modules = []
    for node in call_functions(graph_module):
        if op_name(node) == "executorch_call_delegate":
            modules.append(getattr(graph_module, node.args[0].target))
    return modules


def build_export_report(
    edge_program, io_quant_params: dict[str, Any], **extra: Any
) -> ExportReport:
    graph_module = edge_program.exported_program().graph_module
    delegates = []
    for index, lowered in enumerate(lowered_modules(graph_module)):
        inner = lowered.original_module.graph_module
        delegates.append(
            DelegateReport(
                index=index,
                backend=lowered.backend_id,
                ops=[op_name(n) for n in call_functions(inner)],
                processed_bytes=len(lowered.processed_bytes),
            )
        )
    cpu_ops = [
        op_name(n)
        for n in call_functions(graph_module)
        if op_name(n) not in ("executorch_call_delegate", "getitem")
    ]
    return ExportReport(delegates, cpu_ops, io_quant_params, **extra)


def emit_export_report(report: ExportReport, verbose: bool) -> ExportReport:
    if verbose:
        print(report.format())
    return report


# The files of an export.


@dataclasses.dataclass(frozen=True)
class ArtifactPaths:
    root: Path
    intermediates: Path

    # Where each file goes (names in vgf_export.names).
    program = property(lambda self: self.root / names.PROGRAM_FILE)
    delegates = property(lambda self: self.root / names.DELEGATES_DIR)
    io_quant_params = property(lambda self: self.root / names.IO_QUANT_PARAMS_FILE)
    report = property(lambda self: self.root / names.REPORT_FILE)

    def owned(self) -> list[Path]:
        """Everything an export writes, i.e. what it may replace."""
        return [self.program, self.delegates, self.io_quant_params, self.report,
                self.intermediates]

    def delegate_files(self, kind: str | None = None) -> list[names.DelegateFile]:
        """The delegates' files in call order (those of one ``kind``, e.g. "tosa")."""
        files = [names.DelegateFile.parse(p) for p in sorted(self.delegates.iterdir())] \
            if self.delegates.is_dir() else []
        return [f for f in files if kind is None or f.kind == kind]


def prepare(
    artifacts_root: str | Path,
    intermediate_artifacts_root: str | Path | None,
    *,
    overwrite: bool,
) -> ArtifactPaths:
    root = Path(artifacts_root)
    inter_root = Path(intermediate_artifacts_root) if intermediate_artifacts_root else root
    paths = ArtifactPaths(root=root, intermediates=inter_root / names.INTERMEDIATES_DIR)
    existing = [p for p in paths.owned() if p.exists()]
    if existing and not overwrite:
        listed = ", ".join(str(p) for p in existing)
        raise FileExistsError(
            f"artifacts_root {str(root)!r} already holds artifacts of an earlier "
            f"export ({listed}); pass overwrite_artifacts=True to replace them, "
            "or choose another artifacts_root"
        )
    for p in existing:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    root.mkdir(parents=True, exist_ok=True)
    paths.intermediates.mkdir(parents=True, exist_ok=True)
    return paths


def _delegate_tag(lowered) -> str | None:
    for node in lowered.original_module.graph_module.graph.nodes:
        tag = node.meta.get("delegation_tag")
        if tag:
            return tag
    return None


def write(paths: ArtifactPaths, edge_program, report: ExportReport, *, pin_layouts: bool = True) -> None:
    paths.delegates.mkdir(parents=True, exist_ok=True)
    graph_module = edge_program.exported_program().graph_module
    for index, lowered in enumerate(lowered_modules(graph_module)):
        def target(suffix: str, index=index, lowered=lowered) -> Path:  # this delegate's, bound now
            return paths.delegates / names.delegate_file_name(index, lowered.backend_id, suffix)

        if lowered.backend_id == names.VGF_BACKEND:
            target("vgf").write_bytes(lowered.processed_bytes)
            tag = _delegate_tag(lowered)
            dumped = sorted(paths.intermediates.glob(f"output_{tag}_*.tosa"))
            if len(dumped) != 1:
                raise RuntimeError(
                    f"expected one TOSA dump for delegate {tag} in {paths.intermediates}, "
                    f"found {[p.name for p in dumped]}"
                )
            shutil.copyfile(dumped[0], target("tosa"))
        elif lowered.backend_id == names.GRID_SAMPLER_BACKEND:
            target("json").write_bytes(lowered.processed_bytes)
        else:
            target("bin").write_bytes(lowered.processed_bytes)
    paths.io_quant_params.write_text(
        json.dumps(report.io_quant_params, indent=2, sort_keys=True) + "\n"
    )
    paths.report.write_text(json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n")
    # to_executorch() rewrites the program it is given (out variants, memory
    # planning); serialize a copy so the caller's edge program stays intact.
    program = copy.deepcopy(edge_program)
    if pin_layouts:  # the "pte-delegate-layouts" workaround
        from vgf_export.passes import pin_delegate_output_layouts

        pin_delegate_output_layouts(program)
    paths.program.write_bytes(program.to_executorch().buffer)
