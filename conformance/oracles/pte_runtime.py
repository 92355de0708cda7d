"""The shipped ``program.pte`` as ExecuTorch's own runtime sees it.

Everything that touches the native runtime (the installed pybindings,
``executorch.extension.pybindings._C``, the module ``portable_lib``
re-exports) runs in a child process with a timeout, so a corrupt program that
crashes the runtime becomes a :class:`PteRuntimeError` naming the signal,
not a dead caller.

* :func:`load_pte_meta`: the ``forward`` method's inputs and outputs (sizes,
  dtype and nbytes from the runtime's ``MethodMeta``; dim order from the
  serialized program, since the pybindings' ``TensorInfo`` has no dim order),
  every tensor value of the execution plan, the delegate backend ids, the
  operator table and the instruction chain.
* :func:`run_cpu_program`: executes ``forward`` of a program the installed
  runtime can run (no delegates, or only delegates of registered backends).
  Inputs and outputs are logical (PyTorch-indexed) arrays; the inputs are laid
  out in memory per the program's dim order first, since the runtime copies
  the bytes it is given without checking their layout.

The child is ``python -m conformance.oracles.pte_runtime meta|run ...``; it writes its
answer to a file (the runtime logs to stdout).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

#: ExecuTorch ScalarType codes (runtime/core/portable_type/scalar_type.h).
SCALAR_TYPES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
    6: "float32", 7: "float64", 11: "bool", 15: "bfloat16",
}
_ITEMSIZE = {
    "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
    "float32": 4, "float64": 8, "bool": 1, "bfloat16": 2,
}
_LAYOUTS = {(0, 1, 2, 3): "NCHW", (0, 2, 3, 1): "NHWC"}
#: InstructionArguments union tags of the schema (exir/_serialize/program.fbs).
_INSTRUCTION_KINDS = {1: "KernelCall", 2: "DelegateCall", 3: "MoveCall",
                      4: "JumpFalseCall", 5: "FreeCall"}
_KERNEL_TYPE_TENSOR = 5
#: executorch::runtime::Error (runtime/core/error.h), for readable messages:
#: the pybindings report e.g. "Failed to load program, error: 0x:23".
RUNTIME_ERRORS = {
    0x01: "Internal", 0x02: "InvalidState", 0x03: "EndOfMethod", 0x04: "AlreadyLoaded",
    0x10: "NotSupported", 0x11: "NotImplemented", 0x12: "InvalidArgument",
    0x13: "InvalidType", 0x14: "OperatorMissing", 0x15: "RegistrationExceedingMaxKernels",
    0x16: "RegistrationAlreadyRegistered", 0x20: "NotFound", 0x21: "MemoryAllocationFailed",
    0x22: "AccessFailed", 0x23: "InvalidProgram", 0x24: "InvalidExternalData",
    0x25: "OutOfResources", 0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed", 0x32: "DelegateInvalidHandle",
}
_REPO_ROOT = Path(__file__).resolve().parents[2]
_LOG_TAIL_LINES = 15
#: Program verification on load: "internal" (InternalConsistency: the
#: flatbuffer is verified; a corrupt program is refused) or "minimal" (the
#: runtime's default for ``_load_program``: a corrupt program can crash it).
VERIFICATIONS = {"internal": "InternalConsistency", "minimal": "Minimal"}


class PteRuntimeError(RuntimeError):
    """The runtime refused the program, crashed on it or timed out.

    ``returncode`` is the child's exit status (negative: killed by that
    signal; None: timed out), ``log`` the tail of its output."""

    def __init__(self, message: str, *, returncode: int | None = None, log: str = "") -> None:
        self.returncode = returncode
        self.log = log
        super().__init__(message + (f"\n--- runtime log tail ---\n{log}" if log else ""))


# ---------------------------------------------------------------------------
# What the parent gets back
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TensorMeta:
    """One tensor: logical ``sizes``, dtype name, ExecuTorch dim order
    ((0, 2, 3, 1) is NHWC: the bytes are laid out channels-last) and size in
    bytes."""

    sizes: tuple[int, ...]
    dtype: str
    dim_order: tuple[int, ...]
    nbytes: int

    @property
    def layout(self) -> str:
        """"NCHW", "NHWC", "contiguous" (other ranks) or "dim_order=...". """
        if len(self.sizes) == 4 and self.dim_order in _LAYOUTS:
            return _LAYOUTS[self.dim_order]
        if self.dim_order == tuple(range(len(self.sizes))):
            return "contiguous"
        return "dim_order=" + ",".join(map(str, self.dim_order))

    def describe(self) -> str:
        return f"{self.dtype}[{'x'.join(map(str, self.sizes))}] {self.layout}"


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One instruction of the chain: its kind (KernelCall, DelegateCall,
    MoveCall, JumpFalseCall, FreeCall), what it calls (operator name or
    backend id; None otherwise), the value indices it takes and, for a call,
    the index of its operator / delegate in the plan's tables."""

    kind: str
    target: str | None
    args: tuple[int, ...]
    index: int | None = None


