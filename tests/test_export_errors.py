"""Bad input: each a ValueError naming the argument and what was expected;
nothing written by an earlier export is replaced without the flag."""

import pytest
import torch

from vgf_conformance.cases.op_models import GridSample, Resize, TwoInTwoOut
from vgf_export import export_model, image_qspec

RESIZE = Resize(scale_factor=0.5, align_corners=False)
X = torch.rand(1, 4, 8, 8)


def _export(tmp_path, model=RESIZE, inputs=(X,), **kwargs):
    kwargs.setdefault("quantized_input_qspecs", [image_qspec()] * len(inputs))
    kwargs.setdefault("quantized_output_qspecs", [image_qspec()])
    return export_model(model, inputs, artifacts_root=tmp_path / "art", **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(inputs=()), "requires at least one model input"),
        (dict(inputs=([1.0],)), r"model_inputs\[0\] must be a torch.Tensor"),
        (dict(quantized_input_qspecs=[]), "quantized_input_qspecs must have one entry per model input.*got 0 qspecs for 1 inputs"),
        (dict(quantized_output_qspecs=[None, None]), "quantized_output_qspecs must have one entry per model output.*got 2 qspecs for 1 outputs"),
        (dict(model=TwoInTwoOut(), inputs=(X, X), quantized_output_qspecs=[None]), "got 1 qspecs for 2 outputs"),
        (dict(quantized_input_qspecs=["int8"]), r"quantized_input_qspecs\[0\] must be a QuantizationSpec or None, got str"),
        (dict(quantized_output_qspecs=[1]), r"quantized_output_qspecs\[0\] must be a QuantizationSpec or None, got int"),
        (dict(module_name_quant_configs={"backbone": None}), r"module_name_quant_configs names unknown modules \['backbone'\]"),
        (dict(model=GridSample(), inputs=(torch.rand(1, 4, 4, 8, 8), torch.rand(1, 2, 2, 2, 3))), "grid_sample needs a 4-D image"),
        (dict(model=GridSample(), inputs=(X, torch.rand(1, 4, 4, 3))), r"grid_sample needs a 4-D grid \[N, H_out, W_out, 2\], got shape \[1, 4, 4, 3\]"),
        (dict(model="not a module"), "model must be a torch.nn.Module"),
    ],
    ids=[
        "empty-inputs", "non-tensor-input", "input-qspec-count", "output-qspec-count",
        "output-qspec-count-two-outputs", "input-qspec-type", "output-qspec-type",
        "unknown-module-name", "5d-image", "grid-last-dim", "not-a-module",
    ],
)
def test_bad_input(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        _export(tmp_path, **kwargs)
    assert not (tmp_path / "art").exists()  # refused before writing anything


def test_existing_artifacts_are_not_replaced(tmp_path):
    art = tmp_path / "art"
    art.mkdir()
    (art / "program.pte").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="overwrite_artifacts=True"):
        _export(tmp_path, enable_pt2e_quantization=False)
    assert (art / "program.pte").read_bytes() == b"mine"
    result = _export(tmp_path, enable_pt2e_quantization=False, overwrite_artifacts=True)
    assert result.artifacts.program.read_bytes() != b"mine"
