"""Run a lowered program end to end on Vulkan: scenario runner + ML emulation
layer on Mesa's llvmpipe CPU device.

One module per idea:

| module | idea |
|---|---|
| ``stack.py`` | finding the loader, the llvmpipe ICD, the emulation layers and the scenario runner (:class:`VulkanUnavailable`) |
| ``runner.py`` | running one scenario in a child process with a timeout; merging several into one runner process (:class:`VulkanRunError`, :func:`rerun_command`) |
| ``scenario.py`` | the scenario of one program (:class:`ScenarioBuilder`, :func:`build_scenario`; :data:`DELEGATES`, how each backend's delegate goes in) |
| ``check.py`` | a case on Vulkan against the TOSA-reference path, tensor by tensor (:class:`VulkanCheck`) |
| ``__main__.py`` | ``python -m vgf_conformance vulkan SCENARIO.json`` reruns a saved scenario by hand |
| ``shaders/`` | the grid sampler's compute shader |
"""

from vgf_conformance.oracles.vulkan.check import (
    TensorDiff,
    VulkanCheck,
    check_case,
    prepare_case,
    run_case_on_vulkan,
)
from vgf_conformance.oracles.vulkan.runner import (
    RUN_TIMEOUT,
    VulkanRunError,
    merge_scenarios,
    rerun_command,
    run_scenario,
    run_scenarios,
)
from vgf_conformance.oracles.vulkan.scenario import DELEGATES, SHADER, ScenarioBuilder, build_scenario
from vgf_conformance.oracles.vulkan.stack import INSTALL_HINT, VulkanStack, VulkanUnavailable, vulkan_stack

__all__ = [
    "DELEGATES",
    "INSTALL_HINT",
    "RUN_TIMEOUT",
    "SHADER",
    "ScenarioBuilder",
    "TensorDiff",
    "VulkanCheck",
    "VulkanRunError",
    "VulkanStack",
    "VulkanUnavailable",
    "build_scenario",
    "check_case",
    "merge_scenarios",
    "prepare_case",
    "rerun_command",
    "run_case_on_vulkan",
    "run_scenario",
    "run_scenarios",
    "vulkan_stack",
]