@dataclasses.dataclass(frozen=True)
class PteMeta:
    path: str
    #: Every method of the program ("forward", and e.g. "input0_scale" from
    #: the IO quant params).
    methods: tuple[str, ...]
    #: ``forward``'s user inputs and outputs, in order.
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]
    #: Their indices in ``values``.
    input_values: tuple[int, ...]
    output_values: tuple[int, ...]
    #: Every tensor value of ``forward``'s execution plan, by value index.
    values: dict[int, TensorMeta]
    #: Backend ids of the plan's delegates, in delegate-table order.
    delegates: tuple[str, ...]
    #: The plan's operator table ("aten::upsample_nearest2d.vec_out", ...).
    operators: tuple[str, ...]
    instructions: tuple[Instruction, ...]
    #: What the installed runtime provides.
    registered_backends: tuple[str, ...]
    #: Operators of the plan that the runtime has no kernel for.
    missing_operators: tuple[str, ...]
    #: Seconds spent in the child: import, load, meta.
    seconds: dict[str, float] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def unsupported_delegates(self) -> tuple[str, ...]:
        """Delegates the installed runtime cannot execute."""
        return tuple(dict.fromkeys(d for d in self.delegates if d not in self.registered_backends))

    @property
    def delegate_calls(self) -> list[tuple[str, tuple[int, ...]]]:
        """(backend id, value indices passed: inputs then outputs) per
        delegate call, in execution order."""
        return [(i.target, i.args) for i in self.instructions if i.kind == "DelegateCall"]

    def grid_sampler_layout_mismatches(self, artifacts_root: str | Path) -> list[str]:
        """Where the program labels a grid-sampler delegate's image, grid or
        output with another dim order than the delegate's payload
        (``delegates/NN_grid_sampler.json``, NN = the delegate's index) says
        the delegate reads or writes. Empty when they agree."""
        delegates = Path(artifacts_root) / "delegates"
        found = []
        for call in self.instructions:
            if call.kind != "DelegateCall" or call.target != "GridSamplerBackend":
                continue
            payload_path = delegates / f"{call.index:02d}_grid_sampler.json"
            payload = json.loads(payload_path.read_text())
            tensors = [a for a in call.args if a in self.values]
            roles = list(payload["inputs"]) + ["output"]
            if len(tensors) != len(roles):
                found.append(f"delegate {call.index}: {len(tensors)} tensor args, payload names {roles}")
                continue
            for value, role in zip(tensors, roles):
                labelled = self.values[value]
                written = tuple(payload[role]["dim_order"])
                if labelled.dim_order != written:
                    found.append(
                        f"delegate {call.index} {role}: the program says value [{value}] "
                        f"{labelled.describe()}, the payload dim_order is {list(written)}"
                    )
        return found

    def to_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["values"] = {str(k): v for k, v in body["values"].items()}
        return body

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PteMeta":
        def tensor(d: dict[str, Any]) -> TensorMeta:
            return TensorMeta(tuple(d["sizes"]), d["dtype"], tuple(d["dim_order"]), int(d["nbytes"]))

        return cls(
            path=data["path"],
            methods=tuple(data["methods"]),
            inputs=tuple(tensor(t) for t in data["inputs"]),
            outputs=tuple(tensor(t) for t in data["outputs"]),
            input_values=tuple(data["input_values"]),
            output_values=tuple(data["output_values"]),
            values={int(k): tensor(v) for k, v in data["values"].items()},
            delegates=tuple(data["delegates"]),
            operators=tuple(data["operators"]),
            instructions=tuple(
                Instruction(i["kind"], i["target"], tuple(i["args"]), i.get("index"))
                for i in data["instructions"]
            ),
            registered_backends=tuple(data["registered_backends"]),
            missing_operators=tuple(data["missing_operators"]),
            seconds=dict(data.get("seconds", {})),
        )


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------
def _tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    rows = [r for r in text.strip().splitlines() if r.strip()]
    if len(rows) > lines:
        rows = [f"... ({len(rows) - lines} lines above)"] + rows[-lines:]
    return "\n".join(rows)


