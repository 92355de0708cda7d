"""Run a lowered program end to end on Vulkan: scenario runner + ML emulation
layer on Mesa's llvmpipe CPU device.

One scenario per program: each VGF delegate is a ``dispatch_vgf``, each
grid-sampler delegate a ``dispatch_compute`` of ``shaders/grid_sampler.comp``
(compiled by the runner), values between delegates are shared tensors, and
the images a grid sampler reads and writes alias int8 NHWC tensors as
``VK_FORMAT_R8G8B8A8_SNORM`` images through memory groups (the seed's layout
contract), and a quantized grid aliases its tensor as an ``R16G16_SNORM`` (or
``R8G8_SNORM``) image. Values no delegate produces (program inputs, ops left on the CPU)
come from the TOSA-reference run; every delegate output is read back.

Environment traps handled here (see shared/STACK.md): Debian 12's loader
enables explicit layers in VK_LAYER_PATH directory order, so the graph and
tensor layer manifests go in two directories, graph first; the manifests are
rewritten with absolute library paths; only the llvmpipe ICD is listed.

Several cases can share one runner process (:func:`run_scenarios` merges
their scenarios): the emulation layer compiles its shaders once per process,
and that is most of a small scenario's run time. A batch that fails is rerun
case by case, so a bad case fails alone.

``python -m conformance.oracles.vulkan SCENARIO.json`` reruns a saved scenario by hand.
"""

from __future__ import annotations

import ctypes.util
import dataclasses
import functools
import glob
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHADER = Path(__file__).resolve().parent / "shaders" / "grid_sampler.comp"
RUN_TIMEOUT = 180.0
INSTALL_HINT = (
    "install the Vulkan loader and Mesa's llvmpipe (Debian: apt-get install libvulkan1 "
    "mesa-vulkan-drivers; scripts/setup.sh does this as root) and the pinned "
    "ai-ml-sdk-scenario-runner and ai-ml-emulation-layer-for-vulkan wheels"
)

_TENSOR_FORMATS = {"int8": "VK_FORMAT_R8_SINT", "int16": "VK_FORMAT_R16_SINT",
                   "int32": "VK_FORMAT_R32_SINT", "float32": "VK_FORMAT_R32_SFLOAT"}
_NUMPY = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "float32": np.float32}
#: SNORM image formats of a quantized grid (two components: x, y), by dtype.
_GRID_IMAGE_FORMATS = {"int16": ("VK_FORMAT_R16G16_SNORM", 32767), "int8": ("VK_FORMAT_R8G8_SNORM", 127)}


class VulkanUnavailable(RuntimeError):
    """The Vulkan stack is missing; the message says what to install."""


class VulkanRunError(RuntimeError):
    """The scenario runner failed; the message has its output's tail and the
    command that reruns the scenario."""


# ---------------------------------------------------------------------------
# The stack
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class VulkanStack:
    runner: Path
    env: dict
    #: "dispatch_vgf" since scenario runner 0.10; older runners only know the
    #: (now deprecated) "dispatch_graph".
    graph_command: str = "dispatch_vgf"

    def environment(self) -> dict:
        return {**os.environ, **self.env}


