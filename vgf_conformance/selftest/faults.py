"""Faults injected into the real stack: the suite proving it can fail.

Each :class:`Fault` patches the pinned stack at one point where a release
could plausibly regress (the quantizer's observers, the partitioner's support
checks, an Arm pass, the TOSA serialization of one op, the model converter,
the ``.pte`` emitter, the runtime's kernels) and
changes what an export produces. ``python -m vgf_conformance selftest`` runs
the quick tier (or the full matrix) under each and prints which cases and
which checks caught it; a fault no check catches is a hole in the suite.

A fault is applied in every process of a run by the pytest plugin
:mod:`vgf_conformance.selftest.inject` (``-p vgf_conformance.selftest.inject``,
fault named by :data:`ENV`), never by the suite itself. Adding a fault is one
entry in :data:`FAULTS`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from vgf_conformance.process import resolve_tool

#: The environment variable naming the fault of a run.
ENV = "VGF_INJECT_FAULT"


#: The layers of the stack a fault can sit in, from the export flow's own
#: passes (vgf_export) and the quantizer to the runtime.
LAYERS = ("export-pass", "quantizer", "partitioner", "arm-pass", "tosa-serialization", "model-converter", "pte-emitter",
          "runtime")


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    #: Where in the stack: one of :data:`LAYERS`.
    layer: str
    #: What a release would have broken, in a sentence.
    what: str
    #: Patches the stack; returns a function that undoes it.
    apply: Callable[[], Callable[[], None]]


@dataclasses.dataclass(frozen=True)
class Patch:
    """Replaces ``owner``'s ``attribute`` with ``make(original)``; ``owner`` is
    ``"module"`` or ``"module:Class"``; calling it patches and returns the undo."""
    owner: str
    attribute: str
    make: Callable[[Any], Any]
    static: bool = False

    def holder(self) -> Any:
        module, _, cls = self.owner.partition(":")
        found = importlib.import_module(module)
        return getattr(found, cls) if cls else found

    def current(self) -> Any:
        holder = self.holder()
        return holder.__dict__[self.attribute] if isinstance(holder, type) else getattr(holder, self.attribute)

    def __call__(self) -> Callable[[], None]:
        holder, original = self.holder(), self.current()
        function = original.__func__ if isinstance(original, staticmethod) else original
        replacement = self.make(function)
        setattr(holder, self.attribute, staticmethod(replacement) if self.static else replacement)

        def undo() -> None:
            setattr(holder, self.attribute, original)
            getattr(replacement, "cleanup", lambda: None)()  # what the replacement made (a directory)
        return undo


_patch = Patch


def _with_node(field: str, change: Callable):
    """A visitor's ``define_node`` that serializes the node with ``change``
    of its ``field`` (``args`` as a tuple, ``kwargs`` as a dict)."""
    def make(define_node):
        @functools.wraps(define_node)
        def faulty(self, node, *args, **kwargs):
            saved = getattr(node, field)
            setattr(node, field, change(type(saved)(saved)))
            try:
                return define_node(self, node, *args, **kwargs)
            finally:
                setattr(node, field, saved)
        return faulty
    return make


def _with_special(**changes: Callable[[list], list]):
    """A visitor's ``define_node`` that serializes ``change(list)`` of the
    attribute lists of its inputs (``input1=change``: input 1)."""
    def make(define_node):
        @functools.wraps(define_node)
        def faulty(self, node, tosa_graph, inputs, output, *args, **kwargs):
            indices = {int(key.removeprefix("input")): change for key, change in changes.items()}
            saved = {i: inputs[i].special for i in indices}
            for i, change in indices.items():
                inputs[i].special = change(list(saved[i]))
            try:
                return define_node(self, node, tosa_graph, inputs, output, *args, **kwargs)
            finally:
                for i, value in saved.items():
                    inputs[i].special = value
        return faulty
    return make


def _pad_value_raised(kwargs: dict) -> dict:
    value = kwargs.get("value", 0)
    return {**kwargs, "value": value + 1 if isinstance(value, int) else value + 2 ** -7}


def _refused(is_supported):
    @functools.wraps(is_supported)
    def faulty(self, node, tosa_spec):
        return False
    return faulty


def _plain_min_max(calculate_qparams):
    @functools.wraps(calculate_qparams)
    def faulty(self):
        return self._calculate_qparams(self.min_val, self.max_val)
    return faulty


def _scaled_qparams(factor: float):
    def make(calculate_qparams):
        @functools.wraps(calculate_qparams)
        def faulty(self, *args, **kwargs):
            scale, zero_point = calculate_qparams(self, *args, **kwargs)
            return scale * factor, zero_point
        return faulty
    return make


def _table_shifted(generate):
    @functools.wraps(generate)
    def faulty(self, *args, **kwargs):
        table, shift = generate(self, *args, **kwargs)
        import torch

        return (table.to(dtype=torch.int16) + 1).clamp(-128, 127).to(table.dtype), shift
    return faulty


def _multiplier_biased(compute):
    @functools.wraps(compute)
    def faulty(scales, *args, **kwargs):
        return compute([s * (1 + 2 ** -8) for s in scales], *args, **kwargs)
    return faulty


def _rounding_double(build):
    @functools.wraps(build)
    def faulty(self, node, tosa_graph, scale, input_node, output, input_zp, output_zp, rounding_mode, *args, **kw):
        import tosa_serializer as ts

        return build(self, node, tosa_graph, scale, input_node, output, input_zp, output_zp,
                     ts.RoundingMode.DOUBLE_ROUND, *args, **kw)
    return faulty


def _resize_offset(get_parameters):
    @functools.wraps(get_parameters)
    def faulty(*args, **kwargs):
        numerator, denominator, offset, border = get_parameters(*args, **kwargs)
        return numerator, denominator, offset + 1, border
    return faulty


def _clamp_raised(args: tuple) -> tuple:
    low = args[1]
    return (args[0], low + 1 if isinstance(low, int) else low + 2 ** -7, *args[2:])


def _pad_shifted(pad: list) -> list:
    top, bottom, left, right = pad
    return [max(top - 1, 0), bottom + min(top, 1), max(left - 1, 0), right + min(left, 1)]


# Faults that depend on a value, not on an op's kind: each changes a lowering
# only for some sizes, ratios or signs, so only a case with such a value can
# see it (issue 45: the quick tier is chosen by the stack lines and branches
# cases reach, not only by the ops they lower to).
def _exact_16_unsplit(stage_count):
    @functools.wraps(stage_count)
    def faulty(input_size, output_size):
        from vgf_export.passes import MAX_RESIZE_DOWNSCALE

        if input_size == MAX_RESIZE_DOWNSCALE * output_size:  # the split's ``input < 16 * output`` taken as ``<=``
            return 1
        return stage_count(input_size, output_size)
    return faulty


def _negative_offset_dropped(get_parameters):
    @functools.wraps(get_parameters)
    def faulty(*args, **kwargs):
        numerator, denominator, offset, border = get_parameters(*args, **kwargs)
        if offset < 0:  # the border takes up the difference: same output size, shifted samples
            return numerator, denominator, 0, border - offset
        return numerator, denominator, offset, border
    return faulty


def _factor_to_small_fraction(parameters_from_scale):
    @functools.wraps(parameters_from_scale)
    def faulty(input_size, output_size, scale_factor):
        from fractions import Fraction

        return parameters_from_scale(input_size, output_size,
                                     float(Fraction(float(scale_factor)).limit_denominator(16)))
    return faulty


def _trailing_pad_kept(adjust_pad):
    @functools.wraps(adjust_pad)
    def faulty(self, input_len, input_weight, stride, pad, dilation):
        return pad
    return faulty


_REAL_CONVERTER = "VGF_INJECT_FAULT_REAL_MODEL_CONVERTER"


def _model_converter_flags(*flags: str) -> Callable[[], Callable[[], None]]:
    """The model converter, as a release that changed these defaults would run."""
    def apply() -> Callable[[], None]:
        from executorch.backends.arm.vgf.model_converter import find_model_converter_binary

        # As vgf_export finds it: ExecuTorch's lookup, else beside this interpreter;
        # in an xdist worker, the one the controller's shim wraps (not the shim).
        tried = [os.environ.get(_REAL_CONVERTER), find_model_converter_binary(), "model-converter",
                 str(Path(sys.executable).parent / "model-converter")]
        real = next((found for found in map(resolve_tool, tried) if found), None)
        if real is None:
            raise RuntimeError(f"model-converter not found (tried {[t for t in tried if t]}): the fault needs "
                               "the real one")
        shim = Path(tempfile.mkdtemp(prefix="vgf-fault-")) / "model-converter"
        shim.write_text(f'#!/bin/sh\nexec "{real}" {" ".join(flags)} "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
        saved = {k: os.environ.get(k) for k in ("MODEL_CONVERTER_PATH", _REAL_CONVERTER)}
        os.environ.update({"MODEL_CONVERTER_PATH": str(shim), _REAL_CONVERTER: real})

        def undo() -> None:
            for key, value in saved.items():
                os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
            shutil.rmtree(shim.parent, ignore_errors=True)  # the shim goes with the fault
        return undo
    return apply


#: x86-64 and AArch64 encodings of FE_UPWARD (fenv.h).
_FE_UPWARD = {"x86_64": 0x800, "aarch64": 0x400000}


def _runtime_rounding_upward(child_env):
    """The ExecuTorch runtime child, started with its floating-point rounding
    mode set toward +infinity (a ``sitecustomize`` on its path): every native
    kernel that rounds with ``nearbyint``/``rint`` (quantize, requantize,
    resize coordinates) rounds up, as a kernel release that took ``ceil`` for
    ``round`` would."""
    import platform

    mode = _FE_UPWARD.get(platform.machine())
    if mode is None:
        raise RuntimeError(f"runtime-rounds-upward: FE_UPWARD unknown on {platform.machine()}")
    site = Path(tempfile.mkdtemp(prefix="vgf-fault-"))
    (site / "sitecustomize.py").write_text(
        "import ctypes, ctypes.util\n"
        f"if ctypes.CDLL(ctypes.util.find_library('m')).fesetround({mode}) != 0:\n"
        "    raise SystemExit('runtime-rounds-upward: fesetround failed')\n")

    @functools.wraps(child_env)
    def faulty(*args, **kwargs):
        env = child_env(*args, **kwargs)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
        return env
    faulty.cleanup = lambda: shutil.rmtree(site, ignore_errors=True)  # with the fault's undo
    return faulty


def _dim_order_contiguous(emit):
    @functools.wraps(emit)
    def faulty(self, *args, **kwargs):
        value = emit(self, *args, **kwargs)
        tensor = getattr(getattr(value, "val", None), "dim_order", None)
        if tensor is not None and list(tensor) != sorted(tensor):
            value.val.dim_order = sorted(tensor)
        return value
    return faulty


_OPS = "executorch.backends.arm.operators"
_OBSERVERS = "torchao.quantization.pt2e.observer"
_REGISTRY = [
    Fault("activation-observer-widened", "quantizer",
          "the activation observer (HistogramObserver) calibrates a 1 % wider range",
          _patch(f"{_OBSERVERS}:HistogramObserver", "calculate_qparams", _scaled_qparams(1.01))),
    Fault("weight-observer-widened", "quantizer",
          "the per-channel weight observer calibrates a 2 % wider range",
          _patch(f"{_OBSERVERS}:PerChannelMinMaxObserver", "calculate_qparams", _scaled_qparams(1.02))),
    Fault("rescale-multiplier-biased", "arm-pass",
          "RESCALE multipliers are computed from scales 0.4 % too large",
          _patch(f"{_OPS}.op_tosa_rescale", "_compute_multiplier_and_shift", _multiplier_biased)),
    Fault("rescale-double-round", "tosa-serialization",
          "RESCALE is serialized with DOUBLE_ROUND instead of SINGLE_ROUND",
          _patch(f"{_OPS}.op_tosa_rescale:RescaleVisitor", "_build_rescale", _rounding_double)),
    Fault("resize-offset-shifted", "arm-pass",
          "the upsample rewrite computes each RESIZE offset one step too large",
          _patch("executorch.backends.arm._passes.rewrite_upsample:RewriteUpsamplePass",
                 "get_resize_parameters_1d", _resize_offset, static=True)),
    Fault("table-values-shifted", "arm-pass",
          "the 8-bit TABLE lookup values are one code too high",
          _patch("executorch.backends.arm._passes.insert_table_ops:InsertTableOpsPass",
                 "generate_8bit_table_values", _table_shifted)),
    Fault("clamp-min-raised", "tosa-serialization",
          "CLAMP is serialized with its lower bound one step higher",
          _patch(f"{_OPS}.op_tosa_clamp:ClampVisitor", "define_node", _with_node("args", _clamp_raised))),
    Fault("concat-inputs-reversed", "tosa-serialization",
          "CONCAT is serialized with its inputs in reverse order",
          _patch(f"{_OPS}.op_tosa_concat:CatVisitor", "define_node",
                 _with_special(input0=lambda tensors: tensors[::-1]))),
    Fault("maxpool-window-grown", "tosa-serialization",
          "MAX_POOL2D is serialized with a window one larger, padded at the bottom and right to keep its shape",
          _patch(f"{_OPS}.op_tosa_max_pool2d:MaxPool2dVisitor", "define_node",
                 _with_special(input1=lambda kernel: [k + 1 for k in kernel],
                               input3=lambda pad: [pad[0], pad[1] + 1, pad[2], pad[3] + 1]))),
    Fault("conv2d-pad-shifted", "tosa-serialization",
          "CONV2D padding moves from top/left to bottom/right (same output shape, shifted)",
          _patch(f"{_OPS}.op_tosa_conv2d:Conv2dVisitor", "define_node", _with_special(input4=_pad_shifted))),
    Fault("pad-value-raised", "tosa-serialization",
          "PAD is serialized with its fill value one code higher (the zero point forgotten)",
          _patch(f"{_OPS}.op_tosa_pad:TosaPadVisitor", "define_node", _with_node("kwargs", _pad_value_raised))),
    Fault("activation-observer-minmax", "quantizer",
          "the activation observer takes the plain min and max (no histogram search for the best range)",
          _patch(f"{_OBSERVERS}:HistogramObserver", "calculate_qparams", _plain_min_max)),
    Fault("partitioner-refuses-nearest", "partitioner",
          "the partitioner's support check refuses every nearest upsample (they run on the CPU)",
          _patch("executorch.backends.arm.operator_support.upsample_support:UpsampleNearest2dSupported",
                 "is_node_tosa_supported", _refused)),
    Fault("resize-split-misses-exact-16", "export-pass",
          "a bilinear downscale of exactly 16 on an axis is not split into legal stages (a ratio threshold: the "
          "split's `input < 16 * output` taken as `<=`)",
          _patch("vgf_export.passes", "min_bilinear_resize_stage_count", _exact_16_unsplit)),
    Fault("resize-negative-offset-dropped", "arm-pass",
          "the upsample rewrite encodes a negative RESIZE offset as 0, its border taking up the difference "
          "(a sign: only upscales and non-integer nearest ratios have one)",
          _patch("executorch.backends.arm._passes.rewrite_upsample:RewriteUpsamplePass",
                 "get_resize_parameters_1d", _negative_offset_dropped, static=True)),
    Fault("resize-factor-small-fraction", "export-pass",
          "an explicit bilinear scale factor is read as the nearest fraction with a denominator of at most 16 "
          "(a non-simple rational: 5/64 becomes 1/13; 1/2, 3/10 or 1/13 are unchanged)",
          _patch("vgf_export.patches", "_bilinear_parameters_from_scale", _factor_to_small_fraction)),
    Fault("conv-trailing-pad-kept", "arm-pass",
          "the conv rewrite keeps a strided conv's bottom and right padding where the size leaves a remainder "
          "(a size parity: a 3x3 stride-2 conv on an even size; odd sizes are unchanged)",
          _patch("executorch.backends.arm._passes.rewrite_conv_pass:RewriteConvPass", "_adjust_pad_if_needed",
                 _trailing_pad_kept)),
    Fault("model-converter-fp16", "model-converter",
          "the model converter narrows FP32 operands to FP16 by default",
          _model_converter_flags("--type-narrowing", "full")),
    Fault("model-converter-debug-info", "model-converter",
          "the model converter emits SPIR-V debug information by default",
          _model_converter_flags("--emit-debug-info")),
    Fault("pte-dim-order-dropped", "pte-emitter",
          "the .pte emitter writes every tensor's dim order as contiguous",
          _patch("executorch.exir.emit._emitter:_Emitter", "_tensor_spec_to_evalue", _dim_order_contiguous)),
    Fault("runtime-rounds-upward", "runtime",
          "the ExecuTorch runtime's kernels round toward +infinity instead of to nearest",
          _patch("vgf_conformance.oracles.pte.runtime", "_child_env", _runtime_rounding_upward)),
]
FAULTS: dict[str, Fault] = {f.name: f for f in _REGISTRY}


def get(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise ValueError(f"{ENV}: unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}") from None
