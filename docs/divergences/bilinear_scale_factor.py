"""ExecuTorch 1.5.1 Arm VGF: bilinear F.interpolate(scale_factor=s, align_corners=False)
with floor(in*s) != in*s lowers to a TOSA RESIZE that samples with the size ratio
out/in instead of PyTorch's 1/s. The lowered program then diverges from both the
eager float model and the PT2E fake-quantized program (tens of int8 LSB).

Only torch + executorch (+ tosa_reference_model from tosa-tools). Run with the venv's
bin on PATH (the VGF backend calls model-converter from PATH).
"""
import glob, os, sys, tempfile, time
import numpy as np
import torch
import torch.nn.functional as F

import tosa_reference_model
from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

T0 = time.perf_counter()
H, W, S = 7, 7, 1.5  # out = floor(7 * 1.5) = 10; 10/7 != 3/2


class Resize(torch.nn.Module):
    def __init__(self, recompute):
        super().__init__()
        self.recompute = recompute

    def forward(self, x):
        return F.interpolate(x, scale_factor=S, mode="bilinear", align_corners=False,
                             recompute_scale_factor=self.recompute)


def qparams(gm, kind):
    """(scale, zp) of the first quantize (input side) / last dequantize (output side)."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and kind in str(n.target)]
    n = nodes[0] if kind == "quantize_per_tensor" else nodes[-1]
    return float(n.args[1]), int(n.args[2])


def export_and_run(model, x, workdir):
    compile_spec = VgfCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(workdir)
    ep = torch.export.export(model, (x,), strict=True)
    # torch 2.13: module() inserts a `_guards_fn` call_module that Arm annotation rejects.
    gm = ep.module(check_guards=False)
    quantizer = VgfQuantizer(compile_spec)
    quantizer.set_global(get_symmetric_quantization_config(
        is_per_channel=True, act_qmin=-127, act_qmax=127, weight_qmin=-127, weight_qmax=127))
    prepared = prepare_pt2e(gm, quantizer)
    prepared(x)  # calibrate
    fq = convert_pt2e(prepared)
    with torch.no_grad():
        fake_quant = fq(x)
    lowered = to_edge_transform_and_lower(
        torch.export.export(fq, (x,)), partitioner=[VgfPartitioner(compile_spec)],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))
    delegated = [n.target for n in lowered.exported_program().graph.nodes
                 if n.op == "call_function" and "executorch_call_delegate" in str(n.target)]
    assert len(delegated) == 1, "expected one VGF delegate"
    tosa_files = glob.glob(os.path.join(workdir, "**", "*.tosa"), recursive=True)
    assert len(tosa_files) == 1, tosa_files
    fb = open(tosa_files[0], "rb").read()

    in_scale, in_zp = qparams(fq, "quantize_per_tensor")
    out_scale, out_zp = qparams(fq, "dequantize_per_tensor")
    q = torch.clamp(torch.round(x / in_scale) + in_zp, -127, 127).to(torch.int8)
    # No channels-last pass here: the delegate's IO tensors are contiguous NCHW (the
    # backend transposes to NHWC inside the TOSA graph). The Q of the input and the DQ
    # of the output stay outside the delegate with an INT-only profile, so it is int8 IO.
    outs, status = tosa_reference_model.run(fb, [np.ascontiguousarray(q.numpy())])
    out = torch.from_numpy(np.ascontiguousarray(outs[0]))
    assert out.shape == fake_quant.shape and out.dtype == torch.int8, (out.shape, out.dtype)
    if out.dtype == torch.int8:
        out = (out.float() - out_zp) * out_scale
    return fake_quant, out, out_scale, status, resize_attrs(fb)


def resize_attrs(fb):
    """scale/offset/border operands of the RESIZE in the TOSA flatbuffer (tosa-tools'
    generated flatbuffer bindings; TOSA 1.0 keeps them as CONST_SHAPE int64 values)."""
    import tosa.Op, tosa.TosaGraph
    g = tosa.TosaGraph.TosaGraph.GetRootAs(bytearray(fb), 0)
    blk = g.Regions(0).Blocks(0)
    shapes = {blk.Shapes(i).Name().decode(): np.frombuffer(blk.Shapes(i).DataAsNumpy().tobytes(), "<i8").tolist()
              for i in range(blk.ShapesLength())}
    for i in range(blk.OperatorsLength()):
        op = blk.Operators(i)
        if op.Op() == tosa.Op.Op.RESIZE:
            scale, offset, border = (shapes[op.Inputs(k).decode()] for k in (1, 2, 3))
            return f"scale={scale} offset={offset} border={border}"
    return "no RESIZE"


def lsb(a, b, unit):
    e = (b.double() - a.double()) / unit
    return f"max {e.abs().max():6.2f}  mean {e.abs().mean():6.3f}  bias {e.mean():+6.3f} LSB"


def patch_rewrite_upsample_to_honour_scale_factor():
    """What a fix could look like: bilinear (align_corners=False) uses the explicit
    scale factor, like nearest already does since #22437."""
    import sympy
    from executorch.backends.arm._passes.rewrite_upsample import RewriteUpsamplePass
    orig = RewriteUpsamplePass.get_resize_parameters_1d

    def patched(input_size, output_size, align_corners, resize_mode="bilinear", scale_factor=None):
        if (resize_mode == "bilinear" and not align_corners and scale_factor is not None
                and isinstance(input_size, int) and isinstance(output_size, int)):
            ratio = sympy.nsimplify(scale_factor, tolerance=1e-6, rational=True)
            num, den = (int(v) for v in ratio.as_numer_denom())
            n, d = 2 * num, 2 * den
            offset = d // 2 - n // 2
            return n, d, offset, d * (output_size - 1) - n * (input_size - 1) + offset
        return orig(input_size, output_size, align_corners, resize_mode, scale_factor)

    RewriteUpsamplePass.get_resize_parameters_1d = staticmethod(patched)


def main():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand((1, 4, H, W), generator=gen) * 2 - 1
    for recompute, fixed in ((False, False), (True, False), (False, True)):
        if fixed:
            patch_rewrite_upsample_to_honour_scale_factor()
            print("\n=== with RewriteUpsamplePass patched to honour scale_factor for bilinear ===")
        model = Resize(recompute).eval()
        with torch.no_grad():
            ref = model(x)
        with tempfile.TemporaryDirectory() as d:
            fake_quant, lowered, unit, status, attrs = export_and_run(model, x, d)
        print(f"\nrecompute_scale_factor={recompute}: {tuple(x.shape)} -> {tuple(ref.shape)}, "
              f"TOSA status {status}, unit {unit:.6g}")
        print(f"  TOSA RESIZE in the delegate: {attrs}")
        print(f"  lowered vs float      : {lsb(ref, lowered, unit)}")
        print(f"  lowered vs fake-quant : {lsb(fake_quant, lowered, unit)}")
        print(f"  fake-quant vs float   : {lsb(ref, fake_quant, unit)}")
        with torch.no_grad():
            size_ratio = F.interpolate(x, size=ref.shape[2:], mode="bilinear", align_corners=False)
        print(f"  lowered vs eager size={tuple(ref.shape[2:])} (ratio out/in): {lsb(size_ratio, lowered, unit)}")
    print("\nPyTorch's mapping for scale_factor=1.5 (ratio 3/2) would be scale=[6,4,6,4] "
          "offset=[-1,-1] border=[-1,-1] (valid TOSA RESIZE).")
    print(f"total {time.perf_counter() - T0:.1f}s")


if __name__ == "__main__":
    main()
