"""The shipped ``program.pte`` executed from its serialized execution plan.

The installed pybindings cannot run a program with VGF or grid-sampler
delegates (those backends are not registered, and a backend cannot be
registered from Python). :class:`PlanInterpreter` executes ``forward`` the
way the runtime does, from what the file holds and nothing else:

* values: every tensor is a view of its planned memory (``allocation_info``:
  memory id and offset in the plan's arenas) or of its constant data, in the
  dim order the program declares for it; inputs are written there, outputs
  read from there. Overlapping lifetimes, a wrong dim order or a reordered
  chain change the result, as they would on a device;
* ``KernelCall``: the operator by name (``torch.ops.<ns>.<name>.<overload>``,
  the out variants the program names; ``quantized_decomposed``'s come from
  ExecuTorch's AOT library ``executorch.kernels.quantized``) on the tensors
  seen through their declared dim order; the results are written back into
  their memory;
* ``DelegateCall``: the delegate's payload (inline data of the file) on the
  reference of its backend id (``execute`` of
  :data:`vgf_conformance.oracles.delegates.DELEGATES`): a grid-sampler payload by
  :mod:`vgf_conformance.oracles.grid_sampler_reference`; a VGF payload by the
  TOSA reference model, on the TOSA flatbuffer the model converter made that
  VGF from (found by the payload's exact bytes among the export's
  ``delegates/NN_vgf.vgf``: a VGF cannot be read back as TOSA). A delegate
  reads and writes raw bytes: the shapes and dtypes its payload declares.

Runs in the runtime child (:mod:`vgf_conformance.oracles.pte.child`, command
``execute``); the parent side is :func:`vgf_conformance.oracles.pte.execute_program`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from vgf_conformance.oracles.pte.reader import SCALAR_TYPES
from vgf_conformance.oracles.delegates import DELEGATES, DelegateReference, PlanError
from vgf_export.names import DELEGATES_DIR

@dataclasses.dataclass
class TensorValue:
    """A tensor of the plan: its bytes (``flat``, a view of its memory) and
    what the program declares about it."""

    index: int
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]
    flat: np.ndarray  # 1-D, the tensor's dtype, laid out in dim_order

    @property
    def dtype(self) -> np.dtype:
        return self.flat.dtype

    def describe(self) -> str:
        return f"[{self.index}] {self.dtype}[{'x'.join(map(str, self.sizes))}] dim_order={list(self.dim_order)}"

    def logical(self) -> np.ndarray:
        """The tensor indexed as in PyTorch (a copy)."""
        physical = self.flat.reshape([self.sizes[d] for d in self.dim_order])
        return np.ascontiguousarray(np.transpose(physical, np.argsort(self.dim_order)))

    def store(self, logical: np.ndarray, what: str) -> None:
        """Write a logically indexed array into the tensor's memory."""
        logical = np.asarray(logical)
        if tuple(logical.shape) != self.sizes or logical.dtype != self.dtype:
            raise PlanError(f"{what}: got {logical.dtype}{list(logical.shape)} for {self.describe()}")
        self.flat[...] = np.transpose(logical, self.dim_order).ravel()


