"""ExecuTorch 1.5.1 Arm VGF: a requantization to a narrow-range output
quantization (quant_min = -quant_max, as SNORM needs: the reference export
script's SNORM8 image and SNORM16 grid qspecs) is lowered as a TOSA RESCALE
without a clamp, so it saturates at the dtype's minimum (-128, -32768), not at
quant_min (-127, -32767), wherever the value before it lies below -1.0. The
PT2E fake-quantized program clamps to quant_min. Two cases:

* grid: an int8 ``base + flow`` (a base grid plus a flow: range about
  [-1.25, 1.25]) read at SNORM16 (RESCALE INT8 -> INT16);
* image: a bilinear upscale of an image beyond [-1, 1], SNORM8 in and out: the
  resize's calibrated int8 range is wider than the output's (RESCALE INT8 -> INT8).

The same class as "ReLU folded into a narrow-range RESCALE"
(relu_narrow_range_clamp.py). Only torch + executorch (+ tosa_reference_model
from tosa-tools). Run with the venv's bin on PATH (the VGF backend calls
model-converter from PATH).
"""
import glob, os, tempfile, time
import numpy as np
import torch
import torch.nn.functional as F

import tosa_reference_model
from executorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.observer import FixedQParamsObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpec
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

T0 = time.perf_counter()


def snorm(bits):  # fixed [-1, 1] at 1/qmax, quant_min = -quant_max: an SNORM texel
    qmax, dtype = 2 ** (bits - 1) - 1, {8: torch.int8, 16: torch.int16}[bits]
    args = dict(dtype=dtype, quant_min=-qmax, quant_max=qmax, qscheme=torch.per_tensor_symmetric)
    return QuantizationSpec(observer_or_fake_quant_ctr=FixedQParamsObserver.with_args(
        scale=1 / qmax, zero_point=0, **args), **args)


class SnormIoQuantizer(VgfQuantizer):
    """The global int8 config; the graph inputs and output get fixed SNORM qspecs
    (the export script annotates its IO and a sampler's grid input the same way)."""

    def __init__(self, spec, input_bits, output_bits):
        super().__init__(spec)
        self.input_bits, self.output_bits = input_bits, output_bits

    def annotate(self, model):
        model = super().annotate(model)
        for node in model.graph.nodes:
            if node.op == "placeholder" and self.input_bits:
                node.meta.setdefault(Q_ANNOTATION_KEY, QuantizationAnnotation()).output_qspec = snorm(self.input_bits)
        output = model.graph.output_node()
        annotation = QuantizationAnnotation(input_qspec_map={output.args[0][0]: snorm(self.output_bits)},
                                            allow_implicit_sharing=False, _annotated=True)
        output.meta[Q_ANNOTATION_KEY] = annotation
        return model


class BaseGridPlusFlow(torch.nn.Module):
    def forward(self, base, flow):
        return base + flow


class Upscale(torch.nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)


def run(name, model, inputs, input_bits, output_bits):
    with tempfile.TemporaryDirectory() as workdir:
        spec = VgfCompileSpec("TOSA-1.0+INT+int16").dump_intermediate_artifacts_to(workdir)
        gm = torch.export.export(model, inputs, strict=True).module(check_guards=False)
        quantizer = SnormIoQuantizer(spec, input_bits, output_bits).set_global(
            get_symmetric_quantization_config(act_qmin=-127, act_qmax=127))
        prepared = prepare_pt2e(gm, quantizer)
        prepared(*inputs)
        fq = convert_pt2e(prepared)
        with torch.no_grad():
            fake_quant = fq(*inputs)
        to_edge_transform_and_lower(torch.export.export(fq, inputs), partitioner=[VgfPartitioner(spec)],
                                    compile_config=EdgeCompileConfig(_check_ir_validity=False))
        (tosa_file,) = glob.glob(os.path.join(workdir, "**", "*.tosa"), recursive=True)
        quant = [n for n in fq.graph.nodes if n.target == torch.ops.quantized_decomposed.quantize_per_tensor.default]
        feeds = []
        for x, node in zip(inputs, quant):  # each input's own quantize, in graph order
            scale, zp, qmin, qmax, dtype = node.args[1:6]
            feeds.append(np.ascontiguousarray(torch.clamp(torch.round(x / scale) + zp, qmin, qmax).to(dtype).numpy()))
        outs, status = tosa_reference_model.run(open(tosa_file, "rb").read(), feeds)
    qmax = 2 ** (output_bits - 1) - 1
    lowered = torch.from_numpy(np.ascontiguousarray(outs[0])).to(torch.int32)
    if tuple(lowered.shape) != tuple(fake_quant.shape):  # an image output is NHWC
        lowered = lowered.permute(0, 3, 1, 2)
    expected = torch.round(fake_quant * qmax).to(torch.int32)
    below = lowered < -qmax
    elsewhere = (lowered - expected)[~below].abs()
    print(f"{name}: {status}; output {outs[0].dtype}, quant range [{-qmax}, {qmax}]: {int(below.sum())} of "
          f"{below.numel()} lowered codes are {sorted(set(lowered[below].tolist()))} where fake-quant has "
          f"{sorted(set(expected[below].tolist()))}; elsewhere lowered - fake-quant is at most "
          f"{int(elsewhere.max())} step(s)")
    return int(lowered.min()) < -qmax


torch.manual_seed(0)
base = torch.linspace(-1, 1, 16).repeat(1, 2, 12, 1)  # a base grid's x coordinates
flow = torch.rand(1, 2, 12, 16) * 0.5 - 0.25
image = torch.rand(1, 4, 8, 9) * 2.5 - 1.25  # beyond [-1, 1]: clips at the SNORM8 input
bugs = [run("grid (int8 add -> SNORM16)", BaseGridPlusFlow(), (base, flow), None, 16),
        run("image (int8 resize -> SNORM8)", Upscale(), (image,), 8, 8)]
print("BUG" if any(bugs) else "ok", "- a narrow-range output goes below its quant_min:",
      [name for name, bug in zip(("grid", "image"), bugs) if bug])
print(f"total {time.perf_counter() - T0:.1f}s")
