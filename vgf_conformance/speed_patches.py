"""The suite's speed patches of torch.export's per-export overhead: opt-in.

``vgf_export`` does what the reference export script does and nothing else to
torch; the suite, which exports hundreds of models in a process, calls
:func:`enable` before it exports (the case runner, the localizer, the native
flow, the benchmark), which registers these in :mod:`vgf_export.patches` like
every other patch, to be applied by the next export.

Each changes how long an export takes, never what it computes; each says why
its result is the same, and tests/test_speed_patches.py checks it against
upstream. They are gated on the torch version whose code they were checked
against (``torch_applies_to``); a patch that finds other code raises
:class:`PatchNotApplicable` and stays off.
"""

from __future__ import annotations

import contextvars
import types
from typing import Callable

from vgf_export.patches import Patch, PatchNotApplicable, register, registered_patches

#: The speed patches, registered by :func:`enable`.
_SPEED: list[Patch] = []


def enable() -> list[str]:
    """Register the speed patches (idempotent); the next export applies those
    its torch and ExecuTorch versions allow. Returns their names."""
    registered = {p.name for p in registered_patches()}
    for patch in _SPEED:
        if patch.name not in registered:
            register(patch)
    return [p.name for p in _SPEED]


# ---------------------------------------------------------------------------
# Speed: torch.export work repeated on every export that need not be. These
# change how long an export takes, never what it computes; each says why its
# result is the same (tests/test_speed_patches.py checks it against upstream).
# ---------------------------------------------------------------------------
#: Inside a call of torch's _collect_all_valid_cia_ops: [done] once the C++
#: CompositeImplicitAutograd ops have been materialized in that call.
_CIA_MATERIALIZED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "cia_materialized", default=None
)


def _apply_cia_materialize_once() -> Callable[[], None]:
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program
    from torch._export import utils as export_utils

    real_collect = export_utils._collect_all_valid_cia_ops
    real_materialize = export_utils._materialize_cpp_cia_ops

    def materialize() -> None:
        state = _CIA_MATERIALIZED.get()
        if state is None:  # called on its own: as upstream
            real_materialize()
        elif not state[0]:
            real_materialize()
            state[0] = True

    def collect():
        token = _CIA_MATERIALIZED.set([False])
        try:
            return real_collect()
        finally:
            _CIA_MATERIALIZED.reset(token)

    collect.__wrapped__ = real_collect
    collect.__doc__ = real_collect.__doc__
    # exported_program and decomp_utils bound the function by name at import.
    holders = [m for m in (export_utils, exported_program, decomp_utils)
               if getattr(m, "_collect_all_valid_cia_ops", None) is real_collect]
    for module in holders:
        module._collect_all_valid_cia_ops = collect
    export_utils._materialize_cpp_cia_ops = materialize

    def undo() -> None:
        for module in holders:
            module._collect_all_valid_cia_ops = real_collect
        export_utils._materialize_cpp_cia_ops = real_materialize

    return undo


_SPEED.append(
    Patch(
        name="cia-ops-materialize-once",
        fixes=(
            "Speed, same result. torch.export's _collect_all_valid_cia_ops (5 calls an export: "
            "3 run_decompositions, 2 decomposition tables) walks every op namespace (43 here) "
            "and, for each one, materializes every C++ CompositeImplicitAutograd op (~840) into "
            "torch.ops: a dispatcher query and ~840 getattr chains, 43 identical times a call "
            "(a call: 48 ms upstream, 6 ms patched). The patch materializes once a call, at the "
            "first namespace as upstream does. Why the result is the same: materializing only "
            "makes torch.ops list what the C++ dispatcher already has (idempotent getattr), and "
            "the rest of the walk registers nothing, so upstream's 2nd to 43rd materializations "
            "of a call find nothing new. Every call still materializes and walks afresh: nothing "
            "is cached across calls, so ops registered later in the process (executorch "
            "registers some on first use) are still found. torch itself refuses a cross-call "
            "cache for that reason."
        ),
        upstream="none filed: torch/_export/utils.py _collect_all_valid_cia_ops_for_namespace",
        applies_to=">=1.4",
        torch_applies_to="==2.13.0",
        apply=_apply_cia_materialize_once,
    )
)


def _code_objects(code: types.CodeType):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _code_objects(const)


def _without_runtime_annotations(function: types.FunctionType) -> types.FunctionType:
    """``function`` as its module would define it under ``from __future__
    import annotations`` (PEP 563): its code object is taken from its module's
    source compiled with that flag, so the annotations of functions it defines
    are no longer built on every call; nothing else differs. Refuses (raises)
    unless that source, compiled as it is, gives exactly the loaded code."""
    import __future__
    import inspect

    filename = inspect.getsourcefile(function)
    if filename is None:
        raise PatchNotApplicable(f"no source for {function.__qualname__}")
    try:
        with open(filename, encoding="utf-8") as source_file:
            source = source_file.read()
    except OSError as error:
        raise PatchNotApplicable(f"cannot read the source of {function.__qualname__}: {error}") from None
    loaded = function.__code__

    def same_function(code: types.CodeType) -> bool:
        return (code.co_qualname, code.co_firstlineno) == (loaded.co_qualname, loaded.co_firstlineno)

    def find(flags: int) -> types.CodeType:
        module_code = compile(source, filename, "exec", flags=flags, dont_inherit=True)
        found = [c for c in _code_objects(module_code) if same_function(c)]
        if len(found) != 1:
            raise PatchNotApplicable(f"{function.__qualname__} not found once in {filename}")
        return found[0]

    if find(0) != loaded:
        raise PatchNotApplicable(f"{filename} does not compile to the loaded {function.__qualname__}")
    code = find(__future__.annotations.compiler_flag)
    rebuilt = types.FunctionType(code, function.__globals__, function.__name__,
                                 function.__defaults__, function.__closure__)
    rebuilt.__qualname__ = function.__qualname__
    rebuilt.__module__ = function.__module__
    rebuilt.__doc__ = function.__doc__
    rebuilt.__kwdefaults__ = function.__kwdefaults__
    rebuilt.__annotations__ = dict(function.__annotations__)
    rebuilt.__dict__.update(function.__dict__)
    return rebuilt


