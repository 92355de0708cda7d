"""``python -m vgf_conformance draw '<json>'``: run one draw, in this process.

The JSON is what ``findings.md`` prints for a group's minimal case:
``{"family": "resize", "params": {...}}`` (optionally ``"vulkan": true``,
``"pte": true``). The draw is exported into ``--artifacts`` (default: a new
temporary directory, kept), checked as the explorer checks it, and its outcome
printed as JSON (``--full``) or as a summary: its id, builder call, signature
and the failing checks. Exit status 1 when the draw fails.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance draw", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("draw", help='{"family": ..., "params": {...}} as findings.md prints it')
    parser.add_argument("--artifacts", type=Path, help="where to export (default: a new temporary directory)")
    parser.add_argument("--full", action="store_true", help="print the whole outcome as JSON")
    args = parser.parse_args(argv)
    try:
        request = json.loads(args.draw)
        family, params = request["family"], request["params"]
    except (ValueError, KeyError, TypeError) as error:
        parser.error(f"argument draw: expected {{\"family\": ..., \"params\": {{...}}}}, got {args.draw!r} ({error})")
    from vgf_conformance.explore.evaluate import evaluate
    from vgf_conformance.explore.findings import _details
    from vgf_conformance.explore.signature import signature

    artifacts = args.artifacts or Path(tempfile.mkdtemp(prefix="vgf-explore-draw-"))
    outcome = evaluate(dict(request, artifacts=str(artifacts)))
    outcome.update(family=family, params=params)
    outcome["signature"] = signature(outcome)
    if args.full:
        print(json.dumps(outcome, indent=1, default=str))
    else:
        print(f"{outcome['id']}\n  {outcome['code']}\n  signature: {outcome['signature'] or 'none (passes)'}")
        print("\n".join("  " + line for line in _details(outcome)))
        print(f"  artifacts: {outcome.get('artifacts')}")
    return 1 if outcome["signature"] else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("draw", "vgf_conformance.explore.draw")
