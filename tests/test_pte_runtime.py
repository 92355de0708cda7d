"""vgf_conformance.oracles.pte: the shipped program.pte through ExecuTorch's runtime."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from vgf_conformance.cases import CASES
from vgf_conformance.oracles.lowered import quantize_inputs
from vgf_conformance.oracles.pte import (
    PteMeta,
    PteRuntimeError,
    execute_program,
    load_pte_meta,
    run_cpu_program,
)
from vgf_conformance.oracles.pte import reader, runtime
from vgf_conformance.oracles.pte.execute import output_differences
from vgf_conformance.harness.execution.runner import run_case
from vgf_export.export import TOSA_SPEC

#: Stays on the CPU (the VGF partitioner refuses a 1/16 nearest downscale).
CPU_CASE = "resize-nearest-down16-int8io"
#: VGF (pad) -> grid sampler -> VGF (slice); the image input is NHWC int8.
GRID_CASE = "grid-rgb-bilinear-zeros-ac0-identity-int8io"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Artifacts of the two cases, exported once for this module."""
    root = tmp_path_factory.mktemp("pte-runtime")
    runs = {}
    for case_id in (CPU_CASE, GRID_CASE):
        run = run_case(CASES[case_id], root)
        assert run.result is not None, run.failure and run.failure.describe()
        runs[case_id] = run
    return runs


@pytest.fixture(scope="module")
def unpinned(tmp_path_factory):
    """The grid case exported without the pte-delegate-layouts workaround."""
    run = run_case(CASES[GRID_CASE], tmp_path_factory.mktemp("pte-unpinned"),
                   disable_workarounds=("pte-delegate-layouts",))
    assert run.result is not None, run.failure and run.failure.describe()
    return run, load_pte_meta(run.result.artifacts.program)


@pytest.fixture(scope="module")
def grid_meta(exported):
    return load_pte_meta(exported[GRID_CASE].result.artifacts.program)


def test_meta_of_an_exported_program(exported, grid_meta):
    artifacts = exported[GRID_CASE].result.artifacts
    report = json.loads(artifacts.report.read_text())
    assert grid_meta.methods[0] == "forward"
    assert {"input0_scale", "input1_zp", "output0_dtype"} <= set(grid_meta.methods)
    assert list(grid_meta.delegates) == [d["backend"] for d in report["delegates"]]
    assert grid_meta.operators == ()
    assert [i.kind for i in grid_meta.instructions] == ["DelegateCall"] * 3
    assert [b for b, _ in grid_meta.delegate_calls] == list(grid_meta.delegates)
    # The installed runtime has neither backend.
    assert set(grid_meta.unsupported_delegates) == {"VgfBackend", "GridSamplerBackend"}
    assert grid_meta.missing_operators == ()
    # The TOSA version and profile each VGF delegate was lowered for (its
    # compile spec; the flatbuffer has no profile field); the sampler has none.
    assert grid_meta.tosa_specs == (TOSA_SPEC, TOSA_SPEC) == ("TOSA-1.0+INT+FP+int16",) * 2
    assert grid_meta.compile_specs[1] == {}
    assert set(grid_meta.seconds) == {"import", "load", "meta"}
    # IO value indices point at the same tensors as the IO metas.
    assert [grid_meta.values[i] for i in grid_meta.input_values] == list(grid_meta.inputs)
    assert [grid_meta.values[i] for i in grid_meta.output_values] == list(grid_meta.outputs)


def test_nhwc_delegated_input_dtype_sizes_dim_order(exported, grid_meta):
    case = CASES[GRID_CASE]
    image, grid = case.make_inputs()
    payload = json.loads(
        next(exported[GRID_CASE].result.artifacts.delegates.glob("*_grid_sampler.json")).read_text()
    )
    image_meta, grid_meta_ = grid_meta.inputs
    # The image enters the first VGF delegate as an int8 NHWC tensor.
    assert image_meta.sizes == tuple(image.shape) == (1, 3, 12, 16)
    assert image_meta.dtype == "int8"
    assert image_meta.dim_order == (0, 2, 3, 1)
    assert image_meta.layout == "NHWC"
    assert image_meta.nbytes == image.numel() * 1
    # The grid goes straight to the grid sampler: int16 SNORM16, as its payload says.
    assert grid_meta_.sizes == tuple(grid.shape) == tuple(payload["grid"]["shape"])
    assert grid_meta_.dtype == payload["grid"]["dtype"] == "int16"
    assert grid_meta_.dim_order == tuple(payload["grid"]["dim_order"]) == (0, 1, 2, 3)
    assert grid_meta_.nbytes == grid.numel() * 2


