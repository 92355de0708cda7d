"""Named patches of the Arm backend, each applied only where it is needed.

Every :class:`Patch` states what it fixes, the upstream issue, and the
ExecuTorch versions it applies to (a PEP 440 specifier); a patch of torch
itself also names the torch versions it was checked against. The registry is
applied by :func:`apply_arm_backend_monkey_patch`: idempotent, and a patch
whose version range excludes the installed ExecuTorch (or torch) is not
applied.

Two kinds: fixes of the backend's behaviour (the converter timeout, the
bilinear scale factor), and speed patches of torch.export's per-export
overhead, which change how long an export takes and never what it computes
("Speed, same result." in their ``fixes``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import types
from importlib.metadata import version as _dist_version
from typing import Callable

from packaging.specifiers import SpecifierSet
from packaging.version import Version


@dataclasses.dataclass(frozen=True)
class Patch:
    name: str
    fixes: str
    upstream: str
    applies_to: str  # PEP 440 specifier of executorch versions
    apply: Callable[[], Callable[[], None]]  # applies; returns its undo
    #: PEP 440 specifier of torch versions ("" = any): for patches of torch
    #: itself, the versions whose code the patch was checked against.
    torch_applies_to: str = ""

    def is_needed(self, executorch_version: str, torch_version: str | None = None) -> bool:
        if Version(executorch_version) not in SpecifierSet(self.applies_to):
            return False
        if not self.torch_applies_to:
            return True
        torch_version = torch_version or installed_torch_version()
        # "2.13.0+cpu" is 2.13.0 (a local version label is not a different release).
        return Version(Version(torch_version).public) in SpecifierSet(self.torch_applies_to)


_REGISTRY: dict[str, Patch] = {}
_APPLIED: dict[str, Callable[[], None]] = {}
_DISABLED: set[str] = set()
#: Patches whose apply() found the code it patches not as checked: name -> why.
_NOT_APPLICABLE: dict[str, str] = {}


class PatchNotApplicable(RuntimeError):
    """Raised by a patch's apply() (before it changes anything) when the code
    it would patch is not the code it was checked against. The patch is left
    off for the process; the export goes on without it. For patches that only
    save time: a fix whose absence changes results must not raise this."""


def register(patch: Patch) -> Patch:
    if patch.name in _REGISTRY:
        raise ValueError(f"patch name {patch.name!r} is already registered")
    _REGISTRY[patch.name] = patch
    return patch


def registered_patches() -> list[Patch]:
    return list(_REGISTRY.values())


def installed_executorch_version() -> str:
    return _dist_version("executorch")


def installed_torch_version() -> str:
    return _dist_version("torch")


def apply_arm_backend_monkey_patch(executorch_version: str | None = None) -> list[str]:
    """Apply every registered patch needed on ``executorch_version`` (default:
    the installed one). Returns the names of the patches now in effect."""
    version = executorch_version or installed_executorch_version()
    for patch in _REGISTRY.values():
        if patch.name in _DISABLED:
            continue
        if patch.name in _APPLIED or patch.name in _NOT_APPLICABLE:
            continue
        if patch.is_needed(version):
            try:
                _APPLIED[patch.name] = patch.apply()
            except PatchNotApplicable as reason:
                _NOT_APPLICABLE[patch.name] = str(reason)
    return sorted(_APPLIED)


def not_applicable_patches() -> dict[str, str]:
    """Patches left off because the code they patch was not as checked: name -> why."""
    return dict(_NOT_APPLICABLE)


def applied_patches() -> list[str]:
    return sorted(_APPLIED)


def revert_patch(name: str) -> None:
    """Undo one applied patch (a later apply_arm_backend_monkey_patch() applies it again)."""
    if name not in _APPLIED:
        raise ValueError(f"patch {name!r} is not applied; applied: {applied_patches()}")
    _APPLIED.pop(name)()


def disable_patch(name: str) -> None:
    """Revert a patch and keep it off in this process (to show it is still needed)."""
    if name not in _REGISTRY:
        raise ValueError(f"no patch named {name!r}; registered: {sorted(_REGISTRY)}")
    _DISABLED.add(name)
    if name in _APPLIED:
        revert_patch(name)


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------
#: Seconds model-converter may run for one delegate (env override).
CONVERTER_TIMEOUT_ENV = "VGF_EXPORT_CONVERTER_TIMEOUT"
DEFAULT_CONVERTER_TIMEOUT = 300.0


def _converter_timeout() -> float:
    raw = os.environ.get(CONVERTER_TIMEOUT_ENV, "")
    try:
        return float(raw) if raw else DEFAULT_CONVERTER_TIMEOUT
    except ValueError:
        raise ValueError(
            f"{CONVERTER_TIMEOUT_ENV} must be a number of seconds, got {raw!r}"
        ) from None


def _apply_converter_timeout() -> Callable[[], None]:
    from executorch.backends.arm.vgf import backend as vgf_backend

    real = vgf_backend.subprocess

    def run(*args, **kwargs):
        kwargs.setdefault("timeout", _converter_timeout())
        return real.run(*args, **kwargs)

    proxy = types.SimpleNamespace(
        **{name: getattr(real, name) for name in dir(real) if not name.startswith("__")}
    )
    proxy.run = run
    vgf_backend.subprocess = proxy

    def undo() -> None:
        vgf_backend.subprocess = real

    return undo


register(
    Patch(
        name="model-converter-timeout",
        fixes=(
            "ExecuTorch runs model-converter with no timeout, so a hanging "
            "converter hangs the export; with the patch it is killed after "
            f"${CONVERTER_TIMEOUT_ENV} seconds (default {DEFAULT_CONVERTER_TIMEOUT:g}) "
            "and the export fails at the convert stage."
        ),
        upstream="none filed: vgf_compile() in executorch/backends/arm/vgf/backend.py",
        applies_to=">=1.3",
        apply=_apply_converter_timeout,
    )
)


#: Whether the bilinear-scale-factor patch acts in the current export (the
#: "bilinear-scale-factor" workaround; export_model turns it off per export).
BILINEAR_SCALE_FACTOR = contextvars.ContextVar("bilinear_scale_factor", default=True)


def _bilinear_parameters_from_scale(input_size, output_size, scale_factor):
    """TOSA RESIZE terms of PyTorch's bilinear (align_corners=False) with an
    explicit factor s: source = (dst + 0.5) / s - 0.5, i.e. scale 2*num/2*den
    of s = num/den, offset den - num, and the border the spec derives."""
    import sympy

    ratio = sympy.nsimplify(scale_factor, tolerance=1e-6, rational=True)
    num, den = (int(v) for v in ratio.as_numer_denom())
    scale_n, scale_d = 2 * num, 2 * den
    offset = scale_d // 2 - scale_n // 2
    border = scale_d * (output_size - 1) - scale_n * (input_size - 1) + offset
    return scale_n, scale_d, offset, border


def _apply_bilinear_scale_factor() -> Callable[[], None]:
    from executorch.backends.arm._passes.rewrite_upsample import RewriteUpsamplePass

    real = RewriteUpsamplePass.get_resize_parameters_1d

    def parameters(input_size, output_size, align_corners, resize_mode="bilinear", scale_factor=None):
        if (BILINEAR_SCALE_FACTOR.get() and resize_mode == "bilinear" and not align_corners
                and scale_factor is not None and isinstance(input_size, int)
                and isinstance(output_size, int)):
            return _bilinear_parameters_from_scale(input_size, output_size, scale_factor)
        return real(input_size, output_size, align_corners, resize_mode, scale_factor)

    RewriteUpsamplePass.get_resize_parameters_1d = staticmethod(parameters)

    def undo() -> None:
        RewriteUpsamplePass.get_resize_parameters_1d = staticmethod(real)

    return undo


register(
    Patch(
        name="bilinear-scale-factor",
        fixes=(
            "RewriteUpsamplePass encodes a bilinear (align_corners=False) RESIZE from the "
            "output/input size ratio even when an explicit scale factor is given; PyTorch samples "
            "with the factor (recompute_scale_factor False/None), so where floor(in * s) is not an "
            "exact multiple the lowered program samples elsewhere (24 to 194 LSB). The patch encodes "
            "the factor, as 1.5 already does for nearest (#22437). Exact multiples are unchanged."
        ),
        upstream="none filed; reproduction in docs/divergences/bilinear_scale_factor.py",
        applies_to=">=1.5,<1.6",
        apply=_apply_bilinear_scale_factor,
    )
)


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


register(
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


register(
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


register(
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