def _site_package(name: str) -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@functools.lru_cache(maxsize=1)
def vulkan_stack() -> VulkanStack:
    """Locate the runner, the layers and the llvmpipe ICD, or raise
    :class:`VulkanUnavailable` naming what is missing."""
    missing = []
    if ctypes.util.find_library("vulkan") is None:
        missing.append("the Vulkan loader (libvulkan.so.1)")
    icds = sorted(glob.glob("/usr/share/vulkan/icd.d/lvp_icd*.json"))
    if not icds:
        missing.append("Mesa's llvmpipe ICD (lvp_icd.*.json)")
    runner_pkg, layer_pkg = _site_package("scenario_runner"), _site_package("emulation_layer")
    runner = runner_pkg / "binaries" / "bin" / "scenario-runner" if runner_pkg else None
    deploy = layer_pkg / "deploy" if layer_pkg else None
    if runner is None or not runner.exists():
        missing.append("the scenario runner (ai-ml-sdk-scenario-runner)")
    if deploy is None or not (deploy / "lib").is_dir():
        missing.append("the ML emulation layer (ai-ml-emulation-layer-for-vulkan)")
    if missing:
        raise VulkanUnavailable(f"Vulkan stack missing: {', '.join(missing)}; {INSTALL_HINT}")

    # One directory per layer manifest, graph first (the loader's order).
    key = hashlib.sha256(str(deploy).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"vgf-conformance-layers-{key}"
    dirs = []
    for sub, manifest in (("1_graph", "VkLayer_Graph.json"), ("2_tensor", "VkLayer_Tensor.json")):
        data = json.loads((deploy / "share" / "vulkan" / "explicit_layer.d" / manifest).read_text())
        data["layer"]["library_path"] = str(deploy / "lib" / Path(data["layer"]["library_path"]).name)
        target = root / sub
        target.mkdir(parents=True, exist_ok=True)
        (target / manifest).write_text(json.dumps(data, indent=2))
        dirs.append(str(target))
    env = {
        "VK_LAYER_PATH": ":".join(dirs),
        "VK_INSTANCE_LAYERS": "VK_LAYER_ML_Graph_Emulation:VK_LAYER_ML_Tensor_Emulation",
        "VK_ICD_FILENAMES": icds[0],
        "LD_LIBRARY_PATH": ":".join(filter(None, [str(deploy / "lib"), os.environ.get("LD_LIBRARY_PATH")])),
    }
    from importlib.metadata import version

    from packaging.version import Version

    runner_version = Version(version("ai-ml-sdk-scenario-runner"))
    command = "dispatch_vgf" if runner_version >= Version("0.10") else "dispatch_graph"
    return VulkanStack(runner=runner, env=env, graph_command=command)


def rerun_command(scenario: Path) -> str:
    return f"{shlex.quote(sys.executable)} -m conformance.oracles.vulkan {shlex.quote(str(scenario))}"


def run_scenario(scenario: Path, timeout: float = RUN_TIMEOUT) -> float:
    """Run one scenario in a child process; returns the wall seconds."""
    stack = vulkan_stack()
    cmd = [str(stack.runner), "--scenario", str(scenario), "--output", str(scenario.parent)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=stack.environment(), capture_output=True, text=True,
                              timeout=timeout, cwd=scenario.parent)
    except subprocess.TimeoutExpired as error:
        out = (error.stdout or b"") + (error.stderr or b"")
        text = out.decode(errors="replace") if isinstance(out, bytes) else out
        raise VulkanRunError(
            f"scenario runner timed out after {timeout:g} s\n{_tail(text)}\n"
            f"rerun: {rerun_command(scenario)}"
        ) from None
    if proc.returncode != 0:
        raise VulkanRunError(
            f"scenario runner exited with {proc.returncode}\n{_tail(proc.stdout + proc.stderr)}\n"
            f"rerun: {rerun_command(scenario)}"
        )
    return time.perf_counter() - start


#: Keys whose string values name a resource of the scenario (or its memory group).
_REFERENCES = ("uid", "graph_ref", "shader_ref", "resource_ref")


def _prefixed(value, prefix: str, base: Path):
    if isinstance(value, list):
        return [_prefixed(v, prefix, base) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in _REFERENCES or (key == "id" and isinstance(item, str)):  # memory_group ids
            out[key] = prefix + item
        elif key in ("src", "dst") and not Path(item).is_absolute():
            out[key] = str(base / item)
        else:
            out[key] = _prefixed(item, prefix, base)
    return out


def merge_scenarios(scenarios: list[Path], target: Path) -> Path:
    """Write one scenario that runs ``scenarios`` one after the other.

    Each scenario's resource ids, references and memory groups get a prefix
    (``c0_``, ``c1_``, ...) and its relative files become absolute in its own
    directory, so its outputs land exactly where running it alone puts them.
    """
    resources, commands = [], []
    for i, path in enumerate(scenarios):
        data = _prefixed(json.loads(path.read_text()), f"c{i}_", path.parent.resolve())
        resources += data["resources"]
        commands += data["commands"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"resources": resources, "commands": commands}, indent=1))
    return target


