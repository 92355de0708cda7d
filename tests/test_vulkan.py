"""The Vulkan tier's machinery: environment, scenario building, runs, failures."""

import ctypes.util
import dataclasses
import json
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vgf_conformance.oracles import vulkan
from vgf_conformance.oracles.vulkan import runner as vulkan_runner
from vgf_conformance.oracles.vulkan import scenario as vulkan_scenario
from vgf_conformance.cases.op_models import GridSample
from vgf_conformance.oracles.numerics import measure
from vgf_conformance.cases import FAMILIES, Case, InputSpec
from vgf_export import export_model
from vgf_export.names import GRID_SAMPLER_BACKEND, VGF_BACKEND


def test_missing_loader_names_what_to_install(monkeypatch):
    vulkan.vulkan_stack.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    try:
        with pytest.raises(vulkan.VulkanUnavailable, match="libvulkan1 mesa-vulkan-drivers"):
            vulkan.vulkan_stack()
    finally:
        vulkan.vulkan_stack.cache_clear()


def test_graph_layer_directory_comes_first(stack):
    graph_dir, tensor_dir = stack.env["VK_LAYER_PATH"].split(":")
    assert graph_dir.endswith("1_graph") and tensor_dir.endswith("2_tensor")
    manifest = json.loads(next(__import__("pathlib").Path(graph_dir).glob("*.json")).read_text())
    assert manifest["layer"]["name"] == "VK_LAYER_ML_Graph_Emulation"
    assert manifest["layer"]["library_path"].startswith("/")
    assert "lvp_icd" in stack.env["VK_ICD_FILENAMES"]


def test_each_delegate_backend_has_its_way_into_a_scenario(tmp_path):
    assert set(vulkan.DELEGATES) == {VGF_BACKEND, GRID_SAMPLER_BACKEND}
    program = SimpleNamespace(calls=[SimpleNamespace(index=0, backend="OtherBackend")], values={})
    with pytest.raises(ValueError, match="delegate 0: no Vulkan path for backend OtherBackend"):
        vulkan.build_scenario(program, tmp_path, {})


GRID_CASE = FAMILIES["grid_sample"].finish(Case(
    id="unit-grid-rgb-bilinear-border",
    family="grid_sample",
    model=lambda: GridSample("bilinear", "border", False),
    inputs=(InputSpec("image", (1, 3, 12, 20)), InputSpec("grid:rotation", (1, 6, 10, 2))),
    input_qspecs=("int8", "int16"),
    output_qspecs=("int8",),
))  # the family resolves its tolerances


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory, stack):
    root = tmp_path_factory.mktemp("vk")
    result = export_model(GRID_CASE.model(), GRID_CASE.make_inputs(), artifacts_root=root / "art",
                          **GRID_CASE.export_kwargs())
    numerics = measure(GRID_CASE, result)
    return result, numerics, root / "vulkan"


def test_scenario_aliases_images_and_feeds_them_through_the_image(grid_run):
    result, numerics, workdir = grid_run
    vgf_files = {f.index: f.path for f in result.artifacts.delegate_files("vgf")}
    builder = vulkan.build_scenario(numerics.program, workdir / "build", vgf_files)
    scenario = json.loads((workdir / "build" / "scenario.json").read_text())
    kinds = [next(iter(r)) for r in scenario["resources"]]
    assert kinds.count("graph") == 2 and kinds.count("shader") == 1
    images = [r["image"] for r in scenario["resources"] if "image" in r]
    assert sorted(i["format"] for i in images) == [
        "VK_FORMAT_R16G16_SNORM", "VK_FORMAT_R8G8B8A8_SNORM", "VK_FORMAT_R8G8B8A8_SNORM"]
    tensors = {r["tensor"]["uid"]: r["tensor"] for r in scenario["resources"] if "tensor" in r}
    for image in images:
        group = image["memory_group"]["id"]
        (aliased,) = [t for t in tensors.values() if t.get("memory_group", {}).get("id") == group]
        grid = image["format"] == "VK_FORMAT_R16G16_SNORM"
        assert aliased["dims"][-1] == (2 if grid else 4)
        assert aliased["format"] == ("VK_FORMAT_R16_SINT" if grid else "VK_FORMAT_R8_SINT")
        assert image["dims"] == [1, aliased["dims"][2], aliased["dims"][1], 1]  # width first
        if image["shader_access"] == "readonly":
            # program inputs are fed through the image (the tensor upload ignores row pitch)
            assert "src" not in aliased
    sampled = next(i for i in images if i["format"] == "VK_FORMAT_R8G8B8A8_SNORM" and i["shader_access"] == "readonly")
    assert sampled["min_filter"] == "LINEAR" and sampled["border_address_mode"] == "CLAMP_EDGE"
    grid_image = next(i for i in images if i["format"] == "VK_FORMAT_R16G16_SNORM")
    assert grid_image["src"].endswith(".in.npy")
    commands = [next(iter(c)) for c in scenario["commands"]]
    graph = vulkan.vulkan_stack().graph_command
    assert commands == [graph, "dispatch_compute", graph]
    assert len(builder.produced) == 3


