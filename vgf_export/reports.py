"""Export reports and debug logging (the seed's ``utils`` module).

:func:`build_export_report` describes a lowered program as data: each
delegate's backend and the ops inside it, the ops left on the CPU, and the IO
quantization parameters. :func:`emit_export_report` prints it when verbose;
either way it is returned (and written among the artifacts).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import torch
from torch.fx import GraphModule, Node

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