def run_scenarios(scenarios: list[Path], batch_scenario: Path, timeout: float = RUN_TIMEOUT
                  ) -> tuple[dict[Path, float | VulkanRunError], bool]:
    """Run several scenarios in one runner process: per scenario, its share of
    the wall seconds, or the error of running it alone; and whether they
    shared one process.

    One process sets up the emulation layer's shaders once for all of them
    (that setup is most of a scenario's run time). If the batch fails (a
    crash, a hang, an error), each scenario runs alone, so a bad one fails
    alone, with its own rerun command.
    """
    if len(scenarios) > 1:
        merge_scenarios(scenarios, batch_scenario)
        try:
            seconds = run_scenario(batch_scenario, timeout)
        except VulkanRunError:
            pass  # find the culprit: each alone, below
        else:
            return {scenario: seconds / len(scenarios) for scenario in scenarios}, True
    results: dict[Path, float | VulkanRunError] = {}
    for scenario in scenarios:
        try:
            results[scenario] = run_scenario(scenario, timeout)
        except VulkanRunError as error:
            results[scenario] = error
    return results, False


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# ---------------------------------------------------------------------------
# Scenario building
# ---------------------------------------------------------------------------
def _physical(value, dim_order) -> np.ndarray:
    array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    return np.ascontiguousarray(np.transpose(array, dim_order)) if array.ndim > 1 else array


@functools.lru_cache(maxsize=256)
def _vgf_bindings(vgf: Path) -> tuple[list[dict], list[dict]]:
    """Inputs and outputs of a VGF (dims, format, set/binding) in order, from
    ``vgf_dump --scenario-template``."""
    vgf_lib = _site_package("vgf_lib")
    dump = vgf_lib / "binaries" / "bin" / "vgf_dump"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "template.json"
        subprocess.run([str(dump), "--input", str(vgf), "--output", str(out), "--scenario-template"],
                       check=True, capture_output=True, timeout=60)
        template = json.loads(out.read_text())
    command = template["commands"][0]
    command = command.get("dispatch_graph") or command.get("dispatch_vgf")
    binds = {b["resource_ref"]: (b["set"], b["id"]) for b in command["bindings"]}
    inputs, outputs = [], []
    for resource in template["resources"]:
        tensor = resource.get("tensor")
        if not tensor:
            continue
        entry = {"dims": tensor["dims"], "format": tensor["format"], "binding": binds[tensor["uid"]]}
        side, index = tensor["uid"].split("_")[:2]  # "input_0_ref", "output_1_ref"
        (inputs if side == "input" else outputs).append((int(index), entry))
    return [e for _, e in sorted(inputs)], [e for _, e in sorted(outputs)]