def test_program_labels_match_the_grid_sampler_payload(exported, grid_meta):
    """With the pte-delegate-layouts workaround the .pte says what the delegates write."""
    assert grid_meta.grid_sampler_layout_mismatches(exported[GRID_CASE].result.artifacts.root) == []


def test_layout_mismatch_is_found_without_the_workaround(unpinned):
    """executorch 1.5.1: to_executorch() re-derives delegate outputs' dim order by
    fake-running each delegate's original graph, so without the workaround the
    sampler's output (the value the second delegate call writes last) is
    labelled NCHW while the payload says NHWC."""
    run, meta = unpinned
    (found,) = meta.grid_sampler_layout_mismatches(run.result.artifacts.root)
    (_, args), = [c for c in meta.delegate_calls if c[0] == "GridSamplerBackend"]
    assert found == (
        f"delegate 1 output: the program says value [{args[-1]}] int8[1x4x12x16] NCHW, "
        "the payload dim_order is [0, 2, 3, 1]"
    )


def test_fast_reader_agrees_with_exir_deserialization(exported):
    from executorch.exir._serialize._program import deserialize_pte_binary

    for run in exported.values():
        buffer = run.result.artifacts.program.read_bytes()
        plan = reader.read_plan(buffer)
        reference = deserialize_pte_binary(buffer).program.execution_plan[0]
        tensors = {i: v.val for i, v in enumerate(reference.values) if hasattr(v.val, "dim_order")}
        assert set(plan["values"]) == set(tensors)
        for index, tensor in tensors.items():
            assert plan["values"][index]["sizes"] == tuple(tensor.sizes)
            assert plan["values"][index]["dim_order"] == tuple(tensor.dim_order)
        assert list(plan["inputs"]) == list(reference.inputs)
        assert list(plan["outputs"]) == list(reference.outputs)
        assert plan["delegates"] == [d.id for d in reference.delegates]
        assert plan["operators"] == [
            f"{o.name}.{o.overload}" if o.overload else o.name for o in reference.operators
        ]


def test_cpu_program_matches_torch(exported):
    run = exported[CPU_CASE]
    report = json.loads(run.result.artifacts.report.read_text())
    assert report["delegates"] == []
    meta = load_pte_meta(run.result.artifacts.program)
    assert meta.delegates == () and meta.missing_operators == ()
    # A channels-last input: run_cpu_program must lay the bytes out NHWC.
    assert meta.inputs[0].dim_order == (0, 2, 3, 1)

    (x,) = CASES[CPU_CASE].make_inputs()
    qin = report["io_quant_params"]["inputs"]["x"]
    (qout,) = report["io_quant_params"]["outputs"].values()
    q = torch.clamp(torch.round(x / qin["scale"]), qin["quant_min"], qin["quant_max"]).to(torch.int8)

    (got,) = run_cpu_program(run.result.artifacts.program, [q.numpy()])

    with torch.no_grad():
        y = CASES[CPU_CASE].model()(q.float() * qin["scale"])
    want = torch.clamp(torch.round(y / qout["scale"]), qout["quant_min"], qout["quant_max"])
    assert got.dtype == np.int8 and got.shape == tuple(want.shape) == meta.outputs[0].sizes
    np.testing.assert_array_equal(got, want.to(torch.int8).numpy())


def test_cpu_program_refuses_bad_inputs(exported):
    program = exported[CPU_CASE].result.artifacts.program
    with pytest.raises(ValueError, match=r"input 0: forward takes int8\[1, 4, 64, 80\], got float32"):
        run_cpu_program(program, [np.zeros((1, 4, 64, 80), np.float32)])
    with pytest.raises(ValueError, match="forward takes 1 inputs, got 2"):
        run_cpu_program(program, [np.zeros((1, 4, 64, 80), np.int8)] * 2)


def test_delegated_program_is_not_run(exported):
    with pytest.raises(PteRuntimeError, match="cannot execute: .*VgfBackend.*GridSamplerBackend"):
        run_cpu_program(
            exported[GRID_CASE].result.artifacts.program,
            [np.zeros((1, 3, 12, 16), np.int8), np.zeros((1, 12, 16, 2), np.int16)],
        )


