"""One case, both ways, in the worker child: the project's path and ExecuTorch's own.

:func:`evaluate` exports a case twice more than the suite does:

* **project**: ``export_model`` as the suite calls it (GridSamplerBackend,
  the routing workaround), its lowered program on the TOSA reference model and
  the grid-sampler reference (the suite's numerics; the Vulkan tier is
  bit-exact with that path, ``test_vulkan``);
* **upstream**: ``export_model(..., grid_sampler_lowering="upstream")``:
  ExecuTorch 1.5's VGF lowering of ``grid_sampler_2d`` (TOSA CUSTOM carrying a
  SPIR-V shader, ``get_vgf_snorm_quantization_config``), once with ``glslc``
  on PATH and once without (the fused base-grid + flow path compiles a shader
  with it at export time). The TOSA reference model cannot run a CUSTOM
  operator, so the upstream program runs with its VGF delegates on Vulkan
  (scenario runner + ML emulation layer, :mod:`vgf_conformance.oracles.vulkan`)
  and its CPU ops in torch.

Both are compared with the same references: the float model on the raw
inputs, and the project's PT2E fake-quantized program (and the float model
on the inputs as the project's program dequantizes them); the upstream
program also with its own fake-quantized program. Errors are in LSB of each
output, the maximum over outputs.

The outcome is JSON-native (:mod:`vgf_conformance.native.report` reads it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch

from vgf_conformance import speed_patches
from vgf_conformance.cases import CASES
from vgf_conformance.oracles.compare import compare, dequantize, output_units
from vgf_conformance.oracles.delegates import DELEGATES, from_layout
from vgf_conformance.oracles.lowered import LoweredProgram, output_quant, quantize_inputs
from vgf_conformance.oracles.numerics import measure
from vgf_conformance.oracles.references import ORACLES, Subject, as_list
from vgf_conformance.oracles.vulkan.runner import run_scenario
from vgf_conformance.oracles.vulkan.scenario import ScenarioBuilder
from vgf_conformance.oracles.vulkan.stack import site_package
from vgf_conformance.text import tail
from vgf_export import ExportStageError, export_model
from vgf_export.names import VGF_BACKEND

#: Options of the project's own grid-sampler lowering: the upstream export has
#: no use for them (its quantization config decides the grid and the output).
PROJECT_ONLY_OPTIONS = ("grid_sampler_grid_input_qspec", "quantize_grid_sample_output")
#: What ExecuTorch names the custom operators in a TOSA CUSTOM's operator_name.
UPSTREAM_SAMPLER_OP = b"torch.nn.functional.grid_sample"
FUSED_FLOW_OP = b"torch.nn.functional.grid_sample.flow_offset"
#: The oracles the two paths are compared on (the project's reference programs).
COMPARED = ("vs_float", "vs_fake_quant", "vs_float_dq")


def glslc_dir() -> Path | None:
    """Where the pinned scenario-runner wheel keeps its ``glslc``."""
    package = site_package("scenario_runner")
    if package is None:
        return None
    directory = package / "binaries" / "bin"
    return directory if (directory / "glslc").exists() else None


def _path_without_glslc(path: str) -> str:
    return os.pathsep.join(d for d in path.split(os.pathsep) if d and not (Path(d) / "glslc").exists())


def set_glslc(available: bool) -> None:
    """Put the wheel's ``glslc`` on PATH, or take every ``glslc`` off it."""
    path = _path_without_glslc(os.environ.get("PATH", ""))
    directory = glslc_dir()
    if available:
        if directory is None:
            raise RuntimeError("glslc: the ai-ml-sdk-scenario-runner wheel's binaries/bin/glslc is missing")
        path = os.pathsep.join([str(directory), path])
    os.environ["PATH"] = path


def _max(comparisons) -> float:
    return round(max(c.max_lsb for c in comparisons), 2) if comparisons else 0.0


def _failure(error: BaseException) -> dict:
    if isinstance(error, ExportStageError):
        cause = error.cause
        chain, seen = [], set()
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            chain.append(f"{type(cause).__name__}: {cause}")
            cause = cause.__cause__ or cause.__context__
        return {"stage": error.stage, "error": tail("\n".join(chain), 12)}
    return {"stage": "export", "error": tail(traceback.format_exc(), 12)}


def _delegation(result) -> dict:
    """Where the grid samplers went, and which operators the TOSA has."""
    sampler_delegates = [d.backend for d in result.report.delegates
                         if any("grid_sampler" in op for op in d.ops)]
    tosa = b"".join(f.path.read_bytes() for f in result.artifacts.delegate_files("tosa"))
    return {
        "delegates": [d.backend for d in result.report.delegates],
        "sampler_delegates": sampler_delegates,
        "sampler_on_cpu": any("grid_sampler" in op for op in result.report.cpu_ops),
        "cpu_ops": [op for op in result.report.cpu_ops if "quantized_decomposed" not in op],
        "custom_ops": tosa.count(UPSTREAM_SAMPLER_OP),
        "fused_flow_ops": tosa.count(FUSED_FLOW_OP),
        "converted": len(result.artifacts.delegate_files("vgf")) == sum(
            d.backend == VGF_BACKEND for d in result.report.delegates),
    }


