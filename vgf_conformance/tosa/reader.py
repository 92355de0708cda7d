"""A TOSA 1.0 flatbuffer as a stable, JSON-serialisable summary.

``summarize_tosa(fb_bytes)`` describes the graph's IO and each operator: its
operands, outputs, the attributes that matter and a one-line ``brief``. The
``tosa`` section of a golden keeps part of it
(:func:`vgf_conformance.goldens.sections.golden_tosa`); the TOSA reference-model
oracle maps the model's errors back to operators with it.

Stability rules
---------------
* Tensor names are NOT part of the default output. Operands are referenced
  structurally: ``"graph_input[i]"``, ``"op[k].out[j]"`` (k = index among the
  non-constant operators), or inlined as a constant.
* CONST / CONST_SHAPE operators are folded into their consumers. In TOSA 1.0
  most "attributes" (RESIZE scale/offset/border, RESCALE multiplier/shift,
  zero points, PAD padding, SLICE start/size, ...) are such constant operands;
  they are resolved into plain int lists under ``"operands"``.
* Large constants (weights) are summarised as shape/dtype/count/min/max and,
  by default, a truncated sha256 of the raw bytes.
"""

from __future__ import annotations

import math
from typing import Any

import tosa.TosaGraph as _fb_graph

from vgf_conformance.tosa.fields import (
    DTYPE_NAMES,
    OP_NAMES,
    attribute_dict,
    clean_float,
    decode_custom_attrs,
    decode_data,
    raw_bytes,
    short_hash,
    vector,
)
from vgf_conformance.tosa.rules import resize_spec_errors
from vgf_conformance.text import round_floats

CONST_OPS = {"CONST", "CONST_SHAPE"}
#: Constants with at most this many elements are inlined as values.
MAX_INLINE = 16
#: Operands computed from calibrated scales, which move slightly from one
#: machine to another (vgf_conformance.goldens.compliance compares them within a
#: band): always inlined as values, whatever their size, so that a golden
#: compares their values rather than a hash of them.
TOLERANT_OPERANDS = {"RESCALE": ("multiplier", "shift"), "CONV2D": ("bias",), "CONV3D": ("bias",),
                     "DEPTHWISE_CONV2D": ("bias",), "TRANSPOSE_CONV2D": ("bias",)}

# TOSA 1.0 operand order (spec "Arguments" tables) for ops whose extra operands
# are usually compile-time constants.
OPERAND_NAMES = {
    "RESCALE": ["input", "multiplier", "shift", "input_zp", "output_zp"],
    "RESIZE": ["input", "scale", "offset", "border"],
    "CONV2D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "CONV3D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "DEPTHWISE_CONV2D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "TRANSPOSE_CONV2D": ["input", "weight", "bias", "input_zp", "weight_zp"],
    "AVG_POOL2D": ["input", "input_zp", "output_zp"],
    "MAX_POOL2D": ["input"],
    "PAD": ["input", "padding", "pad_const"],
    "SLICE": ["input", "start", "size"],
    "TILE": ["input", "multiples"],
    "RESHAPE": ["input", "shape"],
    "TRANSPOSE": ["input"],
    "MATMUL": ["a", "b", "a_zp", "b_zp"],
    "MUL": ["input1", "input2", "shift"],
    "NEGATE": ["input", "input_zp", "output_zp"],
    "TABLE": ["input", "table"],
    "GATHER": ["values", "indices"],
    "SCATTER": ["values_in", "indices", "input"],
    "SELECT": ["cond", "on_true", "on_false"],
    "CLAMP": ["input"],
}