def test_corrupt_programs_give_clear_errors(tmp_path, exported):
    good = exported[CPU_CASE].result.artifacts.program.read_bytes()
    garbage = tmp_path / "garbage.pte"
    garbage.write_bytes(bytes(range(256)) * 16)
    with pytest.raises(PteRuntimeError, match=r"Failed to load program.*InvalidProgram") as info:
        load_pte_meta(garbage)
    assert "expected 'ET12'" in info.value.log
    assert info.value.returncode is None  # refused: the child lives on for the next request

    truncated = tmp_path / "truncated.pte"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(PteRuntimeError, match="Failed to load program"):
        load_pte_meta(truncated)

    with pytest.raises(FileNotFoundError):
        load_pte_meta(tmp_path / "absent.pte")


def test_a_native_crash_is_an_error_not_a_dead_caller(tmp_path, exported):
    good = exported[CPU_CASE].result.artifacts.program.read_bytes()
    corrupt = tmp_path / "overwritten.pte"
    corrupt.write_bytes(good[:100] + b"\xa5" * 300 + good[400:])
    # Verified loading refuses it ...
    with pytest.raises(PteRuntimeError, match="Verification failed|Failed to load program"):
        load_pte_meta(corrupt)
    # ... the runtime's default (minimal verification) dies on it.
    with pytest.raises(PteRuntimeError, match=r"crashed \(SIG") as info:
        load_pte_meta(corrupt, verification="minimal")
    assert info.value.returncode < 0


def test_a_crashing_program_fails_alone(tmp_path, exported):
    """One long-lived child serves the requests; a request that crashes it
    fails alone (naming the signal), and the next request gets a fresh child."""
    good = exported[CPU_CASE].result.artifacts.program
    corrupt = tmp_path / "overwritten.pte"
    corrupt.write_bytes(good.read_bytes()[:100] + b"\xa5" * 300 + good.read_bytes()[400:])
    load_pte_meta(good)
    pid, starts = runtime.CHILD.pid, runtime.CHILD.starts
    assert pid is not None
    load_pte_meta(good)
    assert (runtime.CHILD.pid, runtime.CHILD.starts) == (pid, starts)  # the same child served both
    assert runtime.CHILD.peak_rss_mib() > 100  # torch and the runtime are loaded
    with pytest.raises(PteRuntimeError, match=r"loading .*overwritten.pte: the runtime child crashed \(SIG"):
        load_pte_meta(corrupt, verification="minimal")
    assert runtime.CHILD.pid is None  # found dead, not reused
    assert load_pte_meta(good).inputs[0].dtype == "int8"
    assert runtime.CHILD.starts == starts + 1 and runtime.CHILD.pid not in (None, pid)


def test_a_request_past_its_timeout_is_killed_and_fails_alone(exported):
    run = exported[GRID_CASE]
    image, grid = (x.numpy() for x in quantize_inputs(
        CASES[GRID_CASE].make_inputs(), run.result.edge_program, run.result.io_quant_params))
    load_pte_meta(run.result.artifacts.program)
    pid = runtime.CHILD.pid
    # Two TOSA reference model children alone take longer than 20 ms.
    with pytest.raises(PteRuntimeError, match=r"executing .*: the runtime child timed out after 0.02 s \(killed\)"):
        execute_program(run.result.artifacts.program, [image, grid], run.result.artifacts.root, timeout=0.02)
    assert runtime.CHILD.pid is None
    assert execute_program(run.result.artifacts.program, [image, grid], run.result.artifacts.root)
    assert runtime.CHILD.pid not in (None, pid)


# ---------------------------------------------------------------------------
# The serialized plan, executed
# ---------------------------------------------------------------------------
def _inputs(run):
    return [x.numpy() for x in quantize_inputs(
        run.case.make_inputs(), run.result.edge_program, run.result.io_quant_params)]


