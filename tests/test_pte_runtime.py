"""conformance.oracles.pte: the shipped program.pte through ExecuTorch's runtime."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conformance.cases import CASES
from conformance.oracles.pte import PteMeta, PteRuntimeError, load_pte_meta, run_cpu_program
from conformance.oracles.pte import reader, runtime
from conformance.harness.runner import run_case

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
    assert info.value.returncode == 1

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


def test_child_crash_and_timeout_are_reported():
    with pytest.raises(PteRuntimeError, match=r"crashed \(SIGSEGV\)"):
        runtime._run_child(
            ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
            timeout=30, what="probe",
        )
    with pytest.raises(PteRuntimeError, match="timed out after 1 s"):
        runtime._run_child(["-c", "import time; time.sleep(30)"], timeout=1, what="probe")


def test_meta_round_trips_through_json(grid_meta):
    again = PteMeta.from_dict(json.loads(json.dumps(grid_meta.to_dict())))
    assert again == grid_meta
