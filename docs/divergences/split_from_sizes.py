"""The reference export script's resize split (the pytorch/executorch#19069 workaround) is
decided and rebuilt from *sizes*, so an explicit scale factor below 1/16 is lost too.

F.interpolate(x, scale_factor=s, mode="bilinear", align_corners=False) samples output pixel 0
at 0.5 / s - 0.5 (PyTorch uses the factor). The split rewrites every bilinear resize whose
size ratio in/out is 16 or more on an axis into two resizes given by sizes (out * 16 - 1 on
that axis, then out), so:

* 9x16 at 1/9 -> 1x1: W's size ratio is 16 (the factor is only 1/9), the split acts and W
  samples at 7.5 instead of 4.0;
* 16x12 at 1/10 -> 1x1: H's size ratio 16 triggers it, and both axes are rebuilt from sizes:
  H samples at 7.5 instead of 4.5, W (not split at all) at 5.5 (ratio 12) instead of 4.5;
* 32x33 at 1/32 -> 1x1, float (no quantization): W samples at 16 instead of 15.5.

The lowered programs equal their split programs (the PT2E fake-quant program is split too);
both are far from the model the user wrote. Only torch + executorch (+ tosa_reference_model
from tosa-tools). Run with the venv's bin on PATH (the VGF backend calls model-converter).
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
UNIT = 1 / 127  # one SNORM8 step: the unit of every error here (float outputs too)


class Eager(torch.nn.Module):  # what the user wrote
    def __init__(self, s):
        super().__init__()
        self.s = s

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.s, mode="bilinear", align_corners=False)


class SeedSplit(torch.nn.Module):
    """What the split makes of it: stage one to out * 16 - 1 on each axis whose size ratio is 16
    or more (the others keep their size), then to out: sizes, no factor."""
    def __init__(self, in_hw, out_hw):
        super().__init__()
        self.mid = tuple(o * 16 - 1 if i >= 16 * o else i for i, o in zip(in_hw, out_hw))
        self.out = out_hw

    def forward(self, x):
        y = F.interpolate(x, size=self.mid, mode="bilinear", align_corners=False)
        return F.interpolate(y, size=self.out, mode="bilinear", align_corners=False)


def qparams(gm, kind):
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and kind in str(n.target)]
    n = nodes[0] if kind == "quantize_per_tensor" else nodes[-1]
    return float(n.args[1]), int(n.args[2])


def export_and_run(model, x, workdir, quantize):
    spec = "TOSA-1.0+INT" if quantize else "TOSA-1.0+FP"
    compile_spec = VgfCompileSpec(spec).dump_intermediate_artifacts_to(workdir)
    program = model
    if quantize:
        gm = torch.export.export(model, (x,), strict=True).module(check_guards=False)  # torch 2.13 _guards_fn
        quantizer = VgfQuantizer(compile_spec)
        quantizer.set_global(get_symmetric_quantization_config(
            is_per_channel=True, act_qmin=-127, act_qmax=127, weight_qmin=-127, weight_qmax=127))
        prepared = prepare_pt2e(gm, quantizer)
        prepared(x)
        program = convert_pt2e(prepared)
    with torch.no_grad():
        reference = program(x)  # the fake-quant program (or the float split)
    to_edge_transform_and_lower(
        torch.export.export(program, (x,)), partitioner=[VgfPartitioner(compile_spec)],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))
    (tosa_file,) = glob.glob(os.path.join(workdir, "**", "*.tosa"), recursive=True)
    feed, out_scale, out_zp = x.permute(0, 2, 3, 1), 1.0, 0  # the delegate is NHWC
    if quantize:
        in_scale, in_zp = qparams(program, "quantize_per_tensor")
        out_scale, out_zp = qparams(program, "dequantize_per_tensor")
        feed = torch.clamp(torch.round(feed / in_scale) + in_zp, -127, 127).to(torch.int8)
    outs, status = tosa_reference_model.run(open(tosa_file, "rb").read(), [np.ascontiguousarray(feed.numpy())])
    out = (torch.from_numpy(np.ascontiguousarray(outs[0])).float() - out_zp) * out_scale
    return reference, out.permute(0, 3, 1, 2), status


def lsb(a, b):
    return f"{((b.double() - a.double()) / UNIT).abs().max():7.2f} LSB"


def main():
    gen = torch.Generator().manual_seed(0)
    for (h, w), s, quantize in (((9, 16), 1 / 9, True), ((16, 12), 1 / 10, True), ((32, 33), 1 / 32, False)):
        # a smooth image in [-1, 1] (5x5 random control points): a split on its own moves little
        x = F.interpolate(torch.rand((1, 1, 5, 5), generator=gen) * 2 - 1, size=(h, w), mode="bicubic",
                          align_corners=True).clamp(-1, 1)
        with torch.no_grad():
            eager = Eager(s)(x)
            split = SeedSplit((h, w), tuple(eager.shape[2:]))
            split_float = split(x)
        with tempfile.TemporaryDirectory() as d:
            reference, lowered, status = export_and_run(split.eval(), x, d, quantize)
        print(f"\n{h}x{w} at scale_factor=1/{round(1 / s)} -> {tuple(eager.shape[2:])}, "
              f"{'int8 (PT2E)' if quantize else 'float (no quantization)'}, split via {split.mid}; TOSA {status}")
        print(f"  the split in float vs eager          : {lsb(eager, split_float)}")
        print(f"  lowered vs eager (the user's model)  : {lsb(eager, lowered)}")
        print(f"  lowered vs its {'fake-quant program' if quantize else 'float split       '}   : {lsb(reference, lowered)}")
    print(f"\ntotal {time.perf_counter() - T0:.1f}s")


if __name__ == "__main__":
    main()
