"""Whether the installed stack can run here, before a candidate's suite runs
(``python -m vgf_conformance.harness.candidates.compat preflight``): the versions
installed (:func:`installed_versions`), each native tool starts
(``--version``), each stack module imports, the Vulkan runner and layers
load (:func:`preflight`); every probe a child process with a timeout
(:func:`vgf_conformance.process.run_tool`). A tool that cannot start is named
with the reason in one sentence: a missing glibc or libstdc++ symbol version
with the system's (:func:`tool_failure_reason`).

Standard library only, as :mod:`vgf_conformance.harness.candidates.compat` is.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from vgf_conformance import process

#: The packages whose versions a candidate record lists (the stack under test).
STACK_PACKAGES = (
    "torch", "executorch", "torchao", "tosa-tools", "ml-dtypes",
    "ai-ml-sdk-model-converter", "ai-ml-sdk-vgf-library", "ai-ml-sdk-scenario-runner",
    "ai-ml-emulation-layer-for-vulkan",
)

#: Native tools of the stack: (commands on PATH in the environment, the first
#: found is run; package that ships it). ML SDK 0.12 ships only
#: ``model_converter``; ExecuTorch 1.5 falls back to that name.
NATIVE_TOOLS = (
    (("model-converter", "model_converter"), "ai-ml-sdk-model-converter"),
    (("vgf_dump",), "ai-ml-sdk-vgf-library"),
)

#: Python modules the suite imports from the stack.
STACK_MODULES = ("executorch.backends.arm.vgf", "tosa_serializer", "tosa_reference_model")

#: Seconds a probe may take (an import: five times that).
PREFLIGHT_TIMEOUT = 60


def installed_versions() -> dict:
    """The installed versions of :data:`STACK_PACKAGES` (missing: None)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in STACK_PACKAGES:
        try:
            versions[package] = version(package).replace("+cpu", "")
        except PackageNotFoundError:
            versions[package] = None
    return versions


def system_glibc() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    except (ValueError, OSError, AttributeError, IndexError):
        return None


def system_glibcxx() -> str | None:
    """The newest GLIBCXX symbol version of this system's libstdc++."""
    import ctypes

    try:
        ctypes.CDLL("libstdc++.so.6")
        maps = Path("/proc/self/maps").read_text().splitlines()
        path = next(line.split()[-1] for line in maps if "libstdc++.so" in line)
        found = set(re.findall(rb"GLIBCXX_(\d+\.\d+\.\d+)", Path(path).read_bytes()))
    except (OSError, StopIteration):
        return None
    return max((v.decode() for v in found), key=_version_key, default=None)


def _version_key(text: str) -> tuple:
    return tuple(int(part) for part in text.split("."))


def _no_paths(text: str) -> str:
    """A message without this machine's paths (reports end up in the repository)."""
    return re.sub(r"(?:/[^\s/'\"()]+)+/([^\s/'\"()]+)", r"\1", text)


def tool_failure_reason(tool: str, package: str, version: str | None, output: str) -> str:
    """Why a native tool (or library) does not start, in one sentence: a
    missing glibc or libstdc++ symbol version is named with the system's."""
    what = f"{tool} ({package} {version or '?'})"
    needs, has = [], []
    glibc = sorted(set(re.findall(r"GLIBC_(\d+(?:\.\d+)+)' not found", output)), key=_version_key)
    if glibc:
        needs.append(f"glibc {glibc[-1]}")
        has.append(f"glibc {system_glibc() or '?'}")
    glibcxx = sorted(set(re.findall(r"GLIBCXX_(\d+(?:\.\d+)+)' not found", output)), key=_version_key)
    if glibcxx:
        needs.append(f"libstdc++ GLIBCXX_{glibcxx[-1]}")
        has.append(f"libstdc++ up to GLIBCXX_{system_glibcxx() or '?'}")
    if needs:
        return f"{what} cannot run here (requires {' and '.join(needs)}; this system has {' and '.join(has)})"
    last = [line.strip() for line in output.strip().splitlines() if line.strip()][-1:]
    return f"{what} cannot run here: " + _no_paths(" / ".join(last or ["no output"]))


