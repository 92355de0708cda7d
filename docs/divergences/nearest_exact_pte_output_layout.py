"""ExecuTorch 1.5.1 Arm VGF: F.interpolate(mode="nearest-exact") is not lowered as a resize.
torch decomposes it into index arithmetic and a gather (aten.index.Tensor), which stays on
the CPU (here nothing is delegated; the reference script's partitioner wrapper delegates the
input's dequantize and the index arithmetic, and the gather still runs on the CPU). When
image inputs and outputs are marked channels-last (as the reference export script does, so a
runtime can alias them as R8G8B8A8 images), to_executorch() re-derives the CPU gather's output
layout from its fake kernel (contiguous): program.pte declares the output NCHW while the
exported program says NHWC. mode="nearest" (delegated) keeps NHWC.

Only torch + executorch. Run with the venv's bin on PATH (the VGF backend calls
model-converter from PATH).
"""
import tempfile, time
import torch
import torch.nn.functional as F

from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassResult
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

T0 = time.perf_counter()
Q = exir_ops.edge.quantized_decomposed.quantize_per_tensor.default
DQ = exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default


class Resize(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode=self.mode)


def channels_last_io(gm):
    """The reference script's marks: 4-D inputs (and their Q) and outputs (and what the DQ reads)."""
    def mark(n):
        n.meta["val"] = n.meta["val"].contiguous(memory_format=torch.channels_last)
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.meta["val"].ndim == 4:
            mark(n)
            for u in n.users:
                if u.target == Q:
                    mark(u)
    for out in gm.graph.output_node().args[0]:
        mark(out)
        if out.op == "call_function" and out.target == DQ:
            mark(out.args[0])
    return PassResult(gm, True)


def export(mode, x):
    spec = VgfCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(tempfile.mkdtemp())
    gm = torch.export.export(Resize(mode), (x,), strict=True).module(check_guards=False)  # torch 2.13
    quantizer = VgfQuantizer(spec).set_global(get_symmetric_quantization_config(
        is_per_channel=True, act_qmin=-127, act_qmax=127, weight_qmin=-127, weight_qmax=127))
    prepared = prepare_pt2e(gm, quantizer)
    prepared(x)
    edge = to_edge_transform_and_lower(
        torch.export.export(convert_pt2e(prepared), (x,)), transform_passes=[channels_last_io],
        partitioner=[VgfPartitioner(spec)], compile_config=EdgeCompileConfig(_check_ir_validity=False))
    ep = edge.exported_program()
    calls = [n for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)]
    delegates = sum("executorch_call_delegate" in str(n.target) for n in calls)
    cpu = sorted({n.target.__name__ for n in calls if "executorch_call_delegate" not in str(n.target)
                  and "quantize_per_tensor" not in n.target.__name__})
    exported = [list(n.meta["val"].dim_order()) for n in ep.graph.output_node().args[0]]
    plan = edge.to_executorch().executorch_program.execution_plan[0]
    declared = [list(plan.values[i].val.dim_order) for i in plan.outputs]
    return delegates, cpu, exported, declared


def main():
    x = torch.rand(1, 4, 8, 9) * 2 - 1
    for mode in ("nearest", "nearest-exact"):
        delegates, cpu, exported, declared = export(mode, x)
        print(f"\nmode={mode!r}: {delegates} VGF delegate(s); CPU ops besides Q/DQ: {cpu}")
        print(f"  output dim_order in the exported program: {exported}")
        print(f"  output dim_order declared by program.pte : {declared}"
              + ("   <- differs" if exported != declared else ""))
    print(f"\ntotal {time.perf_counter() - T0:.1f}s")


if __name__ == "__main__":
    main()
