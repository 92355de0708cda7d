"""python -m vgf_conformance explore --budget 10m --seed N [--family resize|grid_sample]
[--vulkan] [--out DIR]

Draw resize and grid_sample cases from the table's space, export each in a
child process and check it as the suite does; group the failures by signature,
shrink each group to its smallest case, and write DIR/findings.md and
DIR/findings.json (and DIR/draws.jsonl: every draw; DIR/hypothesis/: the
example database, replayed by a later run with the same DIR).

Drawing stops at (1 - --shrink-share) of the budget once something failed;
the rest shrinks. A draw that hangs (--draw-timeout) or crashes the child
costs that draw only. Progress goes to stderr.

Testing the explorer itself: VGF_EXPLORE_FAULT plants a fault in the draw
child (see vgf_conformance/explore/faults.py), e.g.
VGF_EXPLORE_FAULT=shift-bilinear-wide:5 makes every bilinear resize whose
output is wider than 5 fail vs_fake_quant by 3 LSB.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

from vgf_conformance.explore.space import FAMILIES, RESIZE_MODES, Limits

_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_budget(text: str) -> float:
    """``10m``, ``90s``, ``1h``, ``1m30s``, ``600`` (seconds) -> seconds."""
    raw = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smh])", raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise argparse.ArgumentTypeError(
                f"expected a duration such as 10m, 90s, 1h, 1m30s or a number of seconds, got {text!r}")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return seconds


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return value
    return parse


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 0.9], got {text!r}") from None
    if not 0 <= value <= 0.9:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 0.9], got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance explore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=parse_budget, required=True,
                        help="wall time of the whole run: 10m, 90s, 1h, 1m30s or seconds")
    parser.add_argument("--seed", type=int, required=True, help="the seed of the draws (same seed, same draws)")
    parser.add_argument("--family", action="append", choices=FAMILIES,
                        help="draw from this family only (repeatable; default: both)")
    parser.add_argument("--vulkan", action="store_true",
                        help="also run each delegated case on Vulkan against the TOSA-reference path")
    parser.add_argument("--pte", action="store_true", help="also run the suite's test_pte on each case")
    parser.add_argument("--out", type=Path, help="output directory (default: artifacts/explore/seed-N)")
    parser.add_argument("--shrink-share", type=_share, default=0.4,
                        help="share of the budget kept for shrinking once something failed (default 0.4)")
    parser.add_argument("--draw-timeout", type=_positive(float), default=90.0,
                        help="seconds a draw may take before its child is killed (default 90)")
    parser.add_argument("--max-draws", type=_positive(int),
                        help="stop drawing after this many cases (with the budget: whichever comes first)")
    parser.add_argument("--stack-target", action="store_true",
                        help="record the stack lines each draw's export reaches; draws that reach lines the "
                             "full matrix does not (vgf_conformance/stack_coverage.json) are listed in the "
                             "findings and mutated for later draws (explore/reach.py)")
    parser.add_argument("--disable-workaround", action="append", default=[], metavar="NAME",
                        help="export every draw without this workaround of vgf_export (repeatable), e.g. "
                             "bilinear-scale-factor (the table's -upstream cases)")
    limits = Limits()
    parser.add_argument("--resize-mode", action="append", choices=RESIZE_MODES,
                        help="draw resizes of this mode only (repeatable; default: all)")
    parser.add_argument("--max-in", type=_positive(int), default=limits.max_in, help="largest resize input side")
    parser.add_argument("--max-out", type=_positive(int), default=limits.max_out, help="largest resize output side")
    parser.add_argument("--max-channels", type=_positive(int), default=limits.max_channels,
                        help="most resize channels")
    parser.add_argument("--max-batch", type=_positive(int), default=limits.max_batch, help="largest batch")
    parser.add_argument("--max-grid", type=_positive(int), default=limits.max_grid, help="largest grid side")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = "python -m vgf_conformance explore " + shlex.join(sys.argv[1:] if argv is None else argv)
    from vgf_export.names import WORKAROUNDS

    unknown = [w for w in args.disable_workaround if w not in WORKAROUNDS]
    if unknown:
        parser.error(f"argument --disable-workaround: unknown workaround {unknown[0]!r}; "
                     f"known: {', '.join(WORKAROUNDS)}")
    if args.vulkan:
        from vgf_conformance.oracles.vulkan.stack import VulkanUnavailable, vulkan_stack

        try:
            vulkan_stack()
        except VulkanUnavailable as error:
            parser.error(f"argument --vulkan: the Vulkan stack is missing: {error}")
    from vgf_conformance.explore.faults import active

    try:
        active()
    except ValueError as error:
        parser.error(str(error))
    from vgf_conformance.explore.explorer import Explorer, Options
    from vgf_conformance.explore.worker import ChildStartError

    options = Options(
        families=tuple(dict.fromkeys(args.family or FAMILIES)),
        seed=args.seed,
        budget=args.budget,
        out=args.out or Path("artifacts") / "explore" / f"seed-{args.seed}",
        shrink_share=args.shrink_share,
        draw_timeout=args.draw_timeout,
        vulkan=args.vulkan,
        pte=args.pte,
        workarounds_off=tuple(dict.fromkeys(args.disable_workaround)),
        max_draws=args.max_draws,
        stack_target=args.stack_target,
        command=command,
        limits=Limits(resize_modes=tuple(args.resize_mode or RESIZE_MODES), max_in=args.max_in, max_out=args.max_out, max_channels=args.max_channels,
                      max_batch=args.max_batch, max_grid=args.max_grid),
    )
    try:
        explorer = Explorer(options)
    except ValueError as error:  # --stack-target without a record of the matrix's lines
        parser.error(f"argument --stack-target: {error}")
    try:
        explorer.run()
    except ChildStartError as error:
        print(f"python -m vgf_conformance explore: {error}", file=sys.stderr)
        return 2
    return 1 if explorer.error else 0


if __name__ == "__main__":  # the command's old name
    from vgf_conformance.text import forward_to_cli

    forward_to_cli("explore", "vgf_conformance.explore")