def _numpy_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ExecuTorch ScalarType code."""
    name = SCALAR_TYPES.get(code)
    if name is None or name == "bfloat16":
        raise PlanError(f"scalar type {code} ({name}) is not supported here")
    return np.dtype(name)


def _torch_dtype(code: int):
    """The torch dtype of an ExecuTorch ScalarType code (a ``ScalarType`` argument)."""
    import torch

    return getattr(torch, SCALAR_TYPES[code])


class PlanInterpreter:
    """``forward`` of a deserialized program (``PTEFile`` of
    ``executorch.exir._serialize._program.deserialize_pte_binary``)."""

    def __init__(self, pte_file, delegates: dict[str, DelegateReference], context: dict) -> None:
        self.program = pte_file.program
        plans = [p for p in self.program.execution_plan if p.name == "forward"]
        if not plans:
            raise PlanError("the program has no method 'forward'")
        self.plan = plans[0]
        self.delegates = delegates
        self.context = context  # what delegate references need (e.g. the export's VGF -> TOSA map)
        self.arenas = [np.zeros(size, np.uint8) for size in self.plan.non_const_buffer_sizes]
        self.values = [self._value(i, v.val) for i, v in enumerate(self.plan.values)]

    # -- values ------------------------------------------------------------
    def _value(self, index: int, val):
        kind = type(val).__name__
        if kind == "Tensor":
            return self._tensor(index, val)
        if kind in ("Int", "Bool", "Double", "String"):
            return getattr(val, {"Int": "int_val", "Bool": "bool_val", "Double": "double_val",
                                 "String": "string_val"}[kind])
        if kind in ("IntList", "TensorList", "OptionalTensorList"):
            return ("list", kind, list(val.items))  # items are value indices, resolved at a call
        if kind in ("DoubleList", "BoolList"):
            return list(val.items)
        if kind == "Null":
            return None
        raise PlanError(f"value {index}: {kind} values are not supported here")

    def _tensor(self, index: int, t) -> TensorValue:
        dtype = _numpy_dtype(int(t.scalar_type))
        sizes, dim_order = tuple(t.sizes), tuple(t.dim_order)
        count = int(np.prod(sizes, dtype=np.int64))
        nbytes = count * dtype.itemsize
        where = t.allocation_info
        if where is not None:  # planned memory: a view of its arena
            offset = where.memory_offset_low + (where.memory_offset_high << 32)
            arena = self.arenas[where.memory_id] if where.memory_id < len(self.arenas) else None
            if arena is None or offset + nbytes > arena.size:
                raise PlanError(f"value {index}: {nbytes} bytes at memory {where.memory_id} offset "
                                f"{offset} lie outside the planned buffers {self.plan.non_const_buffer_sizes}")
            flat = arena[offset: offset + nbytes].view(dtype)
        elif t.data_buffer_idx > 0:  # constant data
            storage = bytes(self.program.constant_buffer[t.data_buffer_idx].storage)
            flat = np.frombuffer(storage, dtype, count).copy()
        else:
            flat = np.zeros(count, dtype)
        return TensorValue(index, sizes, dim_order, flat)

    def tensor(self, index: int, what: str) -> TensorValue:
        value = self.values[index]
        if not isinstance(value, TensorValue):
            raise PlanError(f"{what}: value {index} is not a tensor")
        return value

    def _argument(self, index: int, arg_type: str):
        """Value ``index`` as an operator argument (tensors logical, in torch)."""
        import torch

        value = self.values[index]
        if isinstance(value, TensorValue):
            return torch.from_numpy(value.logical())
        if isinstance(value, tuple) and value[0] == "list":
            _, kind, items = value
            if kind == "IntList":
                return [self.values[i] for i in items]
            return [None if i < 0 else self._argument(i, "Tensor") for i in items]
        if "ScalarType" in arg_type and isinstance(value, int):
            return _torch_dtype(value)
        return value

    # -- instructions --------------------------------------------------------
    def _kernel(self, position: int, call) -> None:
        import torch

        op = self.plan.operators[call.op_index]
        name = f"{op.name}.{op.overload}" if op.overload else op.name
        namespace, _, base = op.name.partition("::")
        try:
            kernel = getattr(getattr(getattr(torch.ops, namespace), base), op.overload or "default")
        except (AttributeError, RuntimeError):
            raise PlanError(f"instruction {position}: no torch operator for {name}") from None
        schema = kernel._schema.arguments
        if len(call.args) < len(schema):
            raise PlanError(f"instruction {position} ({name}): {len(call.args)} arguments, "
                            f"the schema takes {len(schema)}")
        positional, keywords, outs = [], {}, []
        for argument, index in zip(schema, call.args):
            value = self._argument(index, str(argument.type))
            if argument.alias_info is not None and argument.alias_info.is_write:
                outs.append((index, value))
            if argument.kwarg_only:
                keywords[argument.name] = value
            else:
                positional.append(value)
        kernel(*positional, **keywords)
        for index, result in outs:
            self.tensor(index, f"instruction {position} ({name})").store(
                result.numpy(), f"instruction {position} ({name}) output")

    def _delegate(self, position: int, call) -> None:
        delegate = self.plan.delegates[call.delegate_index]
        reference = self.delegates.get(delegate.id)
        if reference is None:
            raise PlanError(f"instruction {position}: no reference for backend {delegate.id} "
                            f"(known: {sorted(self.delegates)})")
        if delegate.processed.location.name != "INLINE":
            raise PlanError(f"instruction {position}: delegate {call.delegate_index}'s payload is "
                            f"not inline ({delegate.processed.location.name})")
        payload = bytes(self.program.backend_delegate_data[delegate.processed.index].data)
        what = f"instruction {position} (delegate {call.delegate_index}, {delegate.id})"
        reference.execute(self, what, payload, [self.tensor(i, what) for i in call.args])

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Execute ``forward`` on logical ``inputs``; the outputs, logical."""
        if len(inputs) != len(self.plan.inputs):
            raise ValueError(f"forward takes {len(self.plan.inputs)} inputs, got {len(inputs)}")
        for position, (index, array) in enumerate(zip(self.plan.inputs, inputs)):
            self.tensor(index, f"input {position}").store(np.asarray(array), f"input {position}")
        instructions = [i for chain in self.plan.chains for i in chain.instructions]
        position = 0
        while position < len(instructions):
            args = instructions[position].instr_args
            kind = type(args).__name__
            if kind == "KernelCall":
                self._kernel(position, args)
            elif kind == "DelegateCall":
                self._delegate(position, args)
            elif kind == "MoveCall":
                self.values[args.move_to] = self.values[args.move_from]
            elif kind == "JumpFalseCall":
                if not self.values[args.cond_value_index]:
                    position = args.destination_instruction
                    continue
            elif kind != "FreeCall":
                raise PlanError(f"instruction {position}: {kind} is not supported here")
            position += 1
        return [self.tensor(i, f"output {k}").logical() for k, i in enumerate(self.plan.outputs)]