def test_case_runs_bit_exact_and_reruns_by_hand(grid_run):
    result, numerics, workdir = grid_run
    check = vulkan.run_case_on_vulkan(numerics, result, workdir / "run")
    assert check.bit_exact
    assert check.problems(0.0) == [] and check.tensors
    command = vulkan.rerun_command(check.scenario)
    assert command.startswith(sys.executable)
    rerun = subprocess.run([sys.executable, "-m", "vgf_conformance", "vulkan", str(check.scenario)],
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr


def test_hanging_runner_fails_with_the_rerun_command(grid_run, tmp_path, monkeypatch, stack):
    fake = tmp_path / "scenario-runner"
    fake.write_text("#!/bin/sh\necho starting\nexec sleep 60\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(vulkan_runner, "vulkan_stack", lambda: vulkan.VulkanStack(runner=fake, env=stack.env))
    vulkan_scenario._vgf_bindings.cache_clear()
    scenario = tmp_path / "scenario.json"
    scenario.write_text("{}")
    with pytest.raises(vulkan.VulkanRunError, match=r"timed out after 1 s[\s\S]*rerun: .*-m vgf_conformance vulkan "):
        vulkan.run_scenario(scenario, timeout=1)


def _outputs(builder):
    return {uid: array.tobytes() for uid, array in builder.outputs().items()}


def test_batched_scenarios_give_the_outputs_of_runs_alone(grid_run):
    result, numerics, workdir = grid_run
    alone = vulkan.prepare_case(numerics, result, workdir / "alone")
    vulkan.run_scenario(alone.scenario)
    batch = [vulkan.prepare_case(numerics, result, workdir / f"batch{i}") for i in range(2)]
    results, together = vulkan.run_scenarios([b.scenario for b in batch], workdir / "b.json")
    assert together and all(isinstance(s, float) for s in results.values())
    merged = json.loads((workdir / "b.json").read_text())
    uids = [next(iter(r.values()))["uid"] for r in merged["resources"]]
    assert len(uids) == len(set(uids)) and {u[:3] for u in uids} == {"c0_", "c1_"}
    for builder in batch:
        assert _outputs(builder) == _outputs(alone)


def test_a_bad_scenario_in_a_batch_fails_alone(grid_run, tmp_path):
    result, numerics, workdir = grid_run
    good = vulkan.prepare_case(numerics, result, tmp_path / "good")
    bad = vulkan.prepare_case(numerics, result, tmp_path / "bad")
    data = json.loads(bad.scenario.read_text())
    broken = tmp_path / "broken.vgf"
    broken.write_bytes(b"not a vgf")
    next(r for r in data["resources"] if "graph" in r)["graph"]["src"] = str(broken)
    bad.scenario.write_text(json.dumps(data))
    results, together = vulkan.run_scenarios([good.scenario, bad.scenario], tmp_path / "b.json")
    assert not together
    assert isinstance(results[good.scenario], float)
    error = results[bad.scenario]
    assert isinstance(error, vulkan.VulkanRunError)
    assert vulkan.rerun_command(bad.scenario) in str(error)


# ---------------------------------------------------------------------------
# Nearest grid sampling through the hardware sampler
# ---------------------------------------------------------------------------
#: align_corners=True over a 6x10 image: grid coordinate 0 is source index 2.5
#: (rows) and 4.5 (columns), halfway between two texels. The identity grid of
#: odd size 5x9 has 0 in its middle row and column: 13 of 45 pixels are ties
#: that torch rounds down (to the even 2 and 4) and a NEAREST sampler up.
TIE_CASE = FAMILIES["grid_sample"].finish(Case(
    id="unit-grid-rgba-nearest-zeros-ac1-ties",
    family="grid_sample",
    model=lambda: GridSample("nearest", "zeros", True),
    inputs=(InputSpec("image", (1, 4, 6, 10)), InputSpec("grid:identity", (1, 5, 9, 2))),
    input_qspecs=("int8", "int16"),
    output_qspecs=("int8",),
))  # the family resolves its tolerances


@pytest.fixture(scope="module")
def tie_run(tmp_path_factory, stack):
    root = tmp_path_factory.mktemp("vk-ties")
    result = export_model(TIE_CASE.model(), TIE_CASE.make_inputs(), artifacts_root=root / "art",
                          **TIE_CASE.export_kwargs())
    return result, measure(TIE_CASE, result), root


def test_nearest_samples_through_the_sampler_and_ties_round_up(tie_run):
    result, numerics, root = tie_run
    check = vulkan.run_case_on_vulkan(numerics, result, root / "run")
    scenario = json.loads(check.scenario.read_text())
    (sampled,) = [r["image"] for r in scenario["resources"]
                  if "image" in r and r["image"]["format"] == "VK_FORMAT_R8G8B8A8_SNORM"
                  and r["image"]["shader_access"] == "readonly"]
    assert sampled["min_filter"] == sampled["mag_filter"] == "NEAREST"
    # Bit-exact with the reference that rounds ties up ...
    assert check.bit_exact, [t.worst for t in check.tensors]
    # ... which moves the tie pixels (where the two texels differ) from torch's choice.
    (uid,) = check.nearest_ties
    moved, size = check.nearest_ties[uid]
    assert size == 4 * 5 * 9 and 0 < moved <= 4 * 13
    assert check.report_dict()["tensors"][uid]["nearest_ties"] == moved
    torch_rounded = {f"v_{n.name}": v for n, v in numerics.program.values.items()}[uid].numpy()
    vulkan_out = check.outputs[uid].reshape(1, 5, 9, 4).transpose(0, 3, 1, 2)
    assert np.count_nonzero(vulkan_out != torch_rounded) == moved


def test_a_shader_forced_back_to_texel_fetch_fails_the_check(tie_run, tmp_path, monkeypatch):
    """The shader's old nearest path (texelFetch at roundEven(index), a copy
    of torch's rounding instead of the sampler) no longer passes."""
    result, numerics, root = tie_run
    source = vulkan_scenario.SHADER.read_text()
    sampled = "vec4 v = textureLod(image_in, (vec2(ix, iy) + 0.5) / vec2(in_size), 0.0);"
    assert sampled in source
    fetched = tmp_path / "grid_sampler.comp"
    fetched.write_text(source.replace(sampled, (
        "ivec2 p = ivec2(int(roundEven(ix)), int(roundEven(iy)));\n"
        "    bool inside = all(greaterThanEqual(p, ivec2(0))) && all(lessThan(p, in_size));\n"
        "    vec4 v = inside ? texelFetch(image_in, p, 0) : vec4(0.0);")))
    monkeypatch.setattr(vulkan_scenario, "SHADER", fetched)
    check = vulkan.run_case_on_vulkan(numerics, result, tmp_path / "run")
    (problem,) = [p for p in check.problems(0.0) if "integer tensors must be bit-exact" in p]
    assert re.search(r"v_\w+ \(int8\): \d+ of 180 elements differ", problem)


def test_the_tie_fraction_is_bounded(monkeypatch):
    """A case whose ties move more elements than VULKAN_NEAREST_TIES allows fails, saying why."""
    from vgf_conformance.cases.tolerances import VULKAN_NEAREST_TIES
    from vgf_conformance.oracles.vulkan import check as vulkan_check

    checked = vulkan_check.VulkanCheck(Path("s.json"), 0.0, [], nearest_ties={"v_out": (52, 180)})
    assert checked.problems(0.0, dataclasses.replace(VULKAN_NEAREST_TIES, max_fraction=0.3)) == []
    (problem,) = checked.problems(0.0, dataclasses.replace(VULKAN_NEAREST_TIES, max_fraction=0.01))
    assert problem.startswith("v_out: hardware NEAREST's tie rounding moves 52 of 180 elements")