def _tosa_digest(result) -> str:
    import hashlib

    digest = hashlib.sha256()
    for f in result.artifacts.delegate_files("tosa"):
        digest.update(f.path.read_bytes())
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------
# The upstream program with its VGF delegates on Vulkan
# ---------------------------------------------------------------------------
def _run_vgf_on_vulkan(vgf_files: dict[int, Path], workdir: Path, seconds: list, stable: list):
    """A :class:`~vgf_conformance.oracles.delegates.DelegateReference` run for VGF
    delegates: each call is a scenario of its own (one ``dispatch_vgf``;
    image IO aliased through memory groups), run in a child process, twice
    (``stable`` gets whether the two runs wrote the same outputs)."""

    def run(program, index, lowered, inputs, in_orders, out_orders):
        call = program.calls[-1]
        values = {node: value for (node, _), value in zip(call.inputs, inputs)}
        for node, _ in call.outputs:  # shapes and dtypes for the scenario's output tensors
            values[node] = torch.zeros(node.meta["val"].shape, dtype=node.meta["val"].dtype)
        builder = ScenarioBuilder(SimpleNamespace(values=values), workdir / f"delegate{index}",
                                  {index: vgf_files[index]})
        builder.add_vgf(call)
        builder.finish()
        seconds.append(run_scenario(builder.scenario))
        got = builder.outputs()
        # The same scenario again from a directory whose path is 6 characters
        # longer: the upstream VGFs' outputs were seen to change with the
        # length of that path (all zeros at one length), so every run is
        # repeated and the two compared.
        again = builder.workdir.with_name(builder.workdir.name + "-again")
        shutil.rmtree(again, ignore_errors=True)
        shutil.copytree(builder.workdir, again)
        for out in again.glob("*.out.npy"):
            out.unlink()
        seconds.append(run_scenario(again / builder.scenario.name))
        stable.append(all(np.array_equal(got[uid], np.load(again / builder.tensors[uid]["dst"]))
                          for uid in got))
        outputs = []
        for node, order in call.outputs:
            uid = f"v_{node.name}"
            physical = got[uid].reshape(builder.tensors[uid]["dims"])
            outputs.append(from_layout(physical, order).to(node.meta["val"].dtype))
        return tuple(outputs)

    return run


def run_on_vulkan(result, inputs, workdir: Path) -> tuple[list[torch.Tensor], float, bool]:
    """The exported program's outputs (dequantized) with its VGF delegates on
    Vulkan and its CPU ops in torch; the runners' wall seconds; whether each
    delegate's second run wrote the same outputs as its first."""
    vgf_files = {f.index: f.path for f in result.artifacts.delegate_files("vgf")}
    seconds: list[float] = []
    stable: list[bool] = []
    vulkan = dataclasses.replace(DELEGATES[VGF_BACKEND], run=_run_vgf_on_vulkan(vgf_files, workdir, seconds, stable))
    program = LoweredProgram(result.edge_program, {}, delegates={**DELEGATES, VGF_BACKEND: vulkan})
    raw = program.run_program(*quantize_inputs(inputs, result.edge_program, result.io_quant_params))
    params = output_quant(result.edge_program, result.io_quant_params)
    return [dequantize(q, p) for q, p in zip(raw, params)], round(sum(seconds), 3), all(stable)


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------
def _export(case, root: Path, **kwargs):
    speed_patches.enable()
    return export_model(case.model(), case.make_inputs(), artifacts_root=root, **kwargs)


def _project_from_golden(case) -> dict | None:
    """The project's path as the case's golden records it (the suite checks
    that every run still measures the same), or None without one."""
    import json

    from vgf_conformance.goldens.store import golden_path

    path = golden_path(case.id)
    if not path.exists():
        return None
    golden = json.loads(path.read_text())
    outputs = (golden.get("numerics") or {}).get("outputs")
    if not outputs:
        return None
    delegates = [d.get("backend") for d in golden.get("delegates") or [] if isinstance(d, dict)]
    return {"exports": True, "source": "golden", "delegates": delegates,
            "max_lsb": {name: round(max(o[name]["max_lsb"] for o in outputs), 2) for name in COMPARED}}


@contextlib.contextmanager
def _count_glslc_use(calls: list):
    """Count calls of ExecuTorch's only export-time use of glslc: compiling
    the fused flow-offset shader (``vgf/shaders/grid_sampler.py``)."""
    from executorch.backends.arm.vgf.shaders import grid_sampler

    real = grid_sampler._compile_flow_offset_grid_sampler_shader

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    with mock.patch.object(grid_sampler, "_compile_flow_offset_grid_sampler_shader", counted):
        yield


def _project_export(case, root: Path):
    """The project's path exported and measured now: its record and result."""
    result = None
    try:
        result = _export(case, root, **case.export_kwargs())
        numerics = measure(case, result)
        return {"exports": True, "source": "export", **_delegation(result),
                "max_lsb": {name: _max(numerics.comparisons[name]) for name in COMPARED}}, result
    except Exception as error:  # noqa: BLE001 - recorded: the project path failed for this case
        return {"exports": result is not None, "source": "export", **_failure(error)}, result


