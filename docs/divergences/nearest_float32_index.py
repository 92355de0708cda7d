"""ExecuTorch 1.5.1 Arm VGF: F.interpolate(mode="nearest") to a size where
dst * in / out is an integer that PyTorch's float32 arithmetic rounds down
(width 52 -> 88: 22 * float32(52 / 88) = 12.999999). PyTorch (eager, and so the
PT2E fake-quantized program) picks source column floor(12.999999) = 12; the
lowered TOSA RESIZE (NEAREST, scale 44/26 in exact integers) picks 13. Two of
88 output columns take the neighbouring pixel, in the lowered program only.

Only torch + executorch (+ tosa_reference_model from tosa-tools). Run with the
venv's bin on PATH (the VGF backend calls model-converter from PATH).
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


class Nearest(torch.nn.Module):
    def forward(self, x):
        return F.interpolate(x, size=(2, 88), mode="nearest")


x = torch.linspace(-1, 1, 52).repeat(1, 1, 2, 1)  # a ramp: each column its own value
with tempfile.TemporaryDirectory() as workdir:
    spec = VgfCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(workdir)
    gm = torch.export.export(Nearest(), (x,), strict=True).module(check_guards=False)
    prepared = prepare_pt2e(gm, VgfQuantizer(spec).set_global(get_symmetric_quantization_config()))
    prepared(x)
    fq = convert_pt2e(prepared)
    to_edge_transform_and_lower(torch.export.export(fq, (x,)), partitioner=[VgfPartitioner(spec)],
                                compile_config=EdgeCompileConfig(_check_ir_validity=False))
    (tosa_file,) = glob.glob(os.path.join(workdir, "**", "*.tosa"), recursive=True)
    quant = next(n for n in fq.graph.nodes if n.target == torch.ops.quantized_decomposed.quantize_per_tensor.default)
    scale, zp, qmin, qmax, dtype = quant.args[1:6]
    q = torch.clamp(torch.round(x / scale) + zp, qmin, qmax).to(dtype)
    outs, status = tosa_reference_model.run(open(tosa_file, "rb").read(), [np.ascontiguousarray(q.numpy())])
lowered = torch.from_numpy(np.ascontiguousarray(outs[0])).reshape(-1, 88)[0].to(torch.int32)  # row 0 (C = 1)
with torch.no_grad():
    expected = (torch.round(fq(x) / scale) + zp).to(torch.int32)[0, 0, 0]
eager_src = F.interpolate(torch.arange(52.0).reshape(1, 1, 1, 52), size=(1, 88), mode="nearest")[0, 0, 0].long()
exact_src = torch.arange(88) * 52 // 88
differ = (lowered != expected).nonzero().flatten().tolist()
print(f"{status}; columns where lowered != fake-quant: {differ}; PyTorch's source column there "
      f"{eager_src[differ].tolist()}, the exact floor(w * 52 / 88) {exact_src[differ].tolist()}; "
      f"lowered codes {lowered[differ].tolist()}, fake-quant {expected[differ].tolist()}")
print("BUG" if differ else "ok", "- the lowered nearest resize samples other columns than PyTorch")
print(f"total {time.perf_counter() - T0:.1f}s")
