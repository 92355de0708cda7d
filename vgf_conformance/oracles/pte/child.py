"""The runtime child: ``python -m vgf_conformance.oracles.pte meta|run|execute
PTE --out ANSWER.json ...`` for one request, or ``serve`` for many (see
:mod:`vgf_conformance.oracles.pte.runtime` for the parent side). Loads the program
with the installed pybindings (``executorch.extension.pybindings._C``),
describes ``forward`` or runs it, or executes its serialized plan
(:mod:`vgf_conformance.oracles.pte.execute`), and writes the answer (or the error)
as JSON.

``serve`` is a served child (:class:`vgf_conformance.process.ServedChild`):
it reads one request (a JSON object: ``command``, ``pte``, ``out`` and the
command's options) per line of standard input, writes each answer to the
request's ``out`` and then ``{"done": true}`` on its answer pipe (standard
output and error are the runtime's log).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vgf_conformance.oracles.pte.reader import SCALAR_TYPES, read_plan
from vgf_conformance import process
from vgf_conformance.oracles.pte.runtime import VERIFICATIONS

DESCRIPTION = "The shipped ``program.pte`` as ExecuTorch's own runtime sees it."


class _InputError(ValueError):
    """Bad inputs of a run: the parent raises ValueError for them."""


def _import_runtime():
    import torch  # noqa: F401  (the pybindings link against libtorch)
    import executorch
    from executorch.extension.pybindings import _C

    # The pybindings carry the portable and optimized kernels; the
    # quantized_decomposed kernels are a separate library in the wheel that
    # registers itself with the runtime when loaded.
    quantized = Path(executorch.__path__[0]) / "lib" / "libexecutorch_kernels_quantized.so"
    if quantized.exists():
        ctypes.CDLL(str(quantized), mode=ctypes.RTLD_GLOBAL)
    return _C


def _tensor_info(info, dim_order: tuple[int, ...]) -> dict[str, Any]:
    code = int(info.dtype())
    return {
        "sizes": tuple(int(s) for s in info.sizes()),
        "dtype": SCALAR_TYPES.get(code, f"scalar_type_{code}"),
        "dim_order": dim_order,
        "nbytes": int(info.nbytes()),
    }


def _child_meta(pte_path: str, seconds: dict[str, float],
                verification: str = "internal") -> tuple[dict[str, Any], Any]:
    start = time.perf_counter()
    _C = _import_runtime()
    seconds["import"] = time.perf_counter() - start

    start = time.perf_counter()
    program = _C._load_program(
        pte_path, program_verification=getattr(_C.Verification, VERIFICATIONS[verification])
    )
    seconds["load"] = time.perf_counter() - start

    start = time.perf_counter()
    methods = [program.get_method_name(i) for i in range(program.num_methods())]
    method_meta = program.method_meta("forward")
    plan = read_plan(Path(pte_path).read_bytes())
    if len(plan["inputs"]) < method_meta.num_inputs() or len(plan["outputs"]) != method_meta.num_outputs():
        raise RuntimeError(
            f"the runtime reports {method_meta.num_inputs()} inputs and {method_meta.num_outputs()} "
            f"outputs, the serialized plan {len(plan['inputs'])} and {len(plan['outputs'])}"
        )
    inputs, outputs = [], []
    for where, count, get, indices, into in (
        ("input", method_meta.num_inputs(), method_meta.input_tensor_meta, plan["inputs"], inputs),
        ("output", method_meta.num_outputs(), method_meta.output_tensor_meta, plan["outputs"], outputs),
    ):
        for position in range(count):
            serialized = plan["values"].get(indices[position])
            if serialized is None:
                raise RuntimeError(f"{where} {position} is not a tensor in the serialized plan")
            info = _tensor_info(get(position), serialized["dim_order"])
            if (info["sizes"], info["dtype"]) != (serialized["sizes"], serialized["dtype"]):
                raise RuntimeError(
                    f"{where} {position}: the runtime says {info['dtype']}{list(info['sizes'])}, "
                    f"the serialized plan {serialized['dtype']}{list(serialized['sizes'])}"
                )
            into.append(info)
    known = set(_C._get_operator_names())
    meta = {
        "path": str(pte_path),
        "methods": methods,
        "inputs": inputs,
        "outputs": outputs,
        "input_values": plan["inputs"][: method_meta.num_inputs()],
        "output_values": plan["outputs"],
        "values": {str(k): v for k, v in plan["values"].items()},
        "delegates": plan["delegates"],
        "compile_specs": plan["compile_specs"],
        "operators": plan["operators"],
        "instructions": plan["instructions"],
        "registered_backends": list(_C._get_registered_backend_names()),
        "missing_operators": [op for op in plan["operators"] if op not in known],
    }
    seconds["meta"] = time.perf_counter() - start
    return meta, _C


def _laid_out(tensor, dim_order: tuple[int, ...]):
    """``tensor`` (logical) with its bytes in ``dim_order``."""
    if dim_order == tuple(range(tensor.dim())):
        return tensor.contiguous()
    inverse = [dim_order.index(d) for d in range(len(dim_order))]
    return tensor.permute(*dim_order).contiguous().permute(*inverse)


def _child_run(pte_path: str, input_files: list[str], workdir: Path,
               seconds: dict[str, float], verification: str = "internal") -> list[str]:
    meta, _C = _child_meta(pte_path, seconds, verification)
    import torch

    unsupported = list(dict.fromkeys(
        d for d in meta["delegates"] if d not in meta["registered_backends"]))
    if unsupported:
        raise RuntimeError(
            f"the program has delegates the installed runtime cannot execute: {unsupported} "
            f"(registered backends: {meta['registered_backends']})"
        )
    if meta["missing_operators"]:
        raise RuntimeError(f"the runtime has no kernel for {meta['missing_operators']}")
    if len(input_files) != len(meta["inputs"]):
        raise _InputError(f"forward takes {len(meta['inputs'])} inputs, got {len(input_files)}")
    tensors = []
    for position, (name, spec) in enumerate(zip(input_files, meta["inputs"])):
        array = np.load(name, allow_pickle=False)
        if str(array.dtype) != spec["dtype"] or tuple(array.shape) != tuple(spec["sizes"]):
            raise _InputError(
                f"input {position}: forward takes {spec['dtype']}{list(spec['sizes'])}, "
                f"got {array.dtype}{list(array.shape)}"
            )
        tensors.append(_laid_out(torch.from_numpy(np.ascontiguousarray(array)), spec["dim_order"]))

    start = time.perf_counter()
    module = _C._load_for_executorch(
        pte_path, program_verification=getattr(_C.Verification, VERIFICATIONS[verification])
    )
    seconds["load_module"] = time.perf_counter() - start
    start = time.perf_counter()
    results = module.forward(tensors)
    seconds["run"] = time.perf_counter() - start

    names = []
    for position, value in enumerate(results):
        if not isinstance(value, torch.Tensor):
            raise RuntimeError(f"output {position} is a {type(value).__name__}, not a tensor")
        name = workdir / f"output{position}.npy"
        np.save(name, value.contiguous().numpy(), allow_pickle=False)
        names.append(str(name))
    return names


def _child_execute(pte_path: str, input_files: list[str], workdir: Path,
                   seconds: dict[str, float], artifacts: str | None) -> list[str]:
    """Execute the serialized plan (delegates on their references)."""
    start = time.perf_counter()
    import executorch.exir  # noqa: F401  (before anything stubs it: the payload classes need it)
    from vgf_conformance.oracles.pte.execute import PlanError, execute_pte

    seconds["import"] = time.perf_counter() - start
    inputs = [np.load(name, allow_pickle=False) for name in input_files]
    start = time.perf_counter()
    try:
        outputs = execute_pte(pte_path, inputs, artifacts)
    except PlanError as error:
        raise RuntimeError(str(error)) from None
    except ValueError as error:
        raise _InputError(str(error)) from None
    seconds["execute"] = time.perf_counter() - start
    names = []
    for position, value in enumerate(outputs):
        name = workdir / f"output{position}.npy"
        np.save(name, value, allow_pickle=False)
        names.append(str(name))
    return names


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """One request: ``{"command": "meta"|"run"|"execute", "pte": PATH, "out":
    ANSWER.json, "inputs": [.npy, ...], "verification": ..., "artifacts":
    EXPORT_ROOT}``; the answer (also written to ``out`` when given)."""
    seconds: dict[str, float] = {}
    out = request.get("out")
    workdir = Path(out).parent if out else Path(tempfile.mkdtemp(prefix="pte-run-"))
    command, pte = request["command"], request["pte"]
    verification = request.get("verification", "internal")
    try:
        if command == "meta":
            meta, _ = _child_meta(pte, seconds, verification)
            meta["seconds"] = seconds
            answer: dict[str, Any] = {"meta": meta}
        elif command == "run":
            answer = {"outputs": _child_run(pte, request.get("inputs", []), workdir, seconds,
                                            verification), "seconds": seconds}
        elif command == "execute":
            answer = {"outputs": _child_execute(pte, request.get("inputs", []), workdir, seconds,
                                                request.get("artifacts")), "seconds": seconds}
        else:
            raise _InputError(f"command must be meta, run or execute, got {command!r}")
    except Exception as error:  # reported to the parent, which raises
        answer = {"error": {
            "type": "ValueError" if isinstance(error, _InputError) else type(error).__name__,
            "message": str(error),
            "kind": "input" if isinstance(error, _InputError) else "runtime",
            "traceback": traceback.format_exc(),
        }}
    text = json.dumps(answer, indent=1, default=list)
    if out:
        Path(out).write_text(text)
    else:
        print(text)
    return answer


def serve() -> int:
    """Answer requests from standard input until it closes."""
    answers = process.answer_channel()
    _import_runtime()
    import executorch.exir  # noqa: F401  (once: read_plan then needs no stub of it)

    libc = ctypes.CDLL(None)

    def answered(request: dict) -> dict:
        handle(request)
        libc.fflush(None)  # the runtime's log of this request before its answer
        return {"done": True}

    return process.serve(answered, answers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgf_conformance.oracles.pte",
                                     description=DESCRIPTION)
    parser.add_argument("command", choices=("meta", "run", "execute", "serve"))
    parser.add_argument("pte", nargs="?", help="the program (not for serve)")
    parser.add_argument("--out", help="write the answer (JSON) here; default: print it")
    parser.add_argument("--inputs", nargs="*", default=[],
                        help="run, execute: .npy files, one per input (logical layout)")
    parser.add_argument("--verification", choices=sorted(VERIFICATIONS), default="internal")
    parser.add_argument("--artifacts", help="execute: the export's folder (its delegates/NN_vgf.tosa)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve()
    if args.pte is None:
        parser.error(f"{args.command} needs the program's path")
    answer = handle({"command": args.command, "pte": args.pte, "out": args.out, "inputs": args.inputs,
                     "verification": args.verification, "artifacts": args.artifacts})
    return 1 if "error" in answer else 0