class _Block:
    def __init__(self, blk):
        self.blk = blk
        self.tensors = {}
        for i in range(blk.TensorsLength()):
            t = blk.Tensors(i)
            shape = vector(t, "Shape")
            dtype = DTYPE_NAMES.get(t.Type(), str(t.Type()))
            self.tensors[t.Name().decode()] = {
                "shape": [int(s) for s in shape], "dtype": dtype,
                "raw": raw_bytes(t), "variable": bool(t.Variable()),
                "unranked": bool(t.IsUnranked()),
            }
        # TOSA 1.0: CONST_SHAPE results live in the block's `shapes` table
        # (rank == number of elements, data == int64 little endian).
        self.shapes = {}
        for i in range(blk.ShapesLength()):
            s = blk.Shapes(i)
            raw = raw_bytes(s)
            self.shapes[s.Name().decode()] = {"shape": [int(s.Rank())], "dtype": "SHAPE", "raw": raw}
        self.inputs = [blk.Inputs(i).decode() for i in range(blk.InputsLength())]
        self.outputs = [blk.Outputs(i).decode() for i in range(blk.OutputsLength())]
        self.ops = [blk.Operators(i) for i in range(blk.OperatorsLength())]

    def info(self, name):
        return self.tensors.get(name) or self.shapes.get(name) or {"shape": None, "dtype": "UNKNOWN", "raw": b""}


def _const_value(info, inline_all: bool = False):
    dtype = info["dtype"]
    shape = info["shape"] or []
    count = math.prod(int(s) for s in shape) if shape is not None else None
    raw = info["raw"]
    vals = decode_data(raw, dtype, count)
    out = {"shape": shape, "dtype": dtype}
    if vals is not None and (len(vals) <= MAX_INLINE or inline_all):
        out["value"] = [clean_float(v) for v in vals]
    else:
        out["count"] = count
        if vals:
            finite = [v for v in vals if not (isinstance(v, float) and not math.isfinite(v))]
            if finite:
                out["min"] = clean_float(min(finite))
                out["max"] = clean_float(max(finite))
    if vals is not None and count is not None and len(vals) < count:
        out["short_data"] = True
    return out


def _scalar_or_list(v):
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def summarize_tosa(
    fb: bytes,
    *,
    include_names: bool = False,
    include_fb_index: bool = False,
    hash_constants: bool = True,
) -> dict[str, Any]:
    """Parse a TOSA flatbuffer into a stable, JSON-serialisable description.

    include_names: add tensor names (unstable across exporter versions).
    include_fb_index: add each op's index in the flatbuffer operator list
        (== the reference model's "Node ... ID: n"); depends on CONST placement.
    hash_constants: add sha256[:16] of large constant data (weights).
    Constants of at most MAX_INLINE elements are inlined as values.
    """
    buf = bytearray(fb) if not isinstance(fb, bytearray) else fb
    if not _fb_graph.TosaGraph.TosaGraphBufferHasIdentifier(buf, 0):
        raise ValueError("not a TOSA flatbuffer (file identifier 'TOSA' missing)")
    g = _fb_graph.TosaGraph.GetRootAs(buf, 0)
    v = g.Version()
    result: dict[str, Any] = {
        "format": "tosa-flatbuffer",
        # The flatbuffer's Version table; TosaGraph has no profile or extension
        # field (the profile is the delegate's compile spec, see PteMeta.tosa_specs).
        "tosa_version": f"{v._Major()}.{v._Minor()}.{v._Patch()}" + ("d" if v._Draft() else ""),
    }
    blocks = []
    for r in range(g.RegionsLength()):
        reg = g.Regions(r)
        for b in range(reg.BlocksLength()):
            blocks.append((reg.Name().decode(), reg.Blocks(b)))
    if not blocks:
        raise ValueError("TOSA graph has no basic blocks")
    summaries = [
        _summarize_block(_Block(blk), include_names, include_fb_index, hash_constants)
        for _, blk in blocks
    ]
    main = summaries[0]
    result.update(main)
    if len(summaries) > 1:  # control flow (COND_IF / WHILE_LOOP) sub-blocks
        result["other_blocks"] = [
            dict(s, region=rname) for (rname, _), s in zip(blocks[1:], summaries[1:])
        ]
    return result


