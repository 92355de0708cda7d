"""The program flatbuffer of a ``.pte``, read straight: the parts of a
method's execution plan the meta needs (tensor values with their dim order,
IO value indices, the operator and delegate tables with each delegate's
compile spec, the instruction chain).

The pybindings' ``TensorInfo`` has no dim order, hence this reader. It runs in
the runtime child (:mod:`vgf_conformance.oracles.pte.child`) and imports the
schema's generated accessors without the rest of ``executorch.exir``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from pathlib import Path
from typing import Any

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
#: InstructionArguments union tags of the schema (exir/_serialize/program.fbs).
_INSTRUCTION_KINDS = {1: "KernelCall", 2: "DelegateCall", 3: "MoveCall",
                      4: "JumpFalseCall", 5: "FreeCall"}
_KERNEL_TYPE_TENSOR = 5


def _generated_flatbuffer_package():
    """The schema's generated flatbuffer accessors
    (``executorch.exir._serialize.generated.executorch_flatbuffer``),
    imported without running ``executorch/exir/__init__.py`` (about 4 s of
    imports the runtime child does not need). Only ever called in the child."""
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
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, value in list(vars(module).items()):
            if isinstance(value, types.ModuleType) and isinstance(getattr(value, name, None), type):
                setattr(module, name, getattr(value, name))
    return package


def read_plan(buffer: bytes, method: str = "forward") -> dict[str, Any]:
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
    compile_specs = []  # per delegate: its compile spec (key -> value, text where it is)
    for i in range(plan.DelegatesLength()):
        delegate = plan.Delegates(i)
        specs = {}
        for k in range(delegate.CompileSpecsLength()):
            spec = delegate.CompileSpecs(k)
            value = bytes(spec.ValueAsNumpy()) if spec.ValueLength() else b""
            specs[spec.Key().decode()] = value.decode(errors="replace")
        compile_specs.append(specs)
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
        "compile_specs": compile_specs,
        "instructions": instructions,
    }