class ScenarioBuilder:
    """Builds the scenario of one run of a :class:`conformance.oracles.numerics.LoweredProgram`."""

    def __init__(self, program, workdir: Path, vgf_files: dict[int, Path]) -> None:
        self.program = program
        self.workdir = workdir
        self.vgf_files = vgf_files
        self.tensors: dict[str, dict] = {}  # uid -> tensor resource
        self.images: list[dict] = []
        self.others: list[dict] = []
        self.commands: list[dict] = []
        self.produced: set[str] = set()
        self.layouts: dict[str, tuple[int, ...]] = {}  # uid -> dim order of its bytes

    def _tensor(self, node, dim_order, fmt: str) -> str:
        uid = f"v_{node.name}"
        value = self.program.values[node]
        dims = [int(value.shape[d]) for d in dim_order] if value.ndim > 1 else list(value.shape)
        existing = self.tensors.get(uid)
        if existing is not None:
            if existing["dims"] != dims or existing["format"] != fmt:
                raise ValueError(
                    f"value {node.name}: one delegate sees {existing['dims']} {existing['format']}, "
                    f"another {dims} {fmt} (layout disagreement between delegates)"
                )
            return uid
        self.tensors[uid] = {"uid": uid, "dims": dims, "format": fmt, "shader_access": "readwrite"}
        self.layouts[uid] = tuple(dim_order)
        return uid

    def _image(self, tensor_uid: str, access: str, fmt: str, sampler: dict | None,
               components: int = 4) -> str:
        tensor = self.tensors[tensor_uid]
        n, h, w, c = tensor["dims"]
        if n != 1 or c != components:
            raise ValueError(
                f"{tensor_uid}: an image alias needs [1, H, W, {components}], got {tensor['dims']}"
            )
        group = f"mem_{tensor_uid}"
        tensor["memory_group"] = {"id": group}
        image = {"uid": f"img_{tensor_uid}_{access}", "dims": [1, w, h, 1], "format": fmt,
                 "shader_access": access, "memory_group": {"id": group}, **(sampler or {})}
        self.images.append(image)
        return image["uid"]

    def add_vgf(self, call) -> None:
        vgf = self.vgf_files[call.index]
        inputs, outputs = _vgf_bindings(vgf)
        if len(inputs) != len(call.inputs) or len(outputs) != len(call.outputs):
            raise ValueError(
                f"delegate {call.index}: VGF has {len(inputs)} inputs/{len(outputs)} outputs, "
                f"the program call {len(call.inputs)}/{len(call.outputs)}"
            )
        graph_uid = f"vgf{call.index}"
        self.others.append({"graph": {"uid": graph_uid, "src": str(vgf)}})
        bindings = []
        for (node, order), spec in zip(call.inputs + call.outputs, inputs + outputs):
            uid = self._tensor(node, order, spec["format"])
            if self.tensors[uid]["dims"] != spec["dims"]:
                raise ValueError(
                    f"delegate {call.index}: {node.name} is {self.tensors[uid]['dims']}, "
                    f"the VGF binds {spec['dims']}"
                )
            bindings.append({"set": spec["binding"][0], "id": spec["binding"][1], "resource_ref": uid})
        self.produced.update(f"v_{node.name}" for node, _ in call.outputs)
        self.commands.append({vulkan_stack().graph_command: {"graph_ref": graph_uid, "bindings": bindings}})

    def add_grid_sampler(self, call, payload) -> None:
        roles = dict(zip(payload.inputs, call.inputs))
        (output_node, output_order), = call.outputs
        image_node, image_order = roles["image"]
        grid_node, grid_order = roles["grid"]
        quantized_image = payload.image.quant is not None
        quantized_output = payload.output.quant is not None
        for desc in (payload.image, payload.output):
            if desc.quant is not None and (desc.quant.zero_point != 0 or abs(desc.quant.scale - 1 / 127) > 1e-9):
                raise ValueError(f"grid sampler {call.index}: SNORM8 images need scale 1/127 and zero point 0")
        image_uid = self._tensor(image_node, image_order, _TENSOR_FORMATS[payload.image.dtype])
        grid_uid = self._tensor(grid_node, grid_order, _TENSOR_FORMATS[payload.grid.dtype])
        out_uid = self._tensor(output_node, output_order, _TENSOR_FORMATS[payload.output.dtype])
        linear = payload.interpolation == "bilinear"
        sampler = {
            "min_filter": "LINEAR" if linear else "NEAREST",
            "mag_filter": "LINEAR" if linear else "NEAREST",
            "mip_filter": "NEAREST",
            "border_address_mode": "CLAMP_BORDER" if payload.padding_mode == "zeros" else "CLAMP_EDGE",
            "border_color": "FLOAT_TRANSPARENT_BLACK",
        }
        image = self._image(image_uid, "readonly",
                            "VK_FORMAT_R8G8B8A8_SNORM" if quantized_image else "VK_FORMAT_R32G32B32A32_SFLOAT",
                            sampler)
        output = self._image(out_uid, "writeonly",
                             "VK_FORMAT_R8G8B8A8_SNORM" if quantized_output else "VK_FORMAT_R32G32B32A32_SFLOAT",
                             None)
        grid_quant = payload.grid.quant
        grid_image = grid_quant is not None
        if grid_image:
            fmt, qmax = _GRID_IMAGE_FORMATS[payload.grid.dtype]
            if grid_quant.zero_point != 0 or abs(grid_quant.scale * qmax - 1) > 1e-6:
                raise ValueError(f"grid sampler {call.index}: a quantized grid must be SNORM "
                                 f"(scale 1/{qmax}, zero point 0), got {grid_quant}")
            nearest = {"min_filter": "NEAREST", "mag_filter": "NEAREST", "mip_filter": "NEAREST",
                       "border_address_mode": "CLAMP_EDGE"}
            grid_ref = self._image(grid_uid, "readonly", fmt, nearest, components=2)
        else:
            grid_ref = grid_uid
        shader_uid = f"grid_sampler{call.index}"
        options = (f"-DGRID_IMAGE={int(grid_image)} "
                   f"-DOUT_FORMAT={'rgba8_snorm' if quantized_output else 'rgba32f'} "
                   f"-DQUANTIZED_OUTPUT={int(quantized_output)}")
        self.others.append({"shader": {
            "uid": shader_uid, "src": str(SHADER), "type": "GLSL", "build_options": options,
            "specialization_constants": [
                {"id": 0, "value": int(payload.align_corners)},
                {"id": 1, "value": {"zeros": 0, "border": 1, "reflection": 2}[payload.padding_mode]},
                {"id": 2, "value": 0 if linear else 1},
                {"id": 3, "value": 1.0},
                {"id": 4, "value": 127.0},
            ],
        }})
        _, ho, wo, _ = self.tensors[out_uid]["dims"]
        self.produced.add(out_uid)
        self.commands.append({"dispatch_compute": {
            "shader_ref": shader_uid, "rangeND": [(wo + 7) // 8, (ho + 7) // 8, 1],
            "bindings": [{"set": 0, "id": 0, "resource_ref": image},
                         {"set": 0, "id": 1, "resource_ref": grid_ref},
                         {"set": 0, "id": 2, "resource_ref": output}],
        }})

    def finish(self) -> Path:
        """Write the inputs and the scenario; returns the scenario's path."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        image_of = {img["memory_group"]["id"]: img for img in self.images if img["shader_access"] == "readonly"}
        for uid, tensor in self.tensors.items():
            if uid in self.produced:
                tensor["dst"] = f"{uid}.out.npy"
                continue
            node = next(n for n in self.program.values if f"v_{n.name}" == uid)
            np.save(self.workdir / f"{uid}.in.npy", _physical(self.program.values[node], self.layouts[uid]))
            # The runner copies a tensor's .npy flat, ignoring the row pitch of
            # an image aliasing it; an image's .npy goes through a proper copy.
            target = image_of.get(tensor.get("memory_group", {}).get("id"), tensor)
            target["src"] = f"{uid}.in.npy"
            tensor["shader_access"] = "readonly" if target is tensor else tensor["shader_access"]
        scenario = {
            "resources": self.others + [{"image": i} for i in self.images]
            + [{"tensor": t} for t in self.tensors.values()],
            "commands": self.commands,
        }
        self.scenario.write_text(json.dumps(scenario, indent=1))
        return self.scenario

    @property
    def scenario(self) -> Path:
        return self.workdir / "scenario.json"

    def outputs(self) -> dict[str, np.ndarray]:
        """The delegate outputs the runner wrote, in their physical layout."""
        return {uid: np.load(self.workdir / self.tensors[uid]["dst"]) for uid in sorted(self.produced)}

    def expected(self) -> dict[str, np.ndarray]:
        """The same values from the TOSA-reference run, in the same layout."""
        by_uid = {f"v_{n.name}": v for n, v in self.program.values.items()}
        return {uid: _physical(by_uid[uid], self.layouts[uid]) for uid in sorted(self.produced)}


def build_scenario(program, workdir: Path, vgf_files: dict[int, Path]) -> ScenarioBuilder:
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    builder = ScenarioBuilder(program, workdir, vgf_files)
    for call in program.calls:
        if call.backend == "VgfBackend":
            builder.add_vgf(call)
        elif call.backend == "GridSamplerBackend":
            builder.add_grid_sampler(call, GridSamplerPayload.from_bytes(call.processed_bytes))
        else:
            raise ValueError(f"delegate {call.index}: no Vulkan path for backend {call.backend}")
    builder.finish()
    return builder


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m conformance.oracles.vulkan",
                                     description="Rerun a saved scenario on the Vulkan stack.")
    parser.add_argument("scenario", type=Path)
    args = parser.parse_args(argv)
    try:
        seconds = run_scenario(args.scenario.resolve())
    except (VulkanUnavailable, VulkanRunError) as error:
        print(error, file=sys.stderr)
        return 1
    print(f"ran {args.scenario} in {seconds:.2f} s; outputs: {args.scenario.parent}/*.out.npy")
    return 0



# ---------------------------------------------------------------------------
# A case on Vulkan
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class TensorDiff:
    """One delegate output on Vulkan against the TOSA-reference path, in its
    own unit: integer steps for an integer tensor, FLOAT_UNIT for a float one."""

    uid: str
    dtype: str
    max_diff: float
    mismatches: int  # elements that differ at all
    size: int
    worst: str  # where the largest difference is

    @property
    def integer(self) -> bool:
        return np.issubdtype(np.dtype(self.dtype), np.integer)

    def problem(self, float_bound: float) -> str | None:
        """Integer tensors must be bit-exact; float tensors within ``float_bound``."""
        if self.integer and self.mismatches:
            return (f"{self.uid} ({self.dtype}): {self.mismatches} of {self.size} elements differ "
                    f"from the TOSA-reference path (max {self.max_diff:g} steps; integer tensors "
                    f"must be bit-exact) at {self.worst}")
        if not self.integer and self.max_diff > float_bound:
            return (f"{self.uid} ({self.dtype}): max {self.max_diff:g} LSB of 1/127 > {float_bound:g} "
                    f"({self.mismatches} of {self.size} elements differ) at {self.worst}")
        return None


@dataclasses.dataclass
class VulkanCheck:
    """Vulkan outputs against the TOSA-reference path, tensor by tensor."""

    scenario: Path
    seconds: float
    tensors: list[TensorDiff]
    outputs: dict[str, np.ndarray] = dataclasses.field(repr=False, default_factory=dict)
    batch: int = 1  # cases that shared the runner process

    @property
    def bit_exact(self) -> bool:
        return all(t.mismatches == 0 for t in self.tensors)

    def problems(self, float_bound: float) -> list[str]:
        return [p for t in self.tensors if (p := t.problem(float_bound))]

    def same_outputs(self, other: "VulkanCheck") -> bool:
        return self.outputs.keys() == other.outputs.keys() and all(
            np.array_equal(self.outputs[k], other.outputs[k]) for k in self.outputs)

    def report_dict(self) -> dict:
        return {"bit_exact": self.bit_exact,
                "tensors": {t.uid: {"dtype": t.dtype, "max_diff": round(t.max_diff, 3),
                                    "mismatches": t.mismatches} for t in self.tensors}}


def prepare_case(numerics, result, workdir: Path) -> ScenarioBuilder:
    """Write the case's scenario (and its inputs) from its TOSA-reference run."""
    vgf_files = {
        f.index: f.path for f in result.artifacts.delegate_files("vgf")
    }
    return build_scenario(numerics.program, workdir, vgf_files)


def run_case_on_vulkan(numerics, result, workdir: Path) -> VulkanCheck:
    """Build the case's scenario, run it alone, compare."""
    builder = prepare_case(numerics, result, workdir)
    return check_case(builder, run_scenario(builder.scenario))


def check_case(builder: ScenarioBuilder, seconds: float, batch: int = 1) -> VulkanCheck:
    """Compare the outputs the runner wrote with the TOSA-reference path,
    tensor by tensor. ``batch``: how many cases shared the runner process."""
    from conformance.oracles.compare import FLOAT_UNIT

    scenario = builder.scenario
    got, expected = builder.outputs(), builder.expected()
    tensors = []
    for uid in expected:
        a, b = got[uid], expected[uid]
        if a.shape != b.shape:
            raise VulkanRunError(f"{uid}: Vulkan wrote {a.shape}, expected {b.shape}\n"
                                 f"rerun: {rerun_command(scenario)}")
        if np.issubdtype(b.dtype, np.integer):
            diff = np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(np.float64)
        else:
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) / FLOAT_UNIT
        index = np.unravel_index(int(diff.argmax()), diff.shape) if diff.size else ()
        worst = (f"{uid}[{', '.join(map(str, index))}] (layout {builder.layouts[uid]}): "
                 f"vulkan {a[index]}, TOSA path {b[index]}") if diff.size else "empty"
        tensors.append(TensorDiff(uid, str(b.dtype), float(diff.max()) if diff.size else 0.0,
                                  int(np.count_nonzero(diff)), int(diff.size), worst))
    return VulkanCheck(scenario, seconds, tensors, got, batch)


if __name__ == "__main__":
    raise SystemExit(main())