def _summarize_block(B: _Block, include_names, include_fb_index, hash_constants):
    producer: dict[str, str] = {}
    for i, name in enumerate(B.inputs):
        producer[name] = f"graph_input[{i}]"
    const_ops = 0
    const_bytes = 0
    ops_out = []
    k = 0
    for fb_idx, op in enumerate(B.ops):
        opname = OP_NAMES.get(op.Op(), f"UNKNOWN_{op.Op()}")
        in_names = [op.Inputs(i).decode() for i in range(op.InputsLength())]
        out_names = [op.Outputs(i).decode() for i in range(op.OutputsLength())]
        if opname in CONST_OPS:
            const_ops += 1
            for n in out_names:
                producer[n] = "const"
                const_bytes += len(B.info(n)["raw"])
            continue
        aname, attrs = attribute_dict(op)
        entry: dict[str, Any] = {"index": k, "op": opname}
        if include_fb_index:
            entry["fb_index"] = fb_idx
        roles = OPERAND_NAMES.get(opname, [])
        tolerant = TOLERANT_OPERANDS.get(opname, ())
        tolerant_hashes = {}
        operands = []
        for pos, n in enumerate(in_names):
            info = B.info(n)
            role = roles[pos] if pos < len(roles) else f"input{pos}"
            src = producer.get(n)
            if src is None and info["raw"]:
                src = "const"  # tensor with data but no CONST op
            d: dict[str, Any] = {"role": role}
            if src == "const":
                c = _const_value(info, inline_all=role in tolerant)
                if role in tolerant:  # what a VGF constant made of it hashes to
                    tolerant_hashes[role] = short_hash(info["raw"])
                if hash_constants and "value" not in c:
                    c["sha256_16"] = short_hash(info["raw"])
                d["const"] = c
            else:
                d["from"] = src if src is not None else "UNRESOLVED"
                d["shape"] = info["shape"]
                d["dtype"] = info["dtype"]
            if include_names:
                d["name"] = n
            operands.append(d)
        outs = []
        for j, n in enumerate(out_names):
            info = B.info(n)
            o = {"shape": info["shape"], "dtype": info["dtype"]}
            if include_names:
                o["name"] = n
            outs.append(o)
            producer[n] = f"op[{k}].out[{j}]"
        entry["operand_roles"] = [d["role"] for d in operands]  # every operand, in order
        entry["inputs"] = [d for d in operands if "const" not in d]
        big = {d["role"]: d["const"] for d in operands if "const" in d and "value" not in d["const"]}
        if big:
            entry["const_operands"] = big
        if tolerant_hashes:
            entry["tolerant_hashes"] = tolerant_hashes
        entry["outputs"] = outs
        entry["attrs"] = _op_attrs(opname, attrs, operands, outs, B, in_names)
        entry["brief"] = _brief(entry)
        ops_out.append(entry)
        k += 1

    def io(names, is_input):
        lst = []
        for i, n in enumerate(names):
            info = B.info(n)
            d = {"index": i, "shape": info["shape"], "dtype": info["dtype"]}
            if not is_input:
                d["from"] = producer.get(n, "UNRESOLVED")
            if include_names:
                d["name"] = n
            lst.append(d)
        return lst

    counts: dict[str, int] = {}
    for e in ops_out:
        counts[e["op"]] = counts.get(e["op"], 0) + 1
    return {
        "inputs": io(B.inputs, True),
        "outputs": io(B.outputs, False),
        "op_sequence": [e["op"] for e in ops_out],
        "op_counts": dict(sorted(counts.items())),
        "constants": {"const_ops": const_ops, "data_bytes": const_bytes},
        "brief": [e["brief"] for e in ops_out],
        "operators": ops_out,
    }


def tensor_text(d) -> str:
    """``INT8[1x8x8x4]``: a summary tensor's dtype and shape."""
    shape = d.get("shape")
    dims = "x".join(str(x) for x in shape) if shape is not None else "?"
    return f"{d.get('dtype')}[{dims}]"


