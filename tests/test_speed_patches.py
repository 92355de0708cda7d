"""The speed patches of :mod:`vgf_export.patches`: applied on the pinned
stack, idempotent, reversible, and computing what upstream computes.

No timings here (see scripts/profile_export.py for those).

(No ``from __future__ import annotations`` in this file: one test needs an
annotation that is evaluated.)"""

import __future__
import copy
import enum
import types

import pytest
import torch
import torch.export.decomp_utils as decomp_utils
import torch.export.exported_program as exported_program
from torch._export import utils as export_utils
from torch._ops import OperatorBase
from torch.fx.traceback import NodeSource, NodeSourceAction

from vgf_conformance import speed_patches
from vgf_export import patches

SPEED_PATCHES = ("cia-ops-materialize-once", "py-impl-lazy-annotations", "node-source-deepcopy")


def _patch(name: str) -> patches.Patch:
    return next(p for p in patches.registered_patches() if p.name == name)


@pytest.fixture
def applied():
    """Every patch applied, as the suite's exports do (the speed patches
    enabled, then export_model's apply); the speed patches are left applied
    afterwards, as in any process of the suite that exported."""
    speed_patches.enable()
    patches.apply_arm_backend_monkey_patch()
    yield
    patches.apply_arm_backend_monkey_patch()


@pytest.fixture
def custom_cia_op():
    """A new op with a CompositeImplicitAutograd kernel, registered after the
    patches were applied (as executorch's lazily imported ops are)."""
    lib = torch.library.Library("vgf_speed_test", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x + x, "CompositeImplicitAutograd")
    yield torch.ops.vgf_speed_test.twice.default
    lib._destroy()


@pytest.mark.parametrize("name", SPEED_PATCHES)
def test_speed_patch_is_applied_on_the_pinned_stack(name, applied):
    patch = _patch(name)
    assert patch.torch_applies_to and patch.fixes.startswith("Speed, same result.")
    assert patch.is_needed(patches.installed_executorch_version())
    assert name in patches.applied_patches()


def test_torch_version_gate():
    patch = _patch("cia-ops-materialize-once")
    assert patch.is_needed("1.5.1", "2.13.0") and patch.is_needed("1.5.1", "2.13.0+cpu")
    assert not patch.is_needed("1.5.1", "2.14.0")
    assert not patch.is_needed("1.5.1", "2.12.1")
    assert not patch.is_needed("1.2.0", "2.13.0")  # the executorch range still applies


@pytest.mark.parametrize("name", SPEED_PATCHES)
def test_speed_patch_is_idempotent_and_reversible(name, applied):
    def state():
        return (export_utils._collect_all_valid_cia_ops, exported_program._collect_all_valid_cia_ops,
                decomp_utils._collect_all_valid_cia_ops, export_utils._materialize_cpp_cia_ops,
                NodeSource.__dict__.get("__deepcopy__"), OperatorBase.__dict__["py_impl"])

    patched = state()
    patches.apply_arm_backend_monkey_patch()
    assert state() == patched  # applying again wraps nothing twice
    patches.revert_patch(name)
    try:
        reverted = state()
        assert reverted != patched
        if name == "cia-ops-materialize-once":
            upstream = exported_program._collect_all_valid_cia_ops
            assert export_utils._collect_all_valid_cia_ops is upstream
            assert decomp_utils._collect_all_valid_cia_ops is upstream
            assert patched[1].__wrapped__ is upstream
        elif name == "node-source-deepcopy":
            assert "__deepcopy__" not in NodeSource.__dict__
        else:
            assert not reverted[-1].__code__.co_flags & __future__.annotations.compiler_flag
            assert patched[-1].__code__.co_flags & __future__.annotations.compiler_flag
    finally:
        patches.apply_arm_backend_monkey_patch()
    # Applied anew: new wrappers around upstream's functions, never around the old wrappers.
    if name == "py-impl-lazy-annotations":
        assert OperatorBase.__dict__["py_impl"].__code__ == patched[-1].__code__
    elif name == "node-source-deepcopy":
        assert NodeSource.__dict__["__deepcopy__"].__code__ == patched[4].__code__
    else:
        upstream = patched[1].__wrapped__
        for holder in (export_utils, exported_program, decomp_utils):
            assert holder._collect_all_valid_cia_ops.__wrapped__ is upstream
    assert name in patches.applied_patches()


