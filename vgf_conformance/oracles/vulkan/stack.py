"""The Vulkan stack: the loader, Mesa's llvmpipe ICD, the ML emulation layers
and the scenario runner, found once per process.

Environment traps handled here (see shared/STACK.md): Debian 12's loader
enables explicit layers in VK_LAYER_PATH directory order, so the graph and
tensor layer manifests go in two directories, graph first; the manifests are
rewritten with absolute library paths; only the llvmpipe ICD is listed.
"""

from __future__ import annotations

import ctypes.util
import dataclasses
import functools
import glob
import hashlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path

INSTALL_HINT = (
    "install the Vulkan loader and Mesa's llvmpipe (Debian: apt-get install libvulkan1 "
    "mesa-vulkan-drivers; scripts/setup.sh does this as root) and the pinned "
    "ai-ml-sdk-scenario-runner and ai-ml-emulation-layer-for-vulkan wheels"
)


class VulkanUnavailable(RuntimeError):
    """The Vulkan stack is missing; the message says what to install."""


@dataclasses.dataclass(frozen=True)
class VulkanStack:
    runner: Path
    env: dict
    #: "dispatch_vgf" since scenario runner 0.10; older runners only know the
    #: (now deprecated) "dispatch_graph".
    graph_command: str = "dispatch_vgf"

    def environment(self) -> dict:
        return {**os.environ, **self.env}


def site_package(name: str) -> Path | None:
    """The directory of the installed package ``name``, or None."""
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
    runner_pkg, layer_pkg = site_package("scenario_runner"), site_package("emulation_layer")
    runner = runner_pkg / "binaries" / "bin" / "scenario-runner" if runner_pkg else None
    deploy = layer_pkg / "deploy" if layer_pkg else None
    if runner is None or not runner.exists():
        missing.append("the scenario runner (ai-ml-sdk-scenario-runner)")
    if deploy is None or not (deploy / "lib").is_dir():
        missing.append("the ML emulation layer (ai-ml-emulation-layer-for-vulkan)")
    if missing:
        raise VulkanUnavailable(f"Vulkan stack missing: {', '.join(missing)}; {INSTALL_HINT}")

    env = {
        "VK_LAYER_PATH": ":".join(_layer_dirs(deploy)),
        "VK_INSTANCE_LAYERS": "VK_LAYER_ML_Graph_Emulation:VK_LAYER_ML_Tensor_Emulation",
        "VK_ICD_FILENAMES": icds[0],
        "LD_LIBRARY_PATH": ":".join(filter(None, [str(deploy / "lib"), os.environ.get("LD_LIBRARY_PATH")])),
    }
    return VulkanStack(runner=runner, env=env, graph_command=_graph_command())


def _layer_dirs(deploy: Path) -> list[str]:
    """One directory per layer manifest, graph first (the loader's order),
    each manifest naming its library by absolute path."""
    key = hashlib.sha256(str(deploy).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"vgf-conformance-layers-{key}"
    dirs = []
    for sub, manifest in (("1_graph", "VkLayer_Graph.json"), ("2_tensor", "VkLayer_Tensor.json")):
        data = json.loads((deploy / "share" / "vulkan" / "explicit_layer.d" / manifest).read_text())
        data["layer"]["library_path"] = str(deploy / "lib" / Path(data["layer"]["library_path"]).name)
        target = root / sub
        target.mkdir(parents=True, exist_ok=True)
        # Several workers may write the same manifest at once: write a private
        # file and rename it, so a reader never sees a half-written one.
        private = target / f".{manifest}.{os.getpid()}"
        private.write_text(json.dumps(data, indent=2))
        os.replace(private, target / manifest)
        dirs.append(str(target))
    return dirs


def _graph_command() -> str:
    """The scenario command that dispatches a VGF on the installed runner."""
    from importlib.metadata import version

    from packaging.version import Version

    runner_version = Version(version("ai-ml-sdk-scenario-runner"))
    return "dispatch_vgf" if runner_version >= Version("0.10") else "dispatch_graph"