def _probe(command, timeout: float) -> process.ChildFailed | None:
    """Run a probe (a child process with a timeout, :func:`process.run_tool`):
    None if it succeeds, else how it failed (``kind``, the tail of its output)."""
    try:
        process.run_tool(command, what="probe", timeout=timeout)
    except process.ChildFailed as failure:
        return failure
    return None


def preflight(bin_dir: Path | None = None) -> list[str]:
    """Whether the installed stack can run here: each native tool starts
    (``--version``), each stack module imports. The reasons it cannot (empty:
    it can). Each probe is a child process with a timeout."""
    bin_dir = bin_dir or Path(sys.executable).parent
    versions = installed_versions()
    reasons = []
    for names, package in NATIVE_TOOLS:
        found = [(n, shutil.which(n, path=str(bin_dir)) or shutil.which(n)) for n in names]
        tool, path = next(((n, p) for n, p in found if p), (" or ".join(names), None))
        if path is None:
            reasons.append(f"{tool} ({package} {versions.get(package) or 'not installed'}) is not on PATH")
            continue
        failure = _probe([path, "--version"], PREFLIGHT_TIMEOUT)
        if failure is not None:
            reasons.append(f"{tool} ({package}) did not answer --version within {PREFLIGHT_TIMEOUT} s"
                           if failure.kind == "timeout" else
                           tool_failure_reason(tool, package, versions.get(package), failure.log))
    reasons += _vulkan_preflight(versions)
    for module in STACK_MODULES:
        failure = _probe([sys.executable, "-c", f"import {module}"], PREFLIGHT_TIMEOUT * 5)
        if failure is not None and failure.kind == "timeout":
            reasons.append(f"`import {module}` did not finish within {PREFLIGHT_TIMEOUT * 5} s")
        elif failure is not None:
            last = [line for line in failure.log.splitlines() if line.strip()][-1:] or ["no output"]
            reasons.append(f"`import {module}` fails: {_no_paths(last[0].strip())}")
    return reasons


def _vulkan_preflight(versions: dict) -> list[str]:
    """The scenario runner starts; the emulation layer's libraries load."""
    import importlib.util

    reasons = []
    runner = importlib.util.find_spec("scenario_runner")
    if runner is not None and runner.submodule_search_locations:
        binary = Path(list(runner.submodule_search_locations)[0]) / "binaries" / "bin" / "scenario-runner"
        if binary.exists():
            package = "ai-ml-sdk-scenario-runner"
            failure = _probe([str(binary), "--version"], PREFLIGHT_TIMEOUT)
            if failure is not None:
                reasons.append(f"scenario-runner did not answer --version within {PREFLIGHT_TIMEOUT} s"
                               if failure.kind == "timeout" else
                               tool_failure_reason("scenario-runner", package, versions.get(package), failure.log))
    layer = importlib.util.find_spec("emulation_layer")
    if layer is not None and layer.submodule_search_locations:
        root = Path(list(layer.submodule_search_locations)[0])
        # deploy/ up to 0.11; binaries/ from the 0.12 pre-releases on
        for library in sorted([*root.glob("deploy/lib/*.so"), *root.glob("binaries/lib/*.so")]):
            package = "ai-ml-emulation-layer-for-vulkan"
            failure = _probe([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(library)],
                             PREFLIGHT_TIMEOUT)
            if failure is not None:
                reasons.append(f"loading the Vulkan layer {library.name} did not finish within {PREFLIGHT_TIMEOUT} s"
                               if failure.kind == "timeout" else
                               tool_failure_reason("the Vulkan layers", package, versions.get(package), failure.log))
    return list(dict.fromkeys(reasons))
