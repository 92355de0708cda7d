"""Artifacts of one export, under stable names.

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
import shutil
from pathlib import Path

from vgf_export import names
from vgf_export.reports import ExportReport, lowered_modules


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
