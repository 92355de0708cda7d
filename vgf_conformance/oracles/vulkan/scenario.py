"""The scenario of one run of a lowered program on Vulkan.

One scenario per program: each VGF delegate is a ``dispatch_vgf``, each
grid-sampler delegate a ``dispatch_compute`` of ``shaders/grid_sampler.comp``
(compiled by the runner), values between delegates are shared tensors, and
the images a grid sampler reads and writes alias int8 NHWC tensors as
``VK_FORMAT_R8G8B8A8_SNORM`` images through memory groups (the seed's layout
contract), and a quantized grid aliases its tensor as an ``R16G16_SNORM`` (or
``R8G8_SNORM``) image. Values no delegate produces (program inputs, ops left on the CPU)
come from the TOSA-reference run; every delegate output is read back.

:data:`DELEGATES` says how each backend's delegate goes into a scenario; a
new backend on the Vulkan path is one more entry there.
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from vgf_conformance import process
from vgf_conformance.oracles.vulkan.stack import site_package, vulkan_stack
from vgf_export.names import GRID_SAMPLER_BACKEND, VGF_BACKEND

SHADER = Path(__file__).resolve().parent / "shaders" / "grid_sampler.comp"
BATCH_COPY_SHADER = Path(__file__).resolve().parent / "shaders" / "batch_copy.comp"

_TENSOR_FORMATS = {"int8": "VK_FORMAT_R8_SINT", "int16": "VK_FORMAT_R16_SINT",
                   "int32": "VK_FORMAT_R32_SINT", "float32": "VK_FORMAT_R32_SFLOAT"}
#: SNORM image formats of a quantized grid (two components: x, y), by dtype.
_GRID_IMAGE_FORMATS = {"int16": ("VK_FORMAT_R16G16_SNORM", 32767), "int8": ("VK_FORMAT_R8G8_SNORM", 127)}
#: SNORM8 / float image formats and the shader's storage-image format
#: qualifier, by channel count of the sampled image (RGBA is the seed's
#: contract; one- and two-channel images alias as R / RG texels).
_IMAGE_FORMATS = {
    True: {1: ("VK_FORMAT_R8_SNORM", "r8_snorm"), 2: ("VK_FORMAT_R8G8_SNORM", "rg8_snorm"),
           4: ("VK_FORMAT_R8G8B8A8_SNORM", "rgba8_snorm")},
    False: {1: ("VK_FORMAT_R32_SFLOAT", "r32f"), 2: ("VK_FORMAT_R32G32_SFLOAT", "rg32f"),
            4: ("VK_FORMAT_R32G32B32A32_SFLOAT", "rgba32f")},
}
#: The element type of ``shaders/batch_copy.comp`` per tensor format.
_ELEM_TYPES = {"VK_FORMAT_R8_SINT": "int8_t", "VK_FORMAT_R16_SINT": "int16_t", "VK_FORMAT_R32_SINT": "int32_t",
               "VK_FORMAT_R32_SFLOAT": "float"}


def _physical(value, dim_order) -> np.ndarray:
    array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    return np.ascontiguousarray(np.transpose(array, dim_order)) if array.ndim > 1 else array


@functools.lru_cache(maxsize=256)
def _vgf_bindings(vgf: Path) -> tuple[list[dict], list[dict]]:
    """Inputs and outputs of a VGF (dims, format, set/binding) in order, from
    ``vgf_dump --scenario-template``."""
    vgf_lib = site_package("vgf_lib")
    dump = vgf_lib / "binaries" / "bin" / "vgf_dump"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "template.json"
        proc = process.run([str(dump), "--input", str(vgf), "--output", str(out), "--scenario-template"],
                           capture_output=True, text=True, timeout=60)
        if proc.returncode != 0 and "descriptor type" in proc.stdout + proc.stderr:
            return _vgf_image_bindings(dump, vgf, Path(tmp) / "dump.json")
        proc.check_returncode()
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


#: Scenario sampler fields from a VGF resource's ``sampler_config`` (Vulkan enum names).
_SAMPLER_FIELDS = {"VK_FILTER_LINEAR": "LINEAR", "VK_FILTER_NEAREST": "NEAREST",
                   "VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_BORDER": "CLAMP_BORDER",
                   "VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE": "CLAMP_EDGE",
                   "VK_SAMPLER_ADDRESS_MODE_MIRRORED_REPEAT": "MIRRORED_REPEAT"}
#: The tensor format an image IO of a VGF aliases, by image format.
_IMAGE_TENSOR_FORMATS = {"VK_FORMAT_R8G8B8A8_SNORM": "VK_FORMAT_R8_SINT",
                         "VK_FORMAT_R32G32B32A32_SFLOAT": "VK_FORMAT_R32_SFLOAT"}


def _vgf_image_bindings(dump: Path, vgf: Path, out: Path) -> tuple[list[dict], list[dict]]:
    """Inputs and outputs of a VGF with image IO (ExecuTorch's own grid-sampler
    lowering: a sampled image in, a storage image out), which ``vgf_dump
    --scenario-template`` refuses: from the plain dump. An image entry has
    ``image`` (its format and scenario sampler fields); its ``format`` is that
    of the NHWC tensor the image aliases."""
    process.run([str(dump), "--input", str(vgf), "--output", str(out)],
                check=True, capture_output=True, timeout=60)
    dump_json = json.loads(out.read_text())
    resources = dump_json["resources"]
    sides = []
    for side in ("inputs", "outputs"):
        entries = []
        for io in dump_json["model_sequence"][side]:
            resource = resources[io["mrt_index"]]
            entry = {"dims": resource["shape"], "format": resource["vk_format"], "binding": (0, io["binding"])}
            if "IMAGE" in resource["vk_descriptor_type"]:
                fmt = resource["vk_format"]
                if fmt not in _IMAGE_TENSOR_FORMATS:
                    raise ValueError(f"{vgf.name}: no tensor format to alias a {fmt} image with")
                config = resource.get("sampler_config") or {}
                sampler = {"min_filter": _SAMPLER_FIELDS[config["min_filter"]],
                           "mag_filter": _SAMPLER_FIELDS[config["mag_filter"]], "mip_filter": "NEAREST",
                           "border_address_mode": _SAMPLER_FIELDS[config["address_mode_u"]],
                           "border_color": config["border_color"].removeprefix("VK_BORDER_COLOR_")
                           } if config else None
                entry.update(format=_IMAGE_TENSOR_FORMATS[fmt], image={"format": fmt, "sampler": sampler})
            entries.append(entry)
        sides.append(entries)
    return sides[0], sides[1]


class ScenarioBuilder:
    """Builds the scenario of one run of a :class:`vgf_conformance.oracles.numerics.LoweredProgram`."""

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
        # Batch N > 1: per-element tensors of sampled images and the copies
        # to and from them around the current grid sampler's dispatches.
        self.elements: list[dict] = []
        self.bound_to_vgf: set[str] = set()
        self.copies_in: list[dict] = []
        self.copies_out: list[dict] = []

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
               components: int = 4) -> list[str]:
        """Images aliasing an NHWC tensor (memory groups), one per batch element.

        A batch of one aliases the tensor itself. With N > 1 each element gets
        a tensor of its own ([1, H, W, C], aliased by its image at offset 0)
        and a copy (``shaders/batch_copy.comp``) from the batched tensor before
        the sampler reads it, or back into it after the sampler wrote it:
        images at a non-zero memory-group offset of the batched tensor did not
        see its memory on the emulation layer 0.11 + llvmpipe (measured), and
        the runner creates single-layer images only.
        """
        tensor = self.tensors[tensor_uid]
        n, h, w, c = self._nhwc(tensor_uid)
        if c != components:
            raise ValueError(
                f"{tensor_uid}: an image alias needs [N, H, W, {components}], got {tensor['dims']}"
            )
        if tensor["dims"] != [n, h, w, c]:  # one channel in NCHW order: the same bytes as NHWC
            if tensor_uid in self.bound_to_vgf:
                raise ValueError(f"{tensor_uid}: a VGF binds it as {tensor['dims']}, an image needs NHWC")
            tensor["dims"] = [n, h, w, c]
        if n == 1:
            targets = [tensor]
        elif tensor["dims"] != [n, h, w, c]:
            raise ValueError(f"{tensor_uid}: a batch of images needs NHWC dims, got {tensor['dims']}")
        else:
            targets = []
            for b in range(n):
                element = {"uid": f"{tensor_uid}_b{b}", "dims": [1, h, w, c], "format": tensor["format"],
                           "shader_access": "readwrite"}
                self.elements.append(element)
                targets.append(element)
                self._copy(tensor_uid, element["uid"], b, (h, w, c), to_batched=access != "readonly")
        uids = []
        for b, target in enumerate(targets):
            group = f"mem_{target['uid']}"
            target["memory_group"] = {"id": group}
            image = {"uid": f"img_{target['uid']}_{access}", "dims": [1, w, h, 1], "format": fmt,
                     "shader_access": access, "memory_group": {"id": group}, **(sampler or {})}
            self.images.append(image)
            uids.append(image["uid"])
        return uids

    def _nhwc(self, tensor_uid: str) -> tuple[int, int, int, int]:
        """N, H, W, C of an image tensor: NHWC bytes, or a one-channel tensor
        in NCHW order (the same bytes)."""
        dims = self.tensors[tensor_uid]["dims"]
        if self.layouts[tensor_uid] == (0, 1, 2, 3) and dims[1] == 1:
            n, c, h, w = dims
            return n, h, w, c
        return tuple(dims)

    def _copy(self, batched: str, element: str, b: int, hwc: tuple[int, int, int], to_batched: bool) -> None:
        """A dispatch of ``shaders/batch_copy.comp``: batch element ``b``
        between ``batched`` and ``element`` (queued before the sampler's
        dispatches, or after them when ``to_batched``)."""
        h, w, c = hwc
        uid = f"copy_{element}"
        self.others.append({"shader": {
            "uid": uid, "src": str(BATCH_COPY_SHADER), "type": "GLSL",
            "build_options": f"-DELEM={_ELEM_TYPES[self.tensors[batched]['format']]}",
            "specialization_constants": [{"id": 0, "value": b}, {"id": 1, "value": int(to_batched)},
                                         {"id": 2, "value": h}, {"id": 3, "value": w}, {"id": 4, "value": c}],
        }})
        command = {"dispatch_compute": {
            "shader_ref": uid, "rangeND": [(h * w * c + 63) // 64, 1, 1],
            "bindings": [{"set": 0, "id": 0, "resource_ref": batched},
                         {"set": 0, "id": 1, "resource_ref": element}]}}
        (self.copies_out if to_batched else self.copies_in).append(command)

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
            if "image" in spec:  # an image IO aliases the value's NHWC tensor
                access = "readonly" if spec["image"]["sampler"] else "writeonly"
                uid, = self._image(uid, access, spec["image"]["format"], spec["image"]["sampler"],
                                   components=spec["dims"][-1])
            else:
                self.bound_to_vgf.add(uid)
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
        channels = self._nhwc(image_uid)[-1]
        if channels not in _IMAGE_FORMATS[True]:
            raise ValueError(f"grid sampler {call.index}: no image format for {channels} channels "
                             f"(1, 2 or 4; RGB is padded to RGBA at export)")
        image_format, _ = _IMAGE_FORMATS[quantized_image][channels]
        output_format, output_qualifier = _IMAGE_FORMATS[quantized_output][channels]
        images = self._image(image_uid, "readonly", image_format, sampler, components=channels)
        outputs = self._image(out_uid, "writeonly", output_format, None, components=channels)
        grid_quant = payload.grid.quant
        grid_image = grid_quant is not None
        if grid_image:
            fmt, qmax = _GRID_IMAGE_FORMATS[payload.grid.dtype]
            if grid_quant.zero_point != 0 or abs(grid_quant.scale * qmax - 1) > 1e-6:
                raise ValueError(f"grid sampler {call.index}: a quantized grid must be SNORM "
                                 f"(scale 1/{qmax}, zero point 0), got {grid_quant}")
            nearest = {"min_filter": "NEAREST", "mag_filter": "NEAREST", "mip_filter": "NEAREST",
                       "border_address_mode": "CLAMP_EDGE"}
            grids = self._image(grid_uid, "readonly", fmt, nearest, components=2)
        else:
            grids = [grid_uid] * len(images)
        options = (f"-DGRID_IMAGE={int(grid_image)} "
                   f"-DOUT_FORMAT={output_qualifier} "
                   f"-DQUANTIZED_OUTPUT={int(quantized_output)}")
        constants = [
            {"id": 0, "value": int(payload.align_corners)},
            {"id": 1, "value": {"zeros": 0, "border": 1, "reflection": 2}[payload.padding_mode]},
            {"id": 3, "value": 1.0},
            {"id": 4, "value": 127.0},
        ]
        n, ho, wo, _ = self._nhwc(out_uid)
        self.produced.add(out_uid)
        self.commands += self.copies_in
        # One dispatch per batch element, over that element's images; a float
        # grid (a tensor) is read at the element's index (BATCH, constant 5).
        for b, (image, grid_ref, output) in enumerate(zip(images, grids, outputs)):
            shader_uid = f"grid_sampler{call.index}" + (f"_b{b}" if n > 1 else "")
            self.others.append({"shader": {
                "uid": shader_uid, "src": str(SHADER), "type": "GLSL", "build_options": options,
                "specialization_constants": constants + ([{"id": 5, "value": b}] if n > 1 else []),
            }})
            self.commands.append({"dispatch_compute": {
                "shader_ref": shader_uid, "rangeND": [(wo + 7) // 8, (ho + 7) // 8, 1],
                "bindings": [{"set": 0, "id": 0, "resource_ref": image},
                             {"set": 0, "id": 1, "resource_ref": grid_ref},
                             {"set": 0, "id": 2, "resource_ref": output}],
            }})
        self.commands += self.copies_out
        self.copies_in, self.copies_out = [], []

    def finish(self) -> Path:
        """Write the inputs and the scenario; returns the scenario's path."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        image_of = {img["memory_group"]["id"]: img for img in self.images if img["shader_access"] == "readonly"}
        for uid, tensor in self.tensors.items():
            if uid in self.produced:
                tensor["dst"] = f"{uid}.out.npy"
                continue
            node = next(n for n in self.program.values if f"v_{n.name}" == uid)
            value = _physical(self.program.values[node], self.layouts[uid])
            # The runner copies a tensor's .npy flat, ignoring the row pitch of
            # an image aliasing it; an image's .npy goes through a proper copy
            # (as [1, H, W, C]: a one-channel NCHW tensor has the same bytes).
            target = image_of.get(tensor.get("memory_group", {}).get("id"), tensor)
            if target is not tensor:
                value = value.reshape(1, target["dims"][2], target["dims"][1], -1)
            np.save(self.workdir / f"{uid}.in.npy", value)
            target["src"] = f"{uid}.in.npy"
            tensor["shader_access"] = "readonly" if target is tensor else tensor["shader_access"]
        scenario = {
            "resources": self.others + [{"image": i} for i in self.images]
            + [{"tensor": t} for t in [*self.tensors.values(), *self.elements]],
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
        return {uid: _physical(by_uid[uid], self.layouts[uid]).reshape(self.tensors[uid]["dims"])
                for uid in sorted(self.produced)}


def _add_grid_sampler(builder: ScenarioBuilder, call) -> None:
    from vgf_export.grid_sampler_backend import GridSamplerPayload

    builder.add_grid_sampler(call, GridSamplerPayload.from_bytes(call.processed_bytes))


#: How a delegate goes into a scenario, by backend id: ``add(builder, call)``.
DELEGATES: dict[str, Callable[[ScenarioBuilder, object], None]] = {
    VGF_BACKEND: ScenarioBuilder.add_vgf,
    GRID_SAMPLER_BACKEND: _add_grid_sampler,
}


def build_scenario(program, workdir: Path, vgf_files: dict[int, Path]) -> ScenarioBuilder:
    """Write the scenario (and its inputs) of ``program`` under ``workdir``."""
    builder = ScenarioBuilder(program, workdir, vgf_files)
    for call in program.calls:
        add = DELEGATES.get(call.backend)
        if add is None:
            raise ValueError(f"delegate {call.index}: no Vulkan path for backend {call.backend}")
        add(builder, call)
    builder.finish()
    return builder
