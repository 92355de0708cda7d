"""The workaround ledger: every workaround in the export flow, named.

Each entry says what the workaround does, what breaks without it (with the
upstream issue where there is one) and which conformance cases show it. All
are on by default; ``export_model(..., disable_workarounds=[...])`` turns
named ones off, which is how the suite checks, on whatever ExecuTorch is
installed, that each is still needed (``conformance/test_workarounds.py``).

The Arm backend patches are listed in :mod:`vgf_export.patches` and ledgered
the same way by name.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable


@dataclasses.dataclass(frozen=True)
class Workaround:
    name: str
    what: str
    without_it: str
    upstream: str
    #: Conformance cases that fail or change without the workaround.
    probes: tuple[str, ...]


WORKAROUNDS: dict[str, Workaround] = {
    w.name: w
    for w in (
        Workaround(
            name="resize-split",
            what="splits bilinear downscales by 16 or more into legal TOSA RESIZE stages",
            without_it="TOSA RESIZE cannot express the ratio: the resize is refused by the VGF "
            "partitioner and stays on the CPU (1.2.0: an invalid RESIZE the reference model rejects)",
            upstream="pytorch/executorch#19069",
            probes=("resize-bilinear-ac0-down32-int8io", "resize-bilinear-ac0-down64-int8io"),
        ),
        Workaround(
            name="qdq-detag",
            what="detags graph-IO Q/DQ and the Q/DQ next to grid_sampler_2d from VGF partitions",
            without_it="with an INT+FP profile the VGF delegate swallows the IO Q/DQ, so "
            "extract_io_quant_params finds nothing to strip, and the grid-sampler chain "
            "dequantize -> grid_sampler_2d -> quantize cannot be taken as one delegate",
            upstream="none filed (TOSAPartitioner only detags boundary Q/DQ for INT-only specs)",
            probes=("resize-bilinear-ac0-down2-int8io", "grid-rgb-bilinear-zeros-ac0-rotation-int8io"),
        ),
        Workaround(
            name="grid-sampler-routing",
            what="builds the VGF partitioner without its own claim on grid_sampler_2d",
            without_it="the VGF partitioner takes grid_sampler_2d (TOSA CUSTOM, int8 grid only) "
            "and the seed's separate grid-sampler lowering with an int16 grid breaks",
            upstream="executorch 1.5 VgfPartitioner.register_custom_partition_op(grid_sampler_2d)",
            probes=("grid-rgba-bilinear-zeros-ac0-identity-int8io",),
        ),
        Workaround(
            name="partition-order",
            what="lowers partitions in sorted tag order",
            without_it="Arm's partitioner returns its tags from a set of strings: the lowering "
            "order, and so the graph, delegate inputs and output names, follow PYTHONHASHSEED",
            upstream="none filed (TOSAPartitioner.partition: partition_tags built from a set)",
            probes=("flow-warp-rgb-border-int8io",),
        ),
        Workaround(
            name="pte-delegate-layouts",
            what="pins each delegate output's dim order in the serialized program "
            "(vgf_export.passes.pin_delegate_output_layouts)",
            without_it="to_executorch() re-derives delegate outputs by retracing their original "
            "graphs, where grid_sampler_2d and slice_copy return contiguous tensors: program.pte "
            "labels NHWC delegate outputs (and the CPU ops after them) NCHW, and a runtime that "
            "trusts the labels reads scrambled values (132 of 256 cases on 1.5.1)",
            upstream="none filed (related: pytorch/executorch#11086, layout kept only in meta)",
            probes=("grid-rgba-bilinear-zeros-ac0-identity-int8io", "grid-rgb-bilinear-zeros-ac0-rotation-int8io"),
        ),
        Workaround(
            name="bilinear-scale-factor",
            what="encodes bilinear (align_corners=False) resizes with an explicit scale factor from "
            "that factor (the patch of the same name in vgf_export.patches)",
            without_it="where floor(in * s) is not an exact multiple, the RESIZE samples with the "
            "size ratio and the lowered program diverges from PyTorch by 24 to 194 LSB",
            upstream="none filed; docs/divergences.md",
            probes=("resize-bilinear-ac0-in7x7-s3_2-int8io", "resize-bilinear-ac0-in10x11-s1_3-int8io"),
        ),
        Workaround(
            name="no-guards-module",
            what="captures the graph with ExportedProgram.module(check_guards=False)",
            without_it="torch 2.13 adds a _guards_fn call_module node that Arm's annotation "
            "passes reject ('call_module is not supported')",
            upstream="none filed (ScalarsToAttributePass on torch 2.13 module())",
            probes=("two-in-two-out-int8io",),
        ),
    )
}


def check_disabled(disable_workarounds: Iterable[str]) -> frozenset[str]:
    disabled = frozenset(disable_workarounds)
    unknown = sorted(disabled - set(WORKAROUNDS))
    if unknown:
        raise ValueError(
            f"disable_workarounds names unknown workarounds {unknown}; "
            f"known: {sorted(WORKAROUNDS)}"
        )
    return disabled