def _apply_py_impl_lazy_annotations() -> Callable[[], None]:
    from torch._ops import OperatorBase

    real = OperatorBase.__dict__["py_impl"]
    OperatorBase.py_impl = _without_runtime_annotations(real)

    def undo() -> None:
        OperatorBase.py_impl = real

    return undo


_SPEED.append(
    Patch(
        name="py-impl-lazy-annotations",
        fixes=(
            "Speed, same result. torch._ops.OperatorBase.py_impl defines its inner decorator "
            "with `Callable[_P, _T]` annotations, which Python builds on every call (two "
            "collections.abc generic aliases, not cached). run_decompositions overrides the "
            "kernels of every preservable composite op (~560) on ~11 dispatch keys, twice a "
            "call: ~36,000 py_impl calls and ~73,000 aliases an export (one override: 67 ms "
            "upstream, 18 ms patched). The patch takes py_impl's code from torch/_ops.py "
            "compiled with postponed annotations (PEP 563), after checking that the file "
            "compiled as it is gives exactly the loaded code: the inner function's bytecode is "
            "identical and py_impl runs the same statements; only the throwaway inner "
            "function's annotations stay strings."
        ),
        upstream="none filed: torch/_ops.py OperatorBase.py_impl",
        applies_to=">=1.4",
        torch_applies_to="==2.13.0",
        apply=_apply_py_impl_lazy_annotations,
    )
)


def _apply_node_source_deepcopy() -> Callable[[], None]:
    import copy

    from torch.fx.traceback import NodeSource, NodeSourceAction

    node_info = NodeSource.NodeInfo
    for cls in (NodeSource, node_info):
        custom = [name for name in ("__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__",
                                    "__setstate__", "__slots__", "__copy__")
                  if name in cls.__dict__]
        if custom:  # deepcopy would not take the plain-object path this copies
            raise PatchNotApplicable(f"{cls.__qualname__} defines {custom}; patch not checked for it")

    atomic = frozenset({str, int, float, bool, type(None)})
    missing: list = []

    def deep(value, memo):
        # What copy.deepcopy does for these types, without its generic machinery
        # (copier lookup, __reduce_ex__, deep copy of the state dict).
        cls = type(value)
        if cls in atomic or cls is NodeSourceAction:  # deepcopy returns these as they are
            return value
        found = memo.get(id(value), missing)
        if found is not missing:  # shared within the copied structure: shared in the copy
            return found
        if cls is list:
            new = []
            memo[id(value)] = new
            copy._keep_alive(value, memo)
            for item in value:
                new.append(deep(item, memo))
            return new
        if cls is NodeSource or cls is node_info:
            new = cls.__new__(cls)
            memo[id(value)] = new
            copy._keep_alive(value, memo)
            new.__dict__.update({k: deep(v, memo) for k, v in value.__dict__.items()})
            return new
        return copy.deepcopy(value, memo)

    def __deepcopy__(self, memo):
        # copy.deepcopy, our caller, memoizes the result and keeps self alive.
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        new.__dict__.update({k: deep(v, memo) for k, v in self.__dict__.items()})
        return new

    NodeSource.__deepcopy__ = __deepcopy__

    def undo() -> None:
        del NodeSource.__deepcopy__

    return undo


_SPEED.append(
    Patch(
        name="node-source-deepcopy",
        fixes=(
            "Speed, same result. torch.fx keeps each node's provenance in meta['from_node'], a "
            "tree of NodeSource objects that grows with every pass, and deep-copies it each time "
            "a pass re-creates a node (fx.traceback.set_current_meta: ~540 copies of ~130 objects "
            "an export; 87 ms an export upstream, 21 ms patched). The patch gives NodeSource a "
            "__deepcopy__ that builds "
            "the same object graph as copy.deepcopy's generic path (new NodeSource and NodeInfo "
            "objects with the same attributes in the same order, new lists, strings, numbers and "
            "enum members kept, objects shared within the copied structure shared in the copy, "
            "anything else handed to copy.deepcopy) without __reduce_ex__ and the state-dict copy."
        ),
        upstream="none filed: torch/fx/traceback.py NodeSource.__init__ "
        "(copy.deepcopy of from_node)",
        applies_to=">=1.4",
        torch_applies_to="==2.13.0",
        apply=_apply_node_source_deepcopy,
    )
)