# ---------------------------------------------------------------------------
# cia-ops-materialize-once
# ---------------------------------------------------------------------------
def _upstream_collect():
    return exported_program._collect_all_valid_cia_ops.__wrapped__


def test_cia_collection_equals_upstream(applied):
    patched = exported_program._collect_all_valid_cia_ops()
    patches.revert_patch("cia-ops-materialize-once")
    try:
        upstream = exported_program._collect_all_valid_cia_ops()
    finally:
        patches.apply_arm_backend_monkey_patch()
    assert patched == upstream and len(upstream) > 100
    assert decomp_utils._collect_all_valid_cia_ops() == upstream


def test_cia_collection_sees_ops_registered_later(applied, custom_cia_op):
    """Nothing is cached across calls: an op registered after the patch is
    found, as upstream finds it."""
    patched = exported_program._collect_all_valid_cia_ops()
    assert custom_cia_op in patched
    assert patched == _upstream_collect()()


def test_cia_materialization_runs_once_a_call(applied, monkeypatch):
    calls = []
    real = export_utils._materialize_cpp_cia_ops.__closure__  # the patch's wrapper
    assert real is not None
    patches.revert_patch("cia-ops-materialize-once")
    try:
        upstream_materialize = export_utils._materialize_cpp_cia_ops
        monkeypatch.setattr(export_utils, "_materialize_cpp_cia_ops",
                            lambda: (calls.append(1), upstream_materialize())[1])
        export_utils._collect_all_valid_cia_ops()
        upstream_calls = len(calls)
        calls.clear()
        undo = speed_patches._apply_cia_materialize_once()  # wraps the counting one
        try:
            first = exported_program._collect_all_valid_cia_ops()
            assert len(calls) == 1
            second = exported_program._collect_all_valid_cia_ops()
            assert len(calls) == 2 and first == second
            export_utils._materialize_cpp_cia_ops()  # called on its own: runs
            assert len(calls) == 3
        finally:
            undo()
    finally:
        monkeypatch.undo()
        patches.apply_arm_backend_monkey_patch()
    assert upstream_calls > 10  # one a namespace upstream


def test_run_decompositions_unchanged(applied):
    """The same decomposed graph with and without the patches."""

    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")
            return torch.nn.functional.linear(y, torch.ones(16, 16)).clamp(0, 1)

    def decomposed() -> str:
        ep = torch.export.export(M(), (torch.rand(1, 2, 8, 8),))
        return str(ep.run_decompositions({}).graph) + str(ep.run_decompositions().graph)

    patched = decomposed()
    for name in SPEED_PATCHES:
        patches.revert_patch(name)
    try:
        upstream = decomposed()
    finally:
        patches.apply_arm_backend_monkey_patch()
    assert patched == upstream


# ---------------------------------------------------------------------------
# py-impl-lazy-annotations
# ---------------------------------------------------------------------------
def _code_constants(code: types.CodeType) -> dict[str, types.CodeType]:
    return {c.co_name: c for c in code.co_consts if isinstance(c, types.CodeType)}


def test_py_impl_is_upstreams_code(applied):
    """The rebuilt py_impl: the same inner function, byte for byte, and the
    same name, file, lines and annotations; only the inner function's
    annotations are no longer evaluated."""
    patches.revert_patch("py-impl-lazy-annotations")
    try:
        upstream = OperatorBase.__dict__["py_impl"]
    finally:
        patches.apply_arm_backend_monkey_patch()
    rebuilt = OperatorBase.__dict__["py_impl"]
    assert rebuilt is not upstream
    for attr in ("__qualname__", "__module__", "__annotations__", "__defaults__"):
        assert getattr(rebuilt, attr) == getattr(upstream, attr), attr
    assert rebuilt.__code__.co_filename == upstream.__code__.co_filename
    assert rebuilt.__code__.co_firstlineno == upstream.__code__.co_firstlineno
    assert rebuilt.__code__.co_varnames == upstream.__code__.co_varnames
    inner, upstream_inner = _code_constants(rebuilt.__code__), _code_constants(upstream.__code__)
    assert inner.keys() == upstream_inner.keys() == {"inner"}
    for field in ("co_code", "co_names", "co_consts", "co_varnames", "co_freevars",
                  "co_firstlineno", "co_linetable", "co_exceptiontable"):
        assert getattr(inner["inner"], field) == getattr(upstream_inner["inner"], field), field


