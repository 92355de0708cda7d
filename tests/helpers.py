"""Small builders shared by the package's unit tests."""

from __future__ import annotations

import torch
from executorch.backends.arm.vgf import VgfCompileSpec
from executorch.exir import EdgeCompileConfig, to_edge

from vgf_export.export import TOSA_SPEC
from vgf_export.grid_sampler_backend import pad_rgb_grid_sampler_channels_pass
from vgf_export.quantizer import build_quantizer


def captured(model, *inputs):
    return torch.export.export(model, inputs, strict=True).module(check_guards=False)


def quantized(model, inputs, input_qspecs, output_qspecs, *, pad_rgb=True, **kwargs):
    """The seed's PT2E flow up to convert_pt2e, without lowering."""
    gm = captured(model, *inputs)
    if pad_rgb:
        pad_rgb_grid_sampler_channels_pass(gm)
    quantizer = build_quantizer(
        VgfCompileSpec(TOSA_SPEC),
        input_qspecs=input_qspecs,
        output_qspecs=output_qspecs,
        **kwargs,
    )
    return quantizer._quantize_with_submodules(gm, calibration_samples=[inputs])


def quantized_edge(model, inputs, input_qspecs, output_qspecs, **kwargs):
    gm = quantized(model, inputs, input_qspecs, output_qspecs, **kwargs)
    ep = torch.export.export(gm, inputs)
    return to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))


def calls(gm, fragment):
    return [n for n in gm.graph.nodes if n.op == "call_function" and fragment in str(n.target)]


def qparams(node):
    """(scale, zero_point, qmin, qmax, dtype) of a Q/DQ node."""
    scale, zp, qmin, qmax, dtype = node.args[1:6]
    return float(scale), int(zp), int(qmin), int(qmax), dtype


def collected(pytester, *args: str) -> list[str]:
    """The node ids a run of ``args`` in ``pytester``'s directory would run
    (after -m, -k and shard deselection), collected in this process: a second
    where a ``--collect-only`` child takes several. The stack is imported
    first: pytester drops the modules a run imported, and torch cannot be
    imported twice in one process."""
    import vgf_conformance.test_cases  # noqa: F401

    _, recorder = pytester.inline_genitems(*args)
    return [item.nodeid for item in recorder.getcall("pytest_collection_finish").session.items]


def collected_suite(pytester, *args: str) -> list[str]:
    """:func:`collected` of the suite's own case tests, as ``test[...]`` names."""
    from pathlib import Path

    suite = Path(__file__).resolve().parent.parent / "vgf_conformance" / "test_cases.py"
    return [nodeid.split("::", 1)[1] for nodeid in
            collected(pytester, str(suite), "-p", "vgf_conformance", "-p", "no:cacheprovider", *args)]