def _name_error_codes(message: str) -> str:
    """Append the runtime's name for an "error: 0x:23"-style code."""
    import re

    def named(match: "re.Match[str]") -> str:
        name = RUNTIME_ERRORS.get(int(match.group(1), 16))
        return f"{match.group(0)} ({name})" if name else match.group(0)

    return re.sub(r"error: 0x:?([0-9a-fA-F]+)", named, message)


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(_REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    # One program at a time, on a machine whose cores are shared.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _run_child(args: Sequence[str], *, timeout: float, what: str) -> subprocess.CompletedProcess:
    """Run ``python <args>`` with a timeout; a timeout or a death by signal
    raises PteRuntimeError naming ``what``."""
    try:
        proc = subprocess.run(
            [sys.executable, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_child_env(),
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode(errors="replace") if error.stdout else ""
        raise PteRuntimeError(
            f"{what}: the runtime child timed out after {timeout:g} s (killed)",
            returncode=None, log=_tail(out),
        ) from None
    if proc.returncode < 0:
        raise PteRuntimeError(
            f"{what}: the runtime child crashed ({_signal_name(proc.returncode)})",
            returncode=proc.returncode, log=_tail(proc.stdout.decode(errors="replace")),
        )
    return proc


def _call(command: str, pte_path: Path, workdir: Path, extra: Sequence[str], *,
          timeout: float, what: str) -> dict[str, Any]:
    answer = workdir / "answer.json"
    proc = _run_child(
        ["-m", "conformance.oracles.pte_runtime", command, str(pte_path), "--out", str(answer), *extra],
        timeout=timeout, what=what,
    )
    log = _tail(proc.stdout.decode(errors="replace"))
    if not answer.exists():
        raise PteRuntimeError(
            f"{what}: the runtime child exited with status {proc.returncode} and no answer",
            returncode=proc.returncode, log=log,
        )
    data = json.loads(answer.read_text())
    error = data.get("error")
    if error:
        message = f"{what}: {error['type']}: {_name_error_codes(error['message'])}"
        if error.get("kind") == "input":
            raise ValueError(message)
        if not error["type"] == "RuntimeError":  # a bug here rather than a refusal
            log = "\n".join(filter(None, [log, _tail(error.get("traceback", ""))]))
        raise PteRuntimeError(message, returncode=proc.returncode, log=log)
    return data


def _check_verification(verification: str) -> None:
    if verification not in VERIFICATIONS:
        raise ValueError(f"verification must be one of {sorted(VERIFICATIONS)}, got {verification!r}")


def load_pte_meta(pte_path: str | Path, timeout: float = 60, *,
                  verification: str = "internal") -> PteMeta:
    """Load ``pte_path`` with the ExecuTorch runtime in a child process and
    describe its ``forward`` method (see :class:`PteMeta`). Raises
    :class:`PteRuntimeError` when the runtime refuses the program, crashes on
    it, or takes longer than ``timeout`` seconds."""
    path = Path(pte_path)
    _check_verification(verification)
    if not path.is_file():
        raise FileNotFoundError(f"no program at {path}")
    with tempfile.TemporaryDirectory(prefix="pte-meta-") as tmp:
        data = _call("meta", path, Path(tmp), ["--verification", verification],
                     timeout=timeout, what=f"loading {path}")
    return PteMeta.from_dict(data["meta"])


def run_cpu_program(
    pte_path: str | Path, inputs: Sequence[np.ndarray], timeout: float = 60, *,
    verification: str = "internal",
) -> list[np.ndarray]:
    """Execute ``forward`` of ``pte_path`` on ``inputs`` in a child process.

    ``inputs`` are logical arrays (indexed as in PyTorch, e.g. NCHW) of the
    program's dtypes and sizes; each is laid out in memory per the program's
    dim order before it is handed to the runtime. Returns the outputs as
    logical, C-contiguous arrays. For programs without delegates, or whose
    delegates' backends the installed runtime registers; anything else raises
    :class:`PteRuntimeError` before executing. Inputs of the wrong count,
    dtype or sizes raise ``ValueError``.
    """
    path = Path(pte_path)
    _check_verification(verification)
    if not path.is_file():
        raise FileNotFoundError(f"no program at {path}")
    with tempfile.TemporaryDirectory(prefix="pte-run-") as tmp:
        workdir = Path(tmp)
        names = []
        for i, array in enumerate(inputs):
            name = workdir / f"input{i}.npy"
            np.save(name, np.asarray(array), allow_pickle=False)
            names.append(str(name))
        data = _call("run", path, workdir,
                     ["--verification", verification, "--inputs", *names],
                     timeout=timeout, what=f"running {path}")
        return [np.load(p, allow_pickle=False) for p in data["outputs"]]


# ---------------------------------------------------------------------------
# Child side
# ---------------------------------------------------------------------------
class _InputError(ValueError):
    """Bad inputs of a run: the parent raises ValueError for them."""


def _generated_flatbuffer_package():
    """The schema's generated flatbuffer accessors
    (``executorch.exir._serialize.generated.executorch_flatbuffer``),
    imported without running ``executorch/exir/__init__.py`` (about 4 s of
    imports the runtime child does not need). Only ever called in the child."""
    import importlib
    import types

    import executorch

    if "executorch.exir" not in sys.modules:
        exir_dir = Path(executorch.__path__[0]) / "exir"
        for name, directory in (("executorch.exir", exir_dir),
                                ("executorch.exir._serialize", exir_dir / "_serialize")):
            stub = types.ModuleType(name)
            stub.__path__ = [str(directory)]
            sys.modules[name] = stub
    package = importlib.import_module("executorch.exir._serialize.generated.executorch_flatbuffer")
    # The generated modules bind nested tables to their modules (``ExecutionPlan``
    # is the module ExecutionPlan.py); rebind those names to the classes, as
    # exir/_serialize/_flatbuffer_program.py does before it reads a program.
    import pkgutil

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, value in list(vars(module).items()):
            if isinstance(value, types.ModuleType) and isinstance(getattr(value, name, None), type):
                setattr(module, name, getattr(value, name))
    return package


def _read_plan(buffer: bytes, method: str = "forward") -> dict[str, Any]:
    """The parts of ``method``'s execution plan the meta needs, read straight
    from the program flatbuffer (segments after it are not needed)."""
    _generated_flatbuffer_package()
    from executorch.exir._serialize.generated.executorch_flatbuffer.DelegateCall import DelegateCall
    from executorch.exir._serialize.generated.executorch_flatbuffer.KernelCall import KernelCall
    from executorch.exir._serialize.generated.executorch_flatbuffer.Program import Program
    from executorch.exir._serialize.generated.executorch_flatbuffer.Tensor import Tensor

    program = Program.GetRootAs(buffer, 0)
    plans = [program.ExecutionPlan(i) for i in range(program.ExecutionPlanLength())]
    named = [p for p in plans if p.Name() is not None and p.Name().decode() == method]
    if not named:
        raise ValueError(f"the program has no method {method!r}")
    plan = named[0]

    values: dict[int, dict[str, Any]] = {}
    for index in range(plan.ValuesLength()):
        evalue = plan.Values(index)
        if evalue.ValType() != _KERNEL_TYPE_TENSOR:
            continue
        table = evalue.Val()
        tensor = Tensor()
        tensor.Init(table.Bytes, table.Pos)
        sizes = tuple(int(tensor.Sizes(j)) for j in range(tensor.SizesLength()))
        dtype = SCALAR_TYPES.get(int(tensor.ScalarType()), f"scalar_type_{tensor.ScalarType()}")
        values[index] = {
            "sizes": sizes,
            "dtype": dtype,
            "dim_order": tuple(int(tensor.DimOrder(j)) for j in range(tensor.DimOrderLength())),
            "nbytes": int(np.prod(sizes, dtype=np.int64)) * _ITEMSIZE.get(dtype, 0),
        }

    def op_name(i: int) -> str:
        op = plan.Operators(i)
        name, overload = op.Name().decode(), (op.Overload() or b"").decode()
        return f"{name}.{overload}" if overload else name

    operators = [op_name(i) for i in range(plan.OperatorsLength())]
    delegates = [plan.Delegates(i).Id().decode() for i in range(plan.DelegatesLength())]
    instructions = []
    for c in range(plan.ChainsLength()):
        chain = plan.Chains(c)
        for k in range(chain.InstructionsLength()):
            ins = chain.Instructions(k)
            kind = _INSTRUCTION_KINDS.get(int(ins.InstrArgsType()), f"kind_{ins.InstrArgsType()}")
            target, args, table_index = None, (), None
            if kind in ("KernelCall", "DelegateCall"):
                table = ins.InstrArgs()
                call = KernelCall() if kind == "KernelCall" else DelegateCall()
                call.Init(table.Bytes, table.Pos)
                args = tuple(int(call.Args(j)) for j in range(call.ArgsLength()))
                table_index = int(call.OpIndex() if kind == "KernelCall" else call.DelegateIndex())
                target = (operators if kind == "KernelCall" else delegates)[table_index]
            instructions.append({"kind": kind, "target": target, "args": args, "index": table_index})
    return {
        "values": values,
        "inputs": tuple(int(plan.Inputs(i)) for i in range(plan.InputsLength())),
        "outputs": tuple(int(plan.Outputs(i)) for i in range(plan.OutputsLength())),
        "operators": operators,
        "delegates": delegates,
        "instructions": instructions,
    }


def _import_runtime():
    import ctypes

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
    plan = _read_plan(Path(pte_path).read_bytes())
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


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m conformance.oracles.pte_runtime",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("meta", "run"))
    parser.add_argument("pte")
    parser.add_argument("--out", help="write the answer (JSON) here; default: print it")
    parser.add_argument("--inputs", nargs="*", default=[], help="run: .npy files, one per input")
    parser.add_argument("--verification", choices=sorted(VERIFICATIONS), default="internal")
    args = parser.parse_args(argv)

    seconds: dict[str, float] = {}
    answer: dict[str, Any]
    workdir = Path(args.out).parent if args.out else Path(tempfile.mkdtemp(prefix="pte-run-"))
    try:
        if args.command == "meta":
            meta, _ = _child_meta(args.pte, seconds, args.verification)
            meta["seconds"] = seconds
            answer = {"meta": meta}
        else:
            answer = {"outputs": _child_run(args.pte, args.inputs, workdir, seconds,
                                            args.verification),
                      "seconds": seconds}
    except Exception as error:  # reported to the parent, which raises
        import traceback

        answer = {"error": {
            "type": "ValueError" if isinstance(error, _InputError) else type(error).__name__,
            "message": str(error),
            "kind": "input" if isinstance(error, _InputError) else "runtime",
            "traceback": traceback.format_exc(),
        }}
    text = json.dumps(answer, indent=1, default=list)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 1 if "error" in answer else 0


if __name__ == "__main__":
    sys.exit(_main())