def test_py_impl_registers_as_upstream(applied, custom_cia_op):
    op = custom_cia_op
    key = torch._C.DispatchKey.AutogradCPU
    fn = lambda *args, **kwargs: None  # noqa: E731
    assert op.py_impl(key)(fn) is fn
    assert op.py_kernels[key] is fn
    with pytest.raises(RuntimeError, match="Trying to override a python impl for"):
        op.py_impl(key)(fn)
    with pytest.raises(AssertionError, match="Please register a mode"):
        op.py_impl(torch._C.DispatchKey.Python)(fn)
    del op.py_kernels[key]


def _annotated_factory():
    def inner(x: NameNotDefinedAnywhere) -> NameNotDefinedAnywhere:  # noqa: F821
        return x + 1

    return inner


def test_rebuilt_function_does_not_evaluate_nested_annotations():
    with pytest.raises(NameError):
        _annotated_factory()
    rebuilt = speed_patches._without_runtime_annotations(_annotated_factory)
    assert rebuilt()(1) == 2
    assert rebuilt.__qualname__ == _annotated_factory.__qualname__
    assert rebuilt.__code__.co_firstlineno == _annotated_factory.__code__.co_firstlineno


# ---------------------------------------------------------------------------
# node-source-deepcopy
# ---------------------------------------------------------------------------
def _structure(root) -> tuple:
    """The object graph under ``root``: types, attribute names in order, values,
    and which objects are shared (as back-references), independent of ids."""
    seen: dict[int, int] = {}

    def walk(obj):
        if type(obj) in (str, int, float, bool, type(None)) or isinstance(obj, enum.Enum):
            return ("atom", type(obj), obj)
        if id(obj) in seen:
            return ("ref", seen[id(obj)])
        seen[id(obj)] = len(seen)
        if type(obj) in (list, tuple):
            return (type(obj), tuple(walk(x) for x in obj))
        if type(obj) is dict:
            return (dict, tuple((walk(k), walk(v)) for k, v in obj.items()))
        return (type(obj), tuple((k, walk(v)) for k, v in vars(obj).items()))

    return walk(root)


def _mutable_ids(root) -> set[int]:
    found: set[int] = set()

    def walk(obj):
        if type(obj) in (str, int, float, bool, type(None)) or isinstance(obj, enum.Enum):
            return
        if id(obj) in found:
            return
        found.add(id(obj))
        items = obj if type(obj) in (list, tuple) else (
            [*obj.keys(), *obj.values()] if type(obj) is dict else vars(obj).values())
        for item in items:
            walk(item)

    walk(root)
    return found


def _both_copies(value):
    patched = copy.deepcopy(value)
    patches.revert_patch("node-source-deepcopy")
    try:
        upstream = copy.deepcopy(value)
    finally:
        patches.apply_arm_backend_monkey_patch()
    return patched, upstream


def _synthetic_provenance():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.ops.aten.relu.default, (x,))
    x.meta["from_node"] = [NodeSource(None, "seed")]
    first = NodeSource(x, "pass_a", NodeSourceAction.CREATE)
    y.meta["from_node"] = [first, first]  # one object twice: shared in the copy too
    second = NodeSource(y, "pass_b", [NodeSourceAction.CREATE, NodeSourceAction.REPLACE])
    second.to_dict()  # fills the _dict cache, copied as well
    return {"from_node": [second], "again": [second], "tuple": (second, 1.5, "s")}


