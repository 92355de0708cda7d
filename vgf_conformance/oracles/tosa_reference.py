"""Run a TOSA flatbuffer through the TOSA reference model in a child process.

Why a child: ``tosa_reference_model.run`` is a C++ extension; an invalid graph
can kill the interpreter (an ERROR_IF that is not at the graph's last
operator ends in SIGSEGV while the outputs are copied out). The child imports
only numpy and the extension (no torch), so it starts in about 0.15 s.

run_tosa_in_child_ex(fb, inputs, timeout=60, **opts) -> TosaRunResult
    Never raises for graph problems; returns status, outputs, parsed errors
    (naming the failing operator and its attributes, mapped through
    :func:`vgf_conformance.tosa.reader.summarize_tosa`), raw stderr/stdout, return
    code / signal and timings.

Inputs: list of numpy arrays in the order of the graph's block inputs, NHWC
for images, dtype matching the TOSA tensor (INT8 -> np.int8, INT16 -> np.int16,
INT32 -> np.int32, FP32 -> np.float32, FP16 -> np.float16, BOOL -> np.bool_).
With ``validate=True`` (default) count/shape/dtype are checked in the parent
against the flatbuffer before anything is run.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

from vgf_conformance import process
from vgf_conformance.oracles.tosa_log import parse_refmodel_stderr
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

# numpy dtype expected by the reference model for each TOSA DType
TOSA_TO_NUMPY = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP32": np.dtype(np.float32),
    "FP16": np.dtype(np.float16),
}

STATUS_NAMES = {0: "TOSA_VALID", 1: "TOSA_UNPREDICTABLE", 2: "TOSA_ERROR"}

# Child program: keep imports minimal (numpy + the extension; no torch).
_CHILD = r"""
import os, sys, json, time
t0 = time.perf_counter()
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")
import numpy as np
import tosa_reference_model as rm
t1 = time.perf_counter()
d = sys.argv[1]
opts = json.loads(open(os.path.join(d, "opts.json")).read())
fb = open(os.path.join(d, "graph.tosa"), "rb").read()
with np.load(os.path.join(d, "inputs.npz"), allow_pickle=False) as z:
    inputs = [z["arr_%d" % i] for i in range(len(z.files))]
res = {"import_s": t1 - t0}
sys.stderr.write("@@TOSA_RUN_BEGIN@@\n"); sys.stderr.flush()
try:
    t2 = time.perf_counter()
    outs, status = rm.run(fb, inputs, **opts)
    res["run_s"] = time.perf_counter() - t2
    res["status"] = int(status.value)
    np.savez(os.path.join(d, "outputs.npz"), *[np.ascontiguousarray(o) for o in outs])
except Exception as e:  # ValueError for bad inputs/options
    res["exception"] = "%s: %s" % (type(e).__name__, e)
sys.stdout.flush(); sys.stderr.flush()
with open(os.path.join(d, "result.json.tmp"), "w") as f:
    json.dump(res, f)
