"""Running scenarios: one scenario in a child process with a timeout, or
several merged into one runner process.

Several cases can share one runner process (:func:`run_scenarios` merges
their scenarios): the emulation layer compiles its shaders once per process,
and that is most of a small scenario's run time. A batch that fails is rerun
case by case, so a bad case fails alone.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from vgf_conformance import process
from vgf_conformance.oracles.vulkan.stack import vulkan_stack

RUN_TIMEOUT = 180.0


class VulkanRunError(RuntimeError):
    """The scenario runner failed; the message has its output's tail and the
    command that reruns the scenario."""


def rerun_command(scenario: Path) -> str:
    """The command that reruns ``scenario`` by hand (:mod:`vgf_conformance.oracles.vulkan.__main__`)."""
    return f"{shlex.quote(sys.executable)} -m vgf_conformance vulkan {shlex.quote(str(scenario))}"


def run_scenario(scenario: Path, timeout: float = RUN_TIMEOUT) -> float:
    """Run one scenario in a child process; returns the wall seconds."""
    stack = vulkan_stack()
    cmd = [str(stack.runner), "--scenario", str(scenario), "--output", str(scenario.parent)]
    start = time.perf_counter()
    try:
        process.run_tool(cmd, what="scenario runner", env=stack.environment(), timeout=timeout, cwd=scenario.parent)
    except process.ChildFailed as failed:
        raise VulkanRunError(f"{failed}\nrerun: {rerun_command(scenario)}") from None
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