def test_node_source_deepcopy_builds_the_same_object_graph(applied):
    value = _synthetic_provenance()
    patched, upstream = _both_copies(value)
    assert _structure(patched) == _structure(upstream) == _structure(value)
    assert patched["from_node"][0] is patched["again"][0] is patched["tuple"][0]
    assert not _mutable_ids(patched) & _mutable_ids(value)  # nothing mutable is shared
    assert patched["from_node"][0].to_dict() == value["from_node"][0].to_dict()
    assert patched["from_node"][0] == upstream["from_node"][0]


def test_node_source_deepcopy_on_an_exports_provenance(applied, tmp_path):
    """The provenance trees of a real export copy to the same object graph."""
    from vgf_conformance.cases.op_models import Resize
    from vgf_export import export_model

    result = export_model(Resize(scale_factor=2.0, align_corners=False), (torch.rand(1, 4, 6, 5),),
                          artifacts_root=tmp_path / "a", enable_pt2e_quantization=False)
    gm = result.edge_program.exported_program().graph_module
    modules = [gm] + [getattr(gm, n.target).original_module.graph_module
                      for n in gm.graph.nodes if n.op == "get_attr" and n.target.startswith("lowered")]
    trees = [n.meta["from_node"] for m in modules for n in m.graph.nodes if n.meta.get("from_node")]
    assert trees and max(len(_mutable_ids(t)) for t in trees) > 10
    patched, upstream = _both_copies(trees)
    assert _structure(patched) == _structure(upstream) == _structure(trees)
    assert not _mutable_ids(patched) & _mutable_ids(trees)


# ---------------------------------------------------------------------------
# A speed patch that finds other code than it was checked against stays off
# ---------------------------------------------------------------------------
def test_not_applicable_patch_is_left_off(monkeypatch):
    monkeypatch.setattr(patches, "_REGISTRY", {})
    monkeypatch.setattr(patches, "_APPLIED", {})
    monkeypatch.setattr(patches, "_NOT_APPLICABLE", {})
    calls = []

    def refuse():
        calls.append(1)
        raise patches.PatchNotApplicable("not the code it was checked against")

    patches.register(patches.Patch("speed", "Speed, same result.", "none", ">=1", refuse))
    patches.register(patches.Patch("fix", "x", "y", ">=1", lambda: (lambda: None)))
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == ["fix"]
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == ["fix"]
    assert calls == [1]  # tried once a process
    assert patches.not_applicable_patches() == {"speed": "not the code it was checked against"}


def test_rebuild_refuses_code_that_is_not_its_source(tmp_path):
    source = tmp_path / "module_under_test.py"
    source.write_text("def f(x):\n    def g(y: int) -> int:\n        return y\n    return g(x)\n")
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    f = namespace["f"]
    assert speed_patches._without_runtime_annotations(f)(3) == 3
    source.write_text("def f(x):\n    def g(y: int) -> int:\n        return -y\n    return g(x)\n")
    with pytest.raises(patches.PatchNotApplicable, match="does not compile to the loaded"):
        speed_patches._without_runtime_annotations(f)
    source.unlink()
    with pytest.raises(patches.PatchNotApplicable):
        speed_patches._without_runtime_annotations(f)


def test_vgf_export_leaves_torch_alone():
    """A team's process that imports vgf_export and applies its patches (as
    export_model does) runs upstream torch.export: the speed patches are the
    suite's, opt-in (vgf_conformance.speed_patches.enable)."""
    import subprocess
    import sys

    probe = (
        "import copy\n"
        "from torch._export import utils as export_utils\n"
        "from torch._ops import OperatorBase\n"
        "from torch.fx.traceback import NodeSource\n"
        "before = (export_utils._collect_all_valid_cia_ops, OperatorBase.py_impl)\n"
        "import vgf_export.export\n"
        "from vgf_export import patches\n"
        "applied = patches.apply_arm_backend_monkey_patch()\n"
        "assert (export_utils._collect_all_valid_cia_ops, OperatorBase.py_impl) == before, 'torch patched'\n"
        "assert '__deepcopy__' not in vars(NodeSource), 'NodeSource patched'\n"
        "assert not set(applied) & set(%r), applied\n"
        "print(sorted(applied))\n" % (SPEED_PATCHES,))
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bilinear-scale-factor" in proc.stdout  # the backend's own fixes still apply
