"""ExecuTorch 1.5.1: extract_io_quant_params() keys the input quant params by the
wrong placeholder when the program has lifted tensor constants (e.g. bicubic
F.interpolate, whose decomposition creates them): it indexes *all* placeholders
(lifted constants first) while QuantizeInputs quantizes the idx-th *user* input.
The input 'x' becomes int8, but the returned dict names '_lifted_tensor_constant..'.
A runtime or harness that looks params up by name then feeds float data.
"""
import time
import torch
import torch.nn.functional as F
from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.passes.quantize_io_pass import extract_io_quant_params
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

T0 = time.perf_counter()


class Bicubic(torch.nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=0.5, mode="bicubic", align_corners=False)


x = torch.rand(1, 4, 16, 24) * 2 - 1
spec = VgfCompileSpec("TOSA-1.0+INT")
gm = torch.export.export(Bicubic(), (x,), strict=True).module(check_guards=False)  # torch 2.13 _guards_fn
quantizer = VgfQuantizer(spec).set_global(get_symmetric_quantization_config(
    is_per_channel=True, act_qmin=-127, act_qmax=127, weight_qmin=-127, weight_qmax=127))
prepared = prepare_pt2e(gm, quantizer)
prepared(x)
edge = to_edge_transform_and_lower(torch.export.export(convert_pt2e(prepared), (x,)),
                                   partitioner=[VgfPartitioner(spec)],
                                   compile_config=EdgeCompileConfig(_check_ir_validity=False))
params = extract_io_quant_params(edge, input_idxs=[0], output_idxs=[0])
ep = edge.exported_program()
placeholders = [(n.name, n.meta["val"].dtype) for n in ep.graph.nodes if n.op == "placeholder"]
print("user inputs            :", list(ep.graph_signature.user_inputs))
print("placeholders (in order):", placeholders)
print("input quant params keys:", list(params["inputs"]))
user = ep.graph_signature.user_inputs[0]
print(f"user input {user!r} dtype:", dict(placeholders)[user])
print("BUG" if user not in params["inputs"] else "ok", "- input params keyed by", list(params["inputs"]))
print(f"total {time.perf_counter() - T0:.1f}s")
