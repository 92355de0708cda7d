"""The Vulkan scenario of a grid sampler at batch > 1 and of one-channel images."""

import json

import pytest

from vgf_conformance.cases import FAMILIES, Case, InputSpec
from vgf_conformance.cases.op_models import GridSample
from vgf_conformance.oracles import vulkan
from vgf_conformance.oracles.numerics import measure
from vgf_export import export_model


def _case(channels: int, batch: int) -> Case:
    return FAMILIES["grid_sample"].finish(Case(
        id=f"unit-grid-c{channels}-n{batch}", family="grid_sample",
        model=lambda: GridSample("bilinear", "zeros", False),
        inputs=(InputSpec("image", (batch, channels, 12, 16)), InputSpec("grid:rotation", (batch, 6, 10, 2))),
        input_qspecs=("int8", "int16"), output_qspecs=("int8",)))


@pytest.mark.parametrize("channels,batch", [(4, 2), (1, 1)])
def test_batch_and_channels_run_bit_exact(stack, tmp_path, channels, batch):
    case = _case(channels, batch)
    result = export_model(case.model(), case.make_inputs(), artifacts_root=tmp_path / "art", **case.export_kwargs())
    numerics = measure(case, result)
    check = vulkan.run_case_on_vulkan(numerics, result, tmp_path / "vk")
    assert check.bit_exact, check.problems(0.0)
    scenario = json.loads(check.scenario.read_text())
    commands = [next(iter(c.values()))["shader_ref"] for c in scenario["commands"] if "dispatch_compute" in c]
    images = [r["image"] for r in scenario["resources"] if "image" in r]
    if batch == 1:
        assert all("offset" not in i["memory_group"] for i in images)
        assert commands == ["grid_sampler0"]
    else:
        # per element: copy image and grid in, sample, copy the output back
        assert len([c for c in commands if c.startswith("grid_sampler0_b")]) == batch
        assert len([c for c in commands if c.startswith("copy_")]) == 3 * batch
        assert {i["dims"][0] for i in images} == {1}
