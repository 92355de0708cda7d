"""ExecuTorch 1.5.1 Arm VGF: a ReLU after a conv, quantized with a narrow-range
int8 config (act_qmin=-127, as SNORM8 needs), is folded into the conv's output
RESCALE (output zero point -127 = quant_min, where the ReLU's 0 lies), but the
TOSA RESCALE saturates at the int8 dtype's -128, not at quant_min: every
negative conv output comes out as -128, one step *below* the ReLU's zero.
About half the elements of the lowered program are then 1 LSB below the PT2E
fake-quantized program (which clamps at 0); in deep conv+relu stacks the
shift accumulates (the suite's segmentation head: +0.7 to +0.9 LSB of bias).

Only torch + executorch (+ tosa_reference_model from tosa-tools). Run with the
venv's bin on PATH (the VGF backend calls model-converter from PATH).
"""
import glob, os, tempfile, time
import numpy as np
import torch

import tosa_reference_model
from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

T0 = time.perf_counter()


class ConvRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def qparams(gm, kind, last):
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and kind in str(n.target)]
    n = nodes[-1] if last else nodes[0]
    return float(n.args[1]), int(n.args[2])


def run(act_qmin, workdir):
    x = torch.rand(1, 3, 16, 24) * 2 - 1
    spec = VgfCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(workdir)
    gm = torch.export.export(ConvRelu(), (x,), strict=True).module(check_guards=False)  # torch 2.13 _guards_fn
    quantizer = VgfQuantizer(spec).set_global(get_symmetric_quantization_config(
        is_per_channel=True, act_qmin=act_qmin, act_qmax=127, weight_qmin=-127, weight_qmax=127))
    prepared = prepare_pt2e(gm, quantizer)
    prepared(x)
    fq = convert_pt2e(prepared)
    with torch.no_grad():
        fake_quant = fq(x)
    to_edge_transform_and_lower(torch.export.export(fq, (x,)), partitioner=[VgfPartitioner(spec)],
                                compile_config=EdgeCompileConfig(_check_ir_validity=False))
    (tosa_file,) = glob.glob(os.path.join(workdir, "**", "*.tosa"), recursive=True)
    in_scale, in_zp = qparams(fq, "quantize_per_tensor", last=False)
    out_scale, out_zp = qparams(fq, "dequantize_per_tensor", last=True)
    q = torch.clamp(torch.round(x / in_scale) + in_zp, act_qmin, 127).to(torch.int8)
    outs, status = tosa_reference_model.run(open(tosa_file, "rb").read(), [np.ascontiguousarray(q.numpy())])
    lowered = torch.from_numpy(np.ascontiguousarray(outs[0]))
    expected = torch.round(fake_quant / out_scale).to(torch.int32) + out_zp
    diff = lowered.to(torch.int32) - expected
    print(f"act_qmin={act_qmin}: output zero point {out_zp}; {status}; lowered - fake-quant (LSB): "
          f"max |{int(diff.abs().max())}|, mean {float(diff.float().mean()):+.3f}, "
          f"{float((diff != 0).float().mean()):.1%} of elements differ; "
          f"lowered minimum {int(lowered.min())} (the ReLU's 0 is {out_zp})")
    return int(lowered.min()), out_zp


for qmin in (-128, -127):
    with tempfile.TemporaryDirectory() as d:
        low, zp = run(qmin, d)
print("BUG" if low < zp else "ok", "- with act_qmin=-127 the ReLU output goes below its zero point")
print(f"total {time.perf_counter() - T0:.1f}s")