def _rewritten(run, tmp_path, change) -> Path:
    """The case's program.pte with ``change(program)`` applied, serialized again."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte_file = deserialize_pte_binary(run.result.artifacts.program.read_bytes())
    change(pte_file.program)
    path = tmp_path / "program.pte"
    path.write_bytes(bytes(serialize_pte_binary(pte_file)))
    return path


def test_executed_plan_equals_the_lowered_program(exported):
    run = exported[GRID_CASE]
    executed = execute_program(run.result.artifacts.program, _inputs(run), run.result.artifacts.root)
    assert output_differences(executed, [x.numpy() for x in run.numerics.program.outputs]) == []
    assert executed[0].dtype == np.int8 and executed[0].shape == (1, 3, 12, 16)
    assert np.abs(executed[0].astype(int)).max() > 0  # not an all-zero coincidence


def test_the_interpreter_agrees_with_the_runtime_on_a_cpu_program(exported):
    """The interpreter's kernel calls (torch ops by name) against ExecuTorch's own kernels."""
    run = exported[CPU_CASE]
    inputs = _inputs(run)
    (runtime_out,) = run_cpu_program(run.result.artifacts.program, inputs)
    (executed,) = execute_program(run.result.artifacts.program, inputs, run.result.artifacts.root)
    np.testing.assert_array_equal(executed, runtime_out)


def test_swapped_delegate_payloads_are_found(exported, tmp_path):
    """The VGF payloads of delegates 0 (pad RGB to RGBA) and 2 (slice it
    back) exchanged: the edge graph is unchanged, the shipped file is wrong."""
    run = exported[GRID_CASE]

    def swap(program):
        data = program.backend_delegate_data
        data[0], data[2] = data[2], data[0]

    path = _rewritten(run, tmp_path, swap)
    with pytest.raises(PteRuntimeError, match=r"instruction 0 \(delegate 0, VgfBackend\): input "
                       r"\[0\] int8\[1x3x12x16\].*the TOSA graph has INT8\[1x12x16x4\]"):
        execute_program(path, _inputs(run), run.result.artifacts.root)


def test_a_payload_that_is_not_the_exports_vgf_is_found(exported, tmp_path):
    run = exported[GRID_CASE]

    def corrupt(program):
        data = program.backend_delegate_data[0].data
        program.backend_delegate_data[0].data = data[:100] + bytes([data[100] ^ 0xFF]) + data[101:]

    path = _rewritten(run, tmp_path, corrupt)
    with pytest.raises(PteRuntimeError, match=r"VGF payload \(sha256 \w+\) is none of the export's"):
        execute_program(path, _inputs(run), run.result.artifacts.root)


def test_a_reordered_instruction_chain_is_found(exported, tmp_path):
    """The grid sampler called before the pad that writes its image: it
    samples whatever the planned memory holds."""
    run = exported[GRID_CASE]

    def reorder(program):
        instructions = program.execution_plan[0].chains[0].instructions
        instructions[0], instructions[1] = instructions[1], instructions[0]

    path = _rewritten(run, tmp_path, reorder)
    executed = execute_program(path, _inputs(run), run.result.artifacts.root)
    (found,) = output_differences(executed, [x.numpy() for x in run.numerics.program.outputs])
    assert re.match(r"output 0 \(int8\[1, 3, 12, 16\]\): \d+ of 576 elements differ", found)


def test_a_flipped_output_dim_order_is_found(exported, tmp_path):
    """The program's output labelled NCHW while the delegate writes NHWC
    bytes: the runtime hands the user a transposed image."""
    run = exported[GRID_CASE]

    def flip(program):
        plan = program.execution_plan[0]
        plan.values[plan.outputs[0]].val.dim_order = [0, 1, 2, 3]

    path = _rewritten(run, tmp_path, flip)
    executed = execute_program(path, _inputs(run), run.result.artifacts.root)
    (found,) = output_differences(executed, [x.numpy() for x in run.numerics.program.outputs])
    assert "elements differ" in found


def test_meta_round_trips_through_json(grid_meta):
    again = PteMeta.from_dict(json.loads(json.dumps(grid_meta.to_dict())))
    assert again == grid_meta


def test_nearest_exact_reads_a_mislabelled_delegate_output(tmp_path):
    """What executing the shipped file found: in resize-nearest-exact-* the VGF
    delegate writes its float output [1, 4, 8, 9] as the TOSA graph says
    (NCHW bytes), program.pte labels that value channels-last, so the CPU
    gather after it reads a transposed image. Relabelled NCHW, the program
    equals the lowered one: the label is the whole difference."""
    run = run_case(CASES["resize-nearest-exact-up2-int8io"], tmp_path / "export")
    inputs, want = _inputs(run), [x.numpy() for x in run.numerics.program.outputs]
    (found,) = output_differences(
        execute_program(run.result.artifacts.program, inputs, run.result.artifacts.root), want)
    assert re.match(r"output 0 \(int8\[1, 4, 16, 18\]\): 1140 of 1152 elements differ", found)

    def relabel(program):
        plan = program.execution_plan[0]
        call = plan.chains[0].instructions[0].instr_args  # the delegate: input, then its outputs
        written = plan.values[call.args[1]].val
        assert (list(written.sizes), list(written.dim_order)) == ([1, 4, 8, 9], [0, 2, 3, 1])
        written.dim_order = [0, 1, 2, 3]

    path = _rewritten(run, tmp_path, relabel)
    assert output_differences(execute_program(path, inputs, run.result.artifacts.root), want) == []