def vgf_to_tosa(artifacts_root: str | Path) -> dict[str, bytes]:
    """The export's TOSA flatbuffers by the sha256 of the VGF converted from
    each (``delegates/NN_vgf.vgf`` beside ``NN_vgf.tosa``)."""
    found = {}
    for vgf in sorted((Path(artifacts_root) / DELEGATES_DIR).glob("*.vgf")):
        tosa = vgf.with_suffix(".tosa")
        if tosa.exists():
            found[hashlib.sha256(vgf.read_bytes()).hexdigest()] = tosa.read_bytes()
    return found


def output_differences(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> list[str]:
    """Where the executed program's outputs are not equal to ``want`` (the
    lowered program's): each must have the same dtype and shape and the same
    values, bit for bit (integer outputs; float outputs too: the same
    references compute them)."""
    if len(got) != len(want):
        return [f"{len(got)} outputs, the lowered program has {len(want)}"]
    found = []
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype or g.shape != w.shape:
            found.append(f"output {i}: {g.dtype}{list(g.shape)}, the lowered program's is {w.dtype}{list(w.shape)}")
            continue
        differ = g != w if g.dtype.kind != "f" else ~((g == w) | (np.isnan(g) & np.isnan(w)))
        if differ.any():
            first = tuple(int(k) for k in np.argwhere(differ)[0])
            worst = np.abs(g.astype(np.float64) - w.astype(np.float64)).max()
            found.append(f"output {i} ({g.dtype}{list(g.shape)}): {int(differ.sum())} of {g.size} elements "
                         f"differ (max {worst:g}); first at {list(first)}: {g[first]!r} instead of {w[first]!r}")
    return found


def execute_pte(pte_path: str | Path, inputs: Sequence[np.ndarray],
                artifacts_root: str | Path | None = None) -> list[np.ndarray]:
    """Execute ``forward`` of the program at ``pte_path`` on logical ``inputs``
    (in this process: the child calls it)."""
    import executorch.kernels.quantized  # noqa: F401  (quantized_decomposed::*.out, ExecuTorch's AOT kernels)
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (the quantized_decomposed op schemas)
    from executorch.exir._serialize._program import deserialize_pte_binary

    pte_file = deserialize_pte_binary(Path(pte_path).read_bytes())
    from vgf_conformance.oracles.tosa_reference import RUNS_DIR

    context = {"vgf_to_tosa": vgf_to_tosa(artifacts_root) if artifacts_root else {},
               "tosa_runs": Path(artifacts_root) / RUNS_DIR if artifacts_root else None}
    return PlanInterpreter(pte_file, DELEGATES, context).run(inputs)
