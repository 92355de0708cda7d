"""The lowering features a golden exercises: what routes a case through different toolchain code.

A feature is a short string naming one path through the stack, read from a
case's golden (never from running it):

* ``tosa OP IN->OUT``: each TOSA op with its operand and result dtypes
  (``tosa CONV2D INT16,INT8->INT48``: an a16w8 convolution), plus the
  attributes that take another path through the lowering, the model
  converter or the shader: a strided or dilated CONV2D, a RESCALE per channel
  or with 16-bit multipliers and its rounding mode, a RESIZE's mode with each
  axis's direction (up, down, same) and a batch above one;
* ``pte KernelCall ...`` / ``pte DelegateCall ...``: each instruction kind of
  the ``.pte`` with its kernel or backend (a CPU fallback op is a
  ``KernelCall``); ``pte layout mismatch``: an output whose dim order the
  ``.pte`` states differently from the eager program;
* ``cpu OP``: each op left on the CPU by the partitioner;
* ``input DTYPE``, ``output DTYPE`` with their quantization ranges;
  ``delegation ...``, ``delegates N``, ``outputs N``: the program's shape;
* ``grid_sampler ...``: the grid-sampler delegate's interpolation with its
  padding and with its align-corners, its grid and image dtypes and layout,
  an RGBA image (aliased as an image on Vulkan) or not, a batch above one
  (each a branch of its shader);
* ``vgf ...``: each Vulkan format a VGF binds and each segment type;
* ``precision P``: the internal precision the quantizer was configured with;
  ``option NAME=VALUE``: each export option a case sets (a workaround
  switched off, PT2E quantization off, another grid qspec).

The pull-request tier must hold every feature the full matrix holds
(:mod:`vgf_conformance.cases.coverage`). A feature added here is one more
line in :func:`features`.
"""

from __future__ import annotations

import json
import re

_OP = re.compile(r"^op\[\d+\] (?P<name>[A-Z0-9_]+)\((?P<attrs>.*?)\) (?P<ins>.*?) -> (?P<outs>.*?) <-")
_DTYPE = re.compile(r"(?:\w+:)?([A-Z]+[0-9]*)\[([0-9x]*)\]")
_ATTR = re.compile(r"(\w+)=(\[[^\]]*\]|\S+)")
_VALUE = re.compile(r"^\[(\d+)\] (\w+)\[")


def _ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def tosa_op_features(op: str) -> set[str]:
    """The features of one TOSA op line of a golden's ``tosa`` section."""
    match = _OP.match(op)
    if not match:
        raise ValueError(f"op: not a golden TOSA op line: {op[:120]!r}")
    name, attrs = match["name"], dict(_ATTR.findall(match["attrs"]))
    ins = [dtype for dtype, _ in _DTYPE.findall(match["ins"])]
    ins = [d for i, d in enumerate(ins) if i == 0 or d != ins[i - 1]]  # a CONCAT's arity is no path
    outs = _DTYPE.findall(match["outs"])
    found = {f"tosa {name} {','.join(ins)}->{','.join(d for d, _ in outs)}"}
    if name in ("CONV2D", "DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D", "TRANSPOSE_CONV2D"):
        if any(s > 1 for s in _ints(attrs.get("stride", ""))):
            found.add(f"tosa {name} strided")
        if any(d > 1 for d in _ints(attrs.get("dilation", ""))):
            found.add(f"tosa {name} dilated")
    if name == "RESCALE":
        found.add(f"tosa RESCALE per_channel={attrs.get('per_channel')} scale32={attrs.get('scale32')} "
                  f"rounding={attrs.get('rounding_mode')}")
    if name == "RESIZE":
        y_n, y_d, x_n, x_d = _ints(attrs["scale"])
        for n, d in ((y_n, y_d), (x_n, x_d)):
            found.add(f"tosa RESIZE {attrs['mode']} {'up' if n > d else 'down' if n < d else 'same'}")
        batch = int(outs[0][1].split("x")[0]) if outs and outs[0][1] else 1
        if batch > 1:
            found.add("tosa RESIZE batch>1")
    return found


def _quant(q: dict | None) -> str:
    return f"[{q['quant_min']},{q['quant_max']}]" if q else "float"


def features(golden: dict) -> set[str]:
    """Every feature ``golden`` (a case's golden, as stored) exercises."""
    found: set[str] = set()
    case = golden.get("case", {})
    found.add(f"precision {case.get('internal_precision')}")
    found.add(f"delegation {case.get('expected_delegation')}")
    for name, value in case.get("options", {}).items():
        found.add(f"option {name}={json.dumps(value, sort_keys=True)}")
    for delegate in golden.get("tosa", []):
        for op in delegate["ops"]:
            found |= tosa_op_features(op)
    for op in golden.get("cpu_ops", []):
        found.add(f"cpu {op}")
    pte = golden.get("pte") or {}
    for instruction in pte.get("instructions", []):
        found.add("pte " + " ".join(instruction.split(" ")[:2]))
    if pte.get("output_layout_mismatches"):
        found.add("pte layout mismatch")
    backends = [d["backend"] for d in golden.get("delegates", [])]
    found.add(f"delegates {min(len(backends), 3)}{'+' if len(backends) >= 3 else ''}")
    found.add("delegates " + "+".join(sorted(set(backends))) if backends else "delegates none")
    found.add(f"outputs {'2+' if len(pte.get('outputs', [])) > 1 else '1'}")
    dtypes = {int(m[1]): m[2] for v in pte.get("values", []) if (m := _VALUE.match(v))}
    for kind, indices in (("input", pte.get("inputs", [])), ("output", pte.get("outputs", []))):
        found.update(f"{kind} {dtypes[i]}" for i in indices if i in dtypes)
    io = golden.get("io_quant_params") or {}
    for spec in io.get("inputs", []):
        q = spec.get("quant")
        found.add(f"input quant {q['dtype'] if q else 'float'} {_quant(q)}")
    for q in io.get("outputs", []):
        found.add(f"output quant {q['dtype'] if q else 'float'} {_quant(q)}")
    for sampler in golden.get("grid_sampler", []):
        found.add(f"grid_sampler {sampler['interpolation']} {sampler['padding_mode']}")
        found.add(f"grid_sampler {sampler['interpolation']} align_corners={sampler['align_corners']}")
        image = sampler["image"]
        found.add(f"grid_sampler grid {sampler['grid']['dtype']} image {image['dtype']} {image['memory_format']}")
        batch, channels = image["shape"][:2]
        found.add(f"grid_sampler image {'RGBA' if channels == 4 else 'not RGBA'}")
        if batch > 1:
            found.add("grid_sampler batch>1")
    for vgf in golden.get("vgf", []):
        for binding in vgf.get("inputs", []) + vgf.get("outputs", []):
            found.add("vgf " + binding.split("[")[0])
        for segment in vgf.get("segments", []):
            found.add(f"vgf segment {segment.get('type')}")
    return found
