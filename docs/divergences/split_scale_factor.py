"""The reference export script's resize split (the pytorch/executorch#19069 workaround) loses
an explicit scale factor. F.interpolate(x, scale_factor=1/16, mode="bilinear",
align_corners=False) on 31x31 gives 1x1 and samples at (0 + 0.5) * 16 - 0.5 = 7.5 (PyTorch
uses the factor, not 31/1). The split rebuilds the downscale from sizes (31 -> 15 -> 1): the
size ratio 31 samples at 15. The lowered program equals the (split) PT2E program, and both
are far from the float model. Cropping the input to out/s = 16 first keeps PyTorch's mapping.

Only torch + executorch (+ tosa_reference_model from tosa-tools). Run with the venv's bin on
PATH (the VGF backend calls model-converter from PATH).
"""
import glob, os, tempfile, time
import numpy as np
import torch
import torch.nn.functional as F

import tosa_reference_model
from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

T0 = time.perf_counter()
N = 31  # 31 * 1/16 -> 1: not an exact multiple


def resize(x, size):
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class Eager(torch.nn.Module):  # what the user wrote
    def forward(self, x):
        return F.interpolate(x, scale_factor=1 / 16, mode="bilinear", align_corners=False)


class SeedSplit(torch.nn.Module):
    """What the split pass makes of it: stage sizes out * 16 - 1 = 15, then 1 (sizes, no factor)."""
    def forward(self, x):
        return resize(resize(x, (15, 15)), (1, 1))


class CroppedSplit(torch.nn.Module):
    """A fix: crop to out / s = 16 (the rows PyTorch's factor reaches), then split as before."""
    def forward(self, x):
        return resize(resize(x[:, :, :16, :16], (15, 15)), (1, 1))


def qparams(gm, kind):
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and kind in str(n.target)]
    n = nodes[0] if kind == "quantize_per_tensor" else nodes[-1]
    return float(n.args[1]), int(n.args[2])


def export_and_run(model, x, workdir):
    compile_spec = VgfCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(workdir)
    gm = torch.export.export(model, (x,), strict=True).module(check_guards=False)  # torch 2.13 _guards_fn
    quantizer = VgfQuantizer(compile_spec)
    quantizer.set_global(get_symmetric_quantization_config(
        is_per_channel=True, act_qmin=-127, act_qmax=127, weight_qmin=-127, weight_qmax=127))
    prepared = prepare_pt2e(gm, quantizer)
    prepared(x)
    fq = convert_pt2e(prepared)
    with torch.no_grad():
        fake_quant = fq(x)
    to_edge_transform_and_lower(
        torch.export.export(fq, (x,)), partitioner=[VgfPartitioner(compile_spec)],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))
    tosa_files = glob.glob(os.path.join(workdir, "**", "*.tosa"), recursive=True)
    assert len(tosa_files) == 1, tosa_files
    in_scale, in_zp = qparams(fq, "quantize_per_tensor")
    out_scale, out_zp = qparams(fq, "dequantize_per_tensor")
    q = torch.clamp(torch.round(x / in_scale) + in_zp, -127, 127).to(torch.int8)
    outs, status = tosa_reference_model.run(open(tosa_files[0], "rb").read(), [np.ascontiguousarray(q.numpy())])
    out = (torch.from_numpy(np.ascontiguousarray(outs[0])).float() - out_zp) * out_scale
    return fake_quant, out, out_scale, status


def lsb(a, b, unit):
    return f"max {((b.double() - a.double()) / unit).abs().max():7.2f} LSB"


def main():
    gen = torch.Generator().manual_seed(0)
    # a smooth image in [-1, 1] (5x5 random control points), so that a split on its own moves little
    x = F.interpolate(torch.rand((1, 4, 5, 5), generator=gen) * 2 - 1, size=(N, N), mode="bicubic",
                      align_corners=True).clamp(-1, 1)
    with torch.no_grad():
        ref = Eager()(x)
    print(f"input {tuple(x.shape)}, F.interpolate(scale_factor=1/16) -> {tuple(ref.shape)}")
    for model in (SeedSplit(), CroppedSplit()):
        with tempfile.TemporaryDirectory() as d:
            fake_quant, lowered, unit, status = export_and_run(model.eval(), x, d)
        print(f"\n{type(model).__name__}: one VGF delegate, TOSA status {status}")
        print(f"  lowered vs eager scale_factor=1/16 : {lsb(ref, lowered, unit)}")
        print(f"  lowered vs its fake-quant program  : {lsb(fake_quant, lowered, unit)}")
    print(f"\ntotal {time.perf_counter() - T0:.1f}s")


if __name__ == "__main__":
    main()
