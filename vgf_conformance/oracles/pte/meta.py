"""What the parent gets back about a program: :class:`PteMeta` (the
``forward`` method's IO, every tensor value of its plan, the delegates, the
operator table and the instruction chain), made of :class:`TensorMeta` and
:class:`Instruction`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from vgf_export.names import DELEGATES_DIR, GRID_SAMPLER_BACKEND, delegate_file_name

_LAYOUTS = {(0, 1, 2, 3): "NCHW", (0, 2, 3, 1): "NHWC"}


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
    #: Each delegate's compile spec (key -> value), in delegate-table order: a
    #: VGF delegate's ``tosa_spec`` is the TOSA version and profile it was
    #: lowered for (the TOSA flatbuffer itself records a version, no profile).
    compile_specs: tuple[dict[str, str], ...] = ()

    @property
    def tosa_specs(self) -> tuple[str, ...]:
        """The ``tosa_spec`` of each delegate that has one (e.g.
        "TOSA-1.0+INT+FP+int16"), in delegate-table order."""
        return tuple(spec["tosa_spec"] for spec in self.compile_specs if "tosa_spec" in spec)

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
        delegates = Path(artifacts_root) / DELEGATES_DIR
        found = []
        for call in self.instructions:
            if call.kind != "DelegateCall" or call.target != GRID_SAMPLER_BACKEND:
                continue
            payload_path = delegates / delegate_file_name(call.index, GRID_SAMPLER_BACKEND, "json")
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
            compile_specs=tuple(dict(d) for d in data.get("compile_specs", ())),
        )
