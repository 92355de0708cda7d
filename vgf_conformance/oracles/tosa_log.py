"""What the TOSA reference model prints, parsed: when a check fails, each
failing ERROR_IF / REQUIRE / LEVEL_CHECK with the operator (its node id and
type) and its tensors, and the warnings and errors it printed after
(:func:`parse_refmodel_stderr`; :mod:`vgf_conformance.oracles.tosa_reference`
reads the log of its child process with it); with ``dump_intermediates``,
every integer tensor it computed (:func:`parse_dump`, for
:mod:`vgf_conformance.oracles.localize`)."""

from __future__ import annotations

import os
import re

import numpy as np

_RE_FAIL = re.compile(r"^(\w*ERROR_IF|REQUIRE|ASSERT\w*|LEVEL_CHECK)\(\) fails AT (\S+):(\d+) (\w+)\(\):\s*(.*)$")
_RE_NODE = re.compile(r"^Node type: (\w+) ID: (\d+)")
_RE_TENS = re.compile(
    r"^\s*(Input|Output)\[(\d+)\]\s+Name: (\S+) DType=(\w+) isValid=(\d) Rank=(\d+) Shape=\[([^\]]*)\]"
    r"(?: ShapeValue=\[([^\]]*)\])?"
)
_RE_MSG = re.compile(r"^(WARNING|ERROR|FATAL ERROR) AT (\S+):(\d+) (\w+)\(\):\s*$")
# printed with verbosity>=LOW and debug_mode containing GT (see trace_nodes)
_RE_EVAL = re.compile(r"^\[\d+:GT\]: Evaluating node_(\d+),\s+(\w+),")


def _ints(s: str | None):
    if not s:
        return []
    return [int(x) for x in s.replace(" ", "").split(",") if x != ""]


def parse_refmodel_stderr(text: str) -> tuple[list[dict], list[str]]:
    """Extract failure reports from reference-model stderr.

    The reference model prints, for a failing check:
        ERROR_IF() fails AT .../ops/image.cpp:121 eval(): (<condition>)
        OpResize: invalid attribute scale
        Node type: RESIZE ID: 3 Eval Count: 0 ...
            Input[1]  Name: scale DType=SHAPE isValid=1 Rank=1 Shape=[4, ] ShapeValue=[2, 32, 2, 32, ]
        ...
    then WARNING lines ("Failed to evaluate node: 3", "Graph result: ERROR.").
    Node ID == index in the flatbuffer operator list (CONST ops included).
    """
    errors: list[dict] = []
    messages: list[str] = []
    cur: dict | None = None
    evaluating: tuple[int, str] | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _RE_EVAL.match(ln)
        if m:
            evaluating = (int(m.group(1)), m.group(2))
            i += 1
            continue
        m = _RE_FAIL.match(ln)
        if m:
            cur = {
                "kind": m.group(1), "where": f"{os.path.basename(m.group(2))}:{m.group(3)}",
                "function": m.group(4), "condition": m.group(5).strip(),
                "message": None, "op_type": None, "node_id": None, "tensors": [], "count": 1,
            }
            if evaluating is not None:  # REQUIRE / LEVEL_CHECK print no "Node type" line
                cur["node_id"], cur["op_type"] = evaluating
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if nxt and not (_RE_NODE.match(nxt) or _RE_MSG.match(nxt) or _RE_FAIL.match(nxt) or nxt.startswith("[")):
                cur["message"] = nxt.strip()
                i += 1
            key = (cur["kind"], cur["where"], cur["message"], cur["node_id"])
            dup = next((e for e in errors if (e["kind"], e["where"], e["message"], e["node_id"]) == key), None)
            if dup is not None:  # e.g. one REQUIRE per failing element
                dup["count"] += 1
                cur = dup
            else:
                errors.append(cur)
            i += 1
            continue
        m = _RE_NODE.match(ln)
        if m and cur is not None and not cur["tensors"] and "_node_line" not in cur:
            cur["op_type"], cur["node_id"] = m.group(1), int(m.group(2))
            cur["_node_line"] = True
            i += 1
            continue
        m = _RE_TENS.match(ln)
        if m and cur is not None:
            t = {"dir": m.group(1).lower(), "index": int(m.group(2)), "name": m.group(3),
                 "dtype": m.group(4), "valid": m.group(5) == "1", "shape": _ints(m.group(7))}
            if m.group(8) is not None:
                t["value"] = _ints(m.group(8))
            cur["tensors"].append(t)
            i += 1
            continue
        m = _RE_MSG.match(ln)
        if m:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            messages.append(f"{m.group(1)} {os.path.basename(m.group(2))}:{m.group(3)} {m.group(4)}: {nxt}")
            cur = None
            i += 2
            continue
        i += 1
    for e in errors:
        e.pop("_node_line", None)
    return errors, messages


_DUMP_NAME = re.compile(r"^Name: (\S+) DType=(\w+) isValid=\d Rank=\d+ Shape=\[([\d, ]*)\]")
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_INTEGER_DTYPES = frozenset({"INT8", "INT16", "INT32", "INT48"})


def parse_dump(text: str) -> dict[str, np.ndarray]:
    """The integer tensors of a reference-model dump (``dump_intermediates``), by name."""
    tensors: dict[str, np.ndarray] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _DUMP_NAME.match(lines[i])
        i += 1
        if not match or match[2] not in _INTEGER_DTYPES:
            continue
        shape = [int(v) for v in match[3].replace(" ", "").split(",") if v]
        count, values = int(np.prod(shape)) if shape else 1, []
        while i < len(lines) and len(values) < count and not lines[i].startswith(("Node type", "Name:")):
            values.extend(int(v) for v in _NUMBER.findall(lines[i]))
            i += 1
        if len(values) == count:
            tensors[match[1]] = np.array(values, dtype=np.int64).reshape(shape)
    return tensors
