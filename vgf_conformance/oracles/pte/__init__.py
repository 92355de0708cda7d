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
* :func:`execute_program`: executes ``forward`` from the serialized plan
  (values, instruction chain, delegate payloads), with the TOSA reference
  model and the grid-sampler reference standing in for the delegates: what is
  checked is the shipped file, not the edge graph.
* :func:`run_cpu_program`: executes ``forward`` of a program the installed
  runtime can run (no delegates, or only delegates of registered backends).
  Inputs and outputs are logical (PyTorch-indexed) arrays; the inputs are laid
  out in memory per the program's dim order first, since the runtime copies
  the bytes it is given without checking their layout.

One module per idea:

| module | idea |
|---|---|
| ``runtime.py`` | the parent side: the long-lived child process (:class:`RuntimeChild`, one per process), its timeouts and errors (:class:`PteRuntimeError`), :func:`load_pte_meta`, :func:`run_cpu_program`, :func:`execute_program` |
| ``execute.py`` | the serialized plan executed (:class:`~vgf_conformance.oracles.pte.execute.PlanInterpreter`; each delegate on its backend's reference in :mod:`vgf_conformance.oracles.delegates`) |
| ``meta.py`` | what the parent gets back: :class:`PteMeta`, :class:`TensorMeta`, :class:`Instruction` |
| ``child.py`` | the child: the runtime calls, its answer as JSON (``python -m vgf_conformance.oracles.pte meta|run|execute ...`` or ``serve``, ``__main__.py``) |
| ``reader.py`` | the program flatbuffer read straight (dim orders, the plan's tables and instructions) |
"""

from vgf_conformance.oracles.pte.meta import Instruction, PteMeta, TensorMeta
from vgf_conformance.oracles.pte.reader import SCALAR_TYPES
from vgf_conformance.oracles.pte.runtime import (
    RUNTIME_ERRORS,
    VERIFICATIONS,
    PteRuntimeError,
    RuntimeChild,
    execute_program,
    load_pte_meta,
    run_cpu_program,
)

__all__ = [
    "RUNTIME_ERRORS",
    "SCALAR_TYPES",
    "VERIFICATIONS",
    "Instruction",
    "PteMeta",
    "PteRuntimeError",
    "RuntimeChild",
    "TensorMeta",
    "execute_program",
    "load_pte_meta",
    "run_cpu_program",
]
