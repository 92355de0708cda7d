"""``python -m vgf_conformance vulkan SCENARIO.json``: rerun a saved
scenario by hand (the command :func:`~vgf_conformance.oracles.vulkan.rerun_command`
prints)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vgf_conformance.oracles.vulkan.runner import VulkanRunError, run_scenario
from vgf_conformance.oracles.vulkan.stack import VulkanUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance vulkan",
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


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("vulkan", "vgf_conformance.oracles.vulkan")