def evaluate(request: dict) -> dict:
    """Both paths of one case (``request``: ``case``, ``workdir``, ``glslc``:
    "both", "with" or "without"; ``project``: "golden" takes the project's
    numbers from the case's golden where it has them, "export" exports it).
    Never raises for a case's failure.

    With "both", the export without glslc is made only where the export with
    it consulted glslc (ExecuTorch reached the fused flow-offset path): where
    it did not, nothing in the export can depend on it."""
    case = CASES[request["case"]]
    root = Path(request.get("workdir") or tempfile.mkdtemp(prefix="native-")) / case.id
    glslc_modes = {"both": (True, False), "with": (True,), "without": (False,)}[request.get("glslc", "both")]
    outcome: dict = {"case": case.id, "family": case.family, "seconds": {}}
    started = time.perf_counter()

    # The project's path: what the suite measures.
    project_result = None
    golden = _project_from_golden(case) if request.get("project", "export") == "golden" else None
    if golden is not None:
        outcome["project"] = golden
    else:
        outcome["project"], project_result = _project_export(case, root / "project")
    outcome["seconds"]["project"] = round(time.perf_counter() - started, 3)

    # ExecuTorch's own lowering, with and without glslc on PATH.
    kwargs = {k: v for k, v in case.export_kwargs().items() if k not in PROJECT_ONLY_OPTIONS}
    ignored = sorted(k for k in case.export_kwargs() if k in PROJECT_ONLY_OPTIONS)
    saved_path = os.environ.get("PATH", "")
    results = {}
    try:
        for available in glslc_modes:
            key = "with_glslc" if available else "without_glslc"
            if not available and len(glslc_modes) == 2 and not outcome["with_glslc"]["glslc_calls"]:
                outcome[key] = {"skipped": "the export with glslc on PATH never consulted it"}
                continue
            t0 = time.perf_counter()
            set_glslc(available)
            calls: list = []
            try:
                with _count_glslc_use(calls):
                    result = _export(case, root / f"upstream-{key}", grid_sampler_lowering="upstream", **kwargs)
                results[key] = result
                outcome[key] = {"exports": True, **_delegation(result), "tosa": _tosa_digest(result)}
            except Exception as error:  # noqa: BLE001 - recorded per case
                outcome[key] = {"exports": False, **_failure(error)}
            outcome[key]["glslc_calls"] = len(calls)
            outcome["seconds"][key] = round(time.perf_counter() - t0, 3)
    finally:
        os.environ["PATH"] = saved_path
    outcome["ignored_options"] = ignored

    # Run the upstream export on Vulkan (glslc on PATH where both were made).
    key = "with_glslc" if "with_glslc" in results else next(iter(results), None)
    if key is not None:
        t0 = time.perf_counter()
        outcome["run"] = _run_upstream(case, results[key], project_result, root / f"upstream-{key}" / "vulkan")
        outcome["run"]["export"] = key
        outcome["seconds"]["run"] = round(time.perf_counter() - t0, 3)
    outcome["seconds"]["total"] = round(time.perf_counter() - started, 3)
    return outcome


def _run_upstream(case, result, project_result, workdir: Path) -> dict:
    inputs = case.make_inputs()
    try:
        outputs, runner_seconds, stable = run_on_vulkan(result, inputs, workdir)
    except Exception as error:  # noqa: BLE001 - recorded: the upstream program does not run on Vulkan
        message = tail(f"{type(error).__name__}: {error}", 12)
        return {"runs": False, "error": re.sub(r"/\S*/", "", message)}
    # The same references as the project's path: the float model; with the
    # project's export at hand (``--project export``) also its fake-quantized
    # program and the inputs as it dequantizes them. And the upstream's own
    # fake-quantized program (is the lowering faithful to its own PT2E program?).
    model = case.model().eval()
    params = output_quant(result.edge_program, result.io_quant_params)
    units = output_units(params)
    with torch.no_grad():
        references = {"vs_float": as_list(model(*inputs))}
        if project_result is not None:
            subject = Subject(model, inputs, project_result.quantized_module)
            references |= {name: ORACLES[name].reference(subject) for name in COMPARED if name != "vs_float"}
        references["vs_own_fake_quant"] = Subject(model, inputs, result.quantized_module).fake_quant_outputs
    max_lsb = {}
    for name, expected in references.items():
        comparisons = [compare(r, b.reshape(r.shape), u) for r, b, u in zip(as_list(expected), outputs, units)]
        max_lsb[name] = _max(comparisons)
    return {"runs": True, "stable": stable, "runner_seconds": runner_seconds, "max_lsb": max_lsb,
            "units": [float(f"{u:.6g}") for u in units],
            "finite": bool(all(np.isfinite(o.numpy()).all() for o in outputs))}


def warm_up() -> None:
    """Import the stack before saying ready (a child's first case is then not slower)."""
    import executorch.backends.arm.vgf  # noqa: F401