os.replace(os.path.join(d, "result.json.tmp"), os.path.join(d, "result.json"))
"""


#: The suite runs the reference model with the TOSA level limits (kernel
#: sizes, tensor ranks and sizes, scale ratios) of the 8K level checked: a
#: delegate beyond them is a failure at stage run naming the limit, not a
#: silent pass.
TOSA_LEVEL = "EIGHTK"
#: A folder of a case's artifacts holding the reference model's successful
#: runs by content: ``<sha256>.npz``, the outputs of one flatbuffer run with
#: one set of options on one set of input bytes. The reference model is a
#: deterministic function of those, so the ``.pte`` tier (which runs the
#: payload its plan calls on the bytes its plan passes) and the Vulkan tier's
#: rerun reuse the numerics tier's run when, and only when, they ask for
#: exactly the same thing; anything else (another payload, other bytes, a
#: wrong layout) misses and runs. Failed runs are never kept.
RUNS_DIR = "tosa_runs"


def run_key(fb: bytes, inputs: Sequence[np.ndarray], opts: dict) -> str:
    """The sha256 of one run: the flatbuffer, the options, and each input's
    dtype, shape and bytes."""
    digest = hashlib.sha256(fb)
    digest.update(json.dumps(opts, sort_keys=True).encode())
    for array in inputs:
        digest.update(f"|{array.dtype.str}{tuple(array.shape)}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


@dataclass
class TosaRunResult:
    status: str  # TOSA_VALID / TOSA_ERROR / TOSA_UNPREDICTABLE / CRASH / TIMEOUT / EXCEPTION / BAD_INPUT
    outputs: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # parsed ERROR_IF/REQUIRE reports
    messages: list = field(default_factory=list)  # other WARNING/ERROR lines
    returncode: int | None = None
    signal: str | None = None
    exception: str | None = None
    stderr: str = ""
    stdout: str = ""
    timings: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "TOSA_VALID"

    def describe(self) -> str:
        parts = [self.status]
        if self.signal:
            parts.append(f"signal={self.signal}")
        if self.exception:
            parts.append(self.exception)
        for e in self.errors:
            parts.append(
                f"{e.get('kind')} in {e.get('op_type')} (node {e.get('node_id')}"
                + (f", op[{e['op_index']}]" if e.get("op_index") is not None else "")
                + f"): {e.get('message') or e.get('condition')}"
                + (f"\n  operator: {e['op_brief']}" if e.get("op_brief") else "")
            )
        if not self.errors and self.messages:
            parts.append(self.messages[-1])
        return "; ".join(parts)


def _status_from_messages(res: "TosaRunResult") -> None:
    """A crashed child may already have printed the graph verdict. Known case:
    after an ERROR_IF in a node whose result does not reach the graph output
    directly, run() segfaults in getOutput() -> Tensor::writeToVector() while
    copying the never-computed output tensor (SIGSEGV). Keep signal, but report
    the verdict the reference model reached."""
    for m in res.messages:
        if "Graph result: ERROR." in m:
            res.status = "TOSA_ERROR"
        elif "Graph result: UNPREDICTABLE." in m:
            res.status = "TOSA_UNPREDICTABLE"


# --------------------------------------------------------------------------
# input validation against the graph
# --------------------------------------------------------------------------

def graph_io(fb: bytes) -> dict:
    """Graph input/output descriptors (shape, dtype, name) and op map."""
    from vgf_conformance.tosa.reader import summarize_tosa

    s = summarize_tosa(fb, include_names=True, include_fb_index=True, hash_constants=False)
    return s


def validate_inputs(fb_summary: dict, inputs: Sequence[np.ndarray]) -> list[str]:
    problems = []
    gins = fb_summary["inputs"]
    if len(inputs) != len(gins):
        problems.append(f"graph has {len(gins)} inputs, got {len(inputs)}")
    for i, (g, a) in enumerate(zip(gins, inputs)):
        want = TOSA_TO_NUMPY.get(g["dtype"])
        if want is not None and np.asarray(a).dtype != want:
            problems.append(f"input[{i}] ({g.get('name')}): dtype {np.asarray(a).dtype}, graph wants {g['dtype']} ({want})")
        if list(np.shape(a)) != list(g["shape"]):
            problems.append(f"input[{i}] ({g.get('name')}): shape {list(np.shape(a))}, graph wants {g['shape']} (NHWC)")
    return problems


def _attach_ops(result: TosaRunResult, fb_summary: dict | None):
    if not fb_summary:
        return
    by_fb = {op.get("fb_index"): op for op in fb_summary.get("operators", [])}
    for e in result.errors:
        op = by_fb.get(e.get("node_id"))
        if op is not None:
            e["op_index"] = op["index"]
            e["op_brief"] = op["brief"]
            e["op_attrs"] = op["attrs"]


# --------------------------------------------------------------------------
# one-shot child
# --------------------------------------------------------------------------

def _opts(tosa_level="NONE", verbosity="NONE", precise_mode=0, bounds_mode=False, extra=None, trace_nodes=True):
    o = {"verbosity": verbosity, "tosa_level": tosa_level, "precise_mode": int(precise_mode),
         "bounds_mode": bool(bounds_mode)}
    if trace_nodes and verbosity == "NONE":
        # "[0:GT]: Evaluating node_NNN, OP, ..." lines: lets REQUIRE/LEVEL_CHECK
        # failures (which print no "Node type" line) be attributed to a node.
        # Costs ~6 stderr lines per operator.
        o["verbosity"], o["debug_mode"] = "LOW", "GT"
    if extra:
        o.update(extra)
    return o


def run_tosa_in_child_ex(
    fb: bytes,
    inputs: Sequence[np.ndarray],
    timeout: float = 60.0,
    *,
    validate: bool = True,
    tosa_level: str = "NONE",
    verbosity: str = "NONE",
    precise_mode: int = 0,
    bounds_mode: bool = False,
    extra_opts: dict | None = None,
    trace_nodes: bool = True,
    python: str | None = None,
    cache_dir: str | Path | None = None,
) -> TosaRunResult:
    """Run ``fb`` on ``inputs`` in a child process (see the module's doc).
    With ``cache_dir`` (a case's ``RUNS_DIR``), a run already made there on
    the same flatbuffer, options and input bytes is read back instead of
    made again (``timings["cached"]``); a new successful run is kept there."""
    t_start = time.perf_counter()
    fb = bytes(fb)
    inputs = [np.ascontiguousarray(a) for a in inputs]
    kept = None
    if cache_dir is not None:
        opts = _opts(tosa_level, verbosity, precise_mode, bounds_mode, extra_opts, trace_nodes)
        kept = Path(cache_dir) / f"{run_key(fb, inputs, {**opts, 'validate': validate})}.npz"
        if kept.is_file():
            with np.load(kept, allow_pickle=False) as z:
                outputs = [z["arr_%d" % i] for i in range(len(z.files))]
            return TosaRunResult(status="TOSA_VALID", outputs=outputs,
                                 timings={"cached": True, "total_s": time.perf_counter() - t_start})
    result = _run_tosa_in_child(fb, inputs, timeout, validate=validate, tosa_level=tosa_level,
                                verbosity=verbosity, precise_mode=precise_mode, bounds_mode=bounds_mode,
                                extra_opts=extra_opts, trace_nodes=trace_nodes, python=python)
    if kept is not None and result.ok:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(f"{kept.stem}.{os.getpid()}.tmp.npz")
        np.savez(partial, *result.outputs)
        os.replace(partial, kept)  # whole or absent, for a reader in another process
    return result


def _run_tosa_in_child(fb: bytes, inputs: list[np.ndarray], timeout: float, *, validate: bool,
                       tosa_level: str, verbosity: str, precise_mode: int, bounds_mode: bool,
                       extra_opts: dict | None, trace_nodes: bool, python: str | None) -> TosaRunResult:
    t_start = time.perf_counter()
    summary = None
    pre = None
    if validate:
        try:
            summary = graph_io(fb)
        except Exception as e:  # unparsable flatbuffer: let the ref model speak
            summary = None
            pre = f"flatbuffer not parsable by python bindings: {e}"
        else:
            problems = validate_inputs(summary, inputs)
            if problems:
                return TosaRunResult(status="BAD_INPUT", messages=problems,
                                     timings={"total_s": time.perf_counter() - t_start})
    with tempfile.TemporaryDirectory(prefix="tosa_run_") as d:
        with open(os.path.join(d, "graph.tosa"), "wb") as f:
            f.write(fb)
        np.savez(os.path.join(d, "inputs.npz"), *inputs)
        with open(os.path.join(d, "opts.json"), "w") as f:
            json.dump(_opts(tosa_level, verbosity, precise_mode, bounds_mode, extra_opts, trace_nodes), f)
        env = dict(os.environ)
        env["TOSA_MODEL_NO_BACKTRACE"] = "1"  # else: gdb attach on every ERROR_IF (~1 s)
        env.setdefault("OMP_NUM_THREADS", "1")
        t_spawn = time.perf_counter()
        try:
            p = process.run([python or sys.executable, "-c", _CHILD, d], capture_output=True,
                               timeout=timeout, env=env, cwd=d)
        except subprocess.TimeoutExpired as e:
            return TosaRunResult(status="TIMEOUT",
                                 stderr=(e.stderr or b"").decode(errors="replace"),
                                 stdout=(e.stdout or b"").decode(errors="replace"),
                                 timings={"total_s": time.perf_counter() - t_start})
        t_child = time.perf_counter() - t_spawn
        stderr = p.stderr.decode(errors="replace")
        stdout = p.stdout.decode(errors="replace")
        run_err = stderr.split("@@TOSA_RUN_BEGIN@@\n", 1)[-1]
        errors, messages = parse_refmodel_stderr(run_err)
        res = TosaRunResult(status="CRASH", errors=errors, messages=messages, returncode=p.returncode,
                            stderr=stderr, stdout=stdout)
        if pre:
            res.messages.insert(0, pre)
        if p.returncode < 0:
            res.signal = process.exit_text(p.returncode)
        _status_from_messages(res)
        rpath = os.path.join(d, "result.json")
        if os.path.exists(rpath):
            with open(rpath) as f:
                r = json.load(f)
            res.timings.update({k: v for k, v in r.items() if k.endswith("_s")})
            if "exception" in r:
                res.status, res.exception = "EXCEPTION", r["exception"]
            else:
                res.status = STATUS_NAMES.get(r["status"], str(r["status"]))
                opath = os.path.join(d, "outputs.npz")
                with np.load(opath, allow_pickle=False) as z:
                    res.outputs = [z["arr_%d" % i] for i in range(len(z.files))]
        res.timings["child_wall_s"] = t_child
        res.timings["total_s"] = time.perf_counter() - t_start
    _attach_ops(res, summary)
    return res

