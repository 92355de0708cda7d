"""The oracles: what the lowered program's outputs are compared with.

Each :class:`Oracle` is one entry of :data:`ORACLES`. Its name is the
comparison's key everywhere: in the goldens' and the report's ``numerics``,
in a tolerance's bounds, in ``Expectation.checks``, and in the name of its
test (``test_numerics_<name>``, generated in ``vgf_conformance/test_cases.py``).
Its ``default`` bound holds for op families that do not state one. Adding an
oracle is one entry here.

* ``vs_fake_quant``: the PT2E fake-quantized program (the converted module in
  torch). Both quantize the same way; TOSA's RESCALE and torch's quantize may
  round a value differently: 1 LSB per requantizing step, and a bound on the
  mean signed error (bias) that catches a systematic shift.
* ``vs_float_dq``: the float model on the *dequantized* inputs (what the
  quantized program really sees: the quantized grid, the clipped image).
  What is left is internal requantization and the output's rounding.
* ``vs_float``: the float model on the raw inputs: input quantization included.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Callable

from vgf_conformance.oracles.compare import Bound

if TYPE_CHECKING:  # annotations only: torch is imported where tensors are computed on
    import torch

# torch (and vgf_export, which needs it) are imported where references are
# computed: the report, on the xdist controller, reads ORACLES without them.


@dataclasses.dataclass
class Subject:
    """What an oracle's reference is computed from: the eager model, the
    case's inputs and the converted PT2E module (None with PT2E off). The
    programs' outputs are computed once, whichever oracles ask."""

    model: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    quantized_module: torch.nn.Module | None

    @functools.cached_property
    def float_outputs(self) -> list[torch.Tensor]:
        return as_list(self.model(*self.inputs))

    @functools.cached_property
    def fake_quant_outputs(self) -> list[torch.Tensor]:
        if self.quantized_module is None:  # PT2E off: the float model stands in
            return self.float_outputs
        return as_list(self.quantized_module(*self.inputs))


@dataclasses.dataclass(frozen=True)
class Oracle:
    name: str
    #: What the lowered program is compared with, for failure messages.
    what: str
    #: The reference outputs (float tensors, logical layout).
    reference: Callable[[Subject], list[torch.Tensor]]
    #: The bound for families that do not state one.
    default: Bound
    #: Whether this comparison also fails on output codes outside their
    #: quantization range (the fake-quantized program cannot produce them).
    checks_code_range: bool = False

    @property
    def test_name(self) -> str:
        return f"test_numerics_{self.name}"


def as_list(outputs) -> list[torch.Tensor]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def _first_quantize(node, depth: int = 3):
    """The quantize op that first quantizes ``node``'s value (through a few
    single-user layout ops such as the RGB pad), or None."""
    from vgf_export.qdq import is_q_op

    for _ in range(depth):
        users = list(node.users)
        if len(users) != 1:
            return None
        node = users[0]
        if is_q_op(node):
            return node
    return None


def dequantized_inputs(inputs, quantized_module) -> list[torch.Tensor]:
    """Each input as the converted program sees it: quantized with the
    parameters of its first quantize op, dequantized; inputs that are never
    quantized (PT2E off, a float path) as they are."""
    import torch

    if quantized_module is None:
        return list(inputs)
    placeholders = [n for n in quantized_module.graph.nodes if n.op == "placeholder"]
    out = []
    for x, node in zip(inputs, placeholders):
        q = _first_quantize(node)
        if q is None:
            out.append(x)
            continue
        # The converted program's own quantize op and its inverse, so that
        # ties round exactly as the program rounds them.
        levels = q.target(x, *q.args[1:])
        out.append(torch.ops.quantized_decomposed.dequantize_per_tensor(levels, *q.args[1:]))
    return out


def float_model(subject: Subject) -> list[torch.Tensor]:
    return subject.float_outputs


def fake_quant_program(subject: Subject) -> list[torch.Tensor]:
    return subject.fake_quant_outputs


def _float_dq(subject: Subject) -> list[torch.Tensor]:
    return as_list(subject.model(*dequantized_inputs(subject.inputs, subject.quantized_module)))


#: Each oracle's default bound decides the outputs of families that do not
#: restate it; each is at most 1.5x the worst it decides (python -m
#: vgf_conformance.harness.measurements.slack): vs_fake_quant 1 LSB (one rounding may differ,
#: measured 1), bias 0.3 (0.215); vs_float_dq 0.75 LSB (0.5: the output's own
#: rounding; the 0.85 once measured was an int16 output of an int8 program,
#: bounded by the int8-internal trait's own measurement now), bias 0.36 (0.25);
#: vs_float 2 LSB (1.75), bias 0.3 (0.206).
ORACLES: dict[str, Oracle] = {o.name: o for o in (
    Oracle("vs_fake_quant", "the PT2E fake-quantized program", fake_quant_program, Bound(1.0, bias_lsb=0.3),
           checks_code_range=True),
    Oracle("vs_float_dq", "the float model on the dequantized inputs", _float_dq, Bound(0.75, bias_lsb=0.36)),
    Oracle("vs_float", "the float model", float_model, Bound(2.0, bias_lsb=0.3)),
)}