def _brief(entry) -> str:
    """One-line human readable description of an operator (for diffs)."""
    a = entry["attrs"]
    keys = {
        "RESIZE": ["mode", "scale", "offset", "border"],
        "RESCALE": ["multiplier", "shift", "input_zp", "output_zp", "rounding_mode", "per_channel", "scale32",
                    "input_unsigned", "output_unsigned"],
        "CONV2D": ["pad", "stride", "dilation", "input_zp", "weight_zp", "acc_type", "bias"],
        "DEPTHWISE_CONV2D": ["pad", "stride", "dilation", "input_zp", "weight_zp", "acc_type", "bias"],
        "AVG_POOL2D": ["kernel", "stride", "pad", "input_zp", "output_zp", "acc_type"],
        "MAX_POOL2D": ["kernel", "stride", "pad"],
        "PAD": ["padding", "pad_const"],
        "SLICE": ["start", "size"],
        "TRANSPOSE": ["perms"],
        "RESHAPE": ["shape"],
        "CLAMP": ["min_val", "max_val"],
        "CUSTOM": ["domain_name", "operator_name"],
    }.get(entry["op"], sorted(k for k in a if not isinstance(a[k], (dict, list)) or len(a[k]) <= 8))
    parts = []
    for k in keys:
        if k in a:
            v = round_floats(a[k])
            if isinstance(v, list) and len(v) > 4 and len(set(map(str, v))) == 1:
                v = f"{v[0]}x{len(v)}"
            parts.append(f"{k}={v}".replace(" ", ""))
    ins = ",".join(tensor_text(d) for d in entry["inputs"])
    if entry.get("const_operands"):
        ins += "".join(f",{r}:{tensor_text(c)}" for r, c in entry["const_operands"].items())
    outs = ",".join(tensor_text(d) for d in entry["outputs"])
    return f"{entry['op']}({' '.join(parts)}) {ins} -> {outs}"


def _cval(operands, role):
    for o in operands:
        if o["role"] == role and "const" in o:
            return o["const"].get("value")
    return None


def _op_attrs(opname, attrs, operands, outs, B, in_names) -> dict:
    """Readable attributes: flatbuffer attribute fields + resolved constant operands."""
    a = {}
    for k2, v in attrs.items():
        if isinstance(v, bytes):
            continue
        a[k2] = v
    # resolve constant operands into named values
    for o in operands:
        if "const" in o and "value" in o["const"] and o["role"] not in ("input", "weight", "table"):
            a[o["role"]] = _scalar_or_list(o["const"]["value"]) if o["role"].endswith("zp") else o["const"]["value"]
    if opname == "RESCALE":
        mult = _cval(operands, "multiplier")
        shift = _cval(operands, "shift")
        if mult is not None and shift is not None:
            a["effective_scale"] = [m / float(2 ** s) for m, s in zip(mult, shift)] if len(shift) == len(mult) else None
    elif opname == "RESIZE":
        scale, offset, border = (_cval(operands, r) for r in ("scale", "offset", "border"))
        in_shape = B.info(in_names[0])["shape"]
        if scale and len(scale) == 4:
            a["ratio_hw"] = [scale[0] / scale[1], scale[2] / scale[3]]
        a["spec_errors"] = resize_spec_errors(in_shape, outs[0]["shape"], scale or [], offset or [], border or [])
    elif opname == "CLAMP":
        in_dtype = B.info(in_names[0])["dtype"]
        for key in ("min_val", "max_val"):
            raw = attrs.get(key, b"")
            vals = decode_data(raw, in_dtype, 1) if raw else None
            a[key] = vals[0] if vals else None
    elif opname == "CUSTOM":
        a["implementation_attrs"] = decode_custom_attrs(attrs.get("implementation_attrs", b""))
    elif opname == "PAD":
        p = a.get("padding")
        if isinstance(p, list) and len(p) % 2 == 0:
            a["padding_pairs"] = [p[i:i + 2] for i in range(0, len(p), 2)]
    elif opname in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "CONV3D"):
        w = next((o for o in operands if o["role"] == "weight"), None)
        if w is not None:
            a["weight_shape"] = w.get("const", w).get("shape")
    return a
