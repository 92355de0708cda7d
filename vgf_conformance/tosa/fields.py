"""The fields of a TOSA 1.0 flatbuffer as plain Python values.

Enum names, raw constant data and operator attribute tables, read with the
generated FlatBuffers bindings that tosa-tools ships as the top-level package
``tosa`` (``tosa.TosaGraph``, ``tosa.TosaOperator`` ...; schema file
``site-packages/bin/tosa.fbs``). No torch, no executorch, no C++ extension.
:mod:`vgf_conformance.tosa.reader` builds the summary from these.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math

import numpy as np

# Generated FlatBuffers bindings shipped with tosa-tools (package "tosa").
import tosa.Attribute as _fb_attr_mod
import tosa.BlockSize as _fb_blocksize
import tosa.DType as _fb_dtype
import tosa.NanPropagationMode as _fb_nan
import tosa.Op as _fb_op
import tosa.ResizeMode as _fb_resize_mode
import tosa.RoundingMode as _fb_rounding


def _enum_names(cls) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


OP_NAMES = _enum_names(_fb_op.Op)
DTYPE_NAMES = _enum_names(_fb_dtype.DType)
ATTR_NAMES = _enum_names(_fb_attr_mod.Attribute)
ENUM_FIELDS = {
    "AccType": DTYPE_NAMES,
    "Mode": _enum_names(_fb_resize_mode.ResizeMode),
    "RoundingMode": _enum_names(_fb_rounding.RoundingMode),
    "NanMode": _enum_names(_fb_nan.NanPropagationMode),
    "BlockSize": _enum_names(_fb_blocksize.BlockSize),
}

# dtype -> (numpy dtype, bytes per element) for raw constant data
_NP_DTYPES = {
    "BOOL": (np.uint8, 1),
    "INT8": (np.dtype("<i1"), 1),
    "INT16": (np.dtype("<i2"), 2),
    "INT32": (np.dtype("<i4"), 4),
    "INT64": (np.dtype("<i8"), 8),
    "SHAPE": (np.dtype("<i8"), 8),
    "FP32": (np.dtype("<f4"), 4),
    "FP16": (np.dtype("<f2"), 2),
}


# --------------------------------------------------------------------------
# raw value decoding
# --------------------------------------------------------------------------

def vector(obj, name) -> list:
    """Read a flatbuffer vector field. (XAsNumpy() returns int 0 when absent!)"""
    if getattr(obj, name + "Length")() == 0:
        return []
    return getattr(obj, name + "AsNumpy")().tolist()


def raw_bytes(obj, name="Data") -> bytes:
    if obj is None or getattr(obj, name + "Length")() == 0:
        return b""
    return getattr(obj, name + "AsNumpy")().tobytes()


def decode_data(raw: bytes, dtype: str, count: int | None) -> list | None:
    """Decode raw little-endian constant bytes into a python list (or None)."""
    if dtype in _NP_DTYPES:
        npd, size = _NP_DTYPES[dtype]
        n = len(raw) // size if count is None else min(count, len(raw) // size)
        arr = np.frombuffer(raw[: n * size], dtype=npd)
        if dtype == "BOOL":
            return [bool(v) for v in arr]
        return arr.tolist()
    if dtype == "INT4":  # two signed nibbles per byte, low nibble first
        vals = []
        for b in raw:
            for nib in (b & 0xF, b >> 4):
                vals.append(nib - 16 if nib >= 8 else nib)
        return vals[:count] if count is not None else vals
    if dtype == "INT48":
        n = len(raw) // 6 if count is None else min(count, len(raw) // 6)
        return [int.from_bytes(raw[6 * i: 6 * i + 6], "little", signed=True) for i in range(n)]
    if dtype in ("BF16", "FP8E4M3", "FP8E5M2"):
        try:
            import ml_dtypes
            npd = {"BF16": ml_dtypes.bfloat16, "FP8E4M3": ml_dtypes.float8_e4m3fn,
                   "FP8E5M2": ml_dtypes.float8_e5m2}[dtype]
            isz = np.dtype(npd).itemsize
            n = len(raw) // isz if count is None else min(count, len(raw) // isz)
            return np.frombuffer(raw[: n * isz], dtype=npd).astype(np.float32).tolist()
        except Exception:  # pragma: no cover
            return None
    return None


def clean_float(v: float):
    """Non-finite floats as strings (JSON has no inf or nan)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def short_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


# --------------------------------------------------------------------------
# attribute reflection
# --------------------------------------------------------------------------

_SKIP_METHODS = {"Init"}


def _camel_to_snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def attribute_dict(op) -> tuple[str, dict]:
    """Return (attribute type name, {field: value}) for a TosaOperator."""
    atype = op.AttributeType()
    aname = ATTR_NAMES.get(atype, f"UNKNOWN_{atype}")
    table = op.Attribute()
    if atype == 0 or table is None:
        return aname, {}
    mod = importlib.import_module(f"tosa.{aname}")
    cls = getattr(mod, aname)
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    fields = {}
    for meth in dir(cls):
        if meth.startswith("_") or meth in _SKIP_METHODS or meth.startswith("GetRootAs"):
            continue
        if meth.endswith(("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")):
            continue
        key = _camel_to_snake(meth)
        if hasattr(cls, meth + "Length"):  # vector field
            if meth in ("MinVal", "MaxVal", "ImplementationAttrs"):
                fields[key] = raw_bytes(obj, meth)  # decoded by caller
            else:
                fields[key] = vector(obj, meth)
            continue
        val = getattr(obj, meth)()
        if isinstance(val, bytes):
            val = val.decode("utf-8", "replace")
        elif meth in ENUM_FIELDS:
            val = ENUM_FIELDS[meth].get(val, val)
        elif isinstance(val, (np.bool_, bool)):
            val = bool(val)
        elif isinstance(val, (np.integer,)):
            val = int(val)
        fields[key] = val
    return aname, fields


def _summarize_json_payload(obj, max_str=96):
    """Replace long strings (e.g. base64 SPIR-V) by length + hash."""
    if isinstance(obj, dict):
        return {k: _summarize_json_payload(v, max_str) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [_summarize_json_payload(v, max_str) for v in obj]
    if isinstance(obj, str) and len(obj) > max_str:
        return {"len": len(obj), "sha256_16": short_hash(obj.encode())}
    return obj


def decode_custom_attrs(raw: bytes):
    """A CUSTOM operator's implementation attributes: JSON (long strings
    hashed), short text, or a size and hash."""
    if not raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes": len(raw), "sha256_16": short_hash(raw)}
    try:
        return {"json": _summarize_json_payload(json.loads(text))}
    except ValueError:
        if len(text) <= 96:
            return {"text": text}
        return {"bytes": len(raw), "sha256_16": short_hash(raw)}
