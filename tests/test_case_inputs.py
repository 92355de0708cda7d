"""The case API's inputs and options: sample tensors from a team's ``.npy``
and ``.pt`` files (read without executing code, checked against what the case
declares, relative to the case file) and ``export_model`` options by name."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
from pathlib import Path

import numpy
import pytest
import torch

import vgf_conformance.cases.inputs as inputs_module
import vgf_conformance.cases.family as family_module
from vgf_conformance.cases import Case, Family, InputSpec, load_case_file
from vgf_conformance.cases.case import EXPORT_KEYWORDS_SET_ELSEWHERE, EXPORT_OPTIONS, QUANT_CONFIGS
from vgf_conformance.cases.tolerances import family_tolerance
from vgf_export import export_model

SHAPE = (1, 3, 4, 6)

CASE_FILE = textwrap.dedent('''
    """samples: a case file whose input is a sample tensor beside it."""
    from vgf_conformance.cases import Case, Family, InputSpec
    from vgf_conformance.cases.tolerances import family_tolerance
    from sample_models import Half  # a module beside the case file

    def _cases():
        return [Case(id="half-sample-int8io", family="samples", model=Half,
                     inputs=(InputSpec.file("{path}", {shape}, dtype="{dtype}"),),
                     input_qspecs=("int8",), output_qspecs=("int8",))]

    FAMILY = Family("samples", __doc__, _cases, family_tolerance())
''')
MODELS = textwrap.dedent('''
    from torch import nn

    class Half(nn.Module):
        def forward(self, x):
            return x * 0.5
''')


class RunsCode:
    """A pickled object that runs code when it is unpickled: it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.fixture
def isolated(monkeypatch):
    """A process-wide family registry and sys.path of the test's own."""
    monkeypatch.setattr(family_module, "FAMILIES", {})
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "sample_models", raising=False)


def _team(tmp_path: Path, path: str = "samples/frame.npy", shape=SHAPE, dtype="float32") -> Path:
    (tmp_path / "sample_models.py").write_text(MODELS)
    case_file = tmp_path / "cases.py"
    case_file.write_text(CASE_FILE.format(path=path, shape=tuple(shape), dtype=dtype))
    (tmp_path / "samples").mkdir(exist_ok=True)
    return case_file


def _build(case_file: Path) -> Case:
    family_module.FAMILIES.clear()  # each build loads the file anew, as a new run would
    (family,) = load_case_file(case_file)
    (case,) = family.build()
    return case


def _sample() -> numpy.ndarray:
    return numpy.linspace(-1, 1, num=numpy.prod(SHAPE), dtype=numpy.float32).reshape(SHAPE)


# ---------------------------------------------------------------------------
# Reading samples
# ---------------------------------------------------------------------------
def test_a_npy_sample_is_read_relative_to_its_case_file(tmp_path, monkeypatch, isolated):
    case_file = _team(tmp_path)
    numpy.save(tmp_path / "samples" / "frame.npy", _sample())
    monkeypatch.chdir("/")  # the case file's directory decides, not the working directory
    case = _build(case_file)
    (x,) = case.make_inputs()
    assert x.dtype == torch.float32 and torch.equal(x, torch.from_numpy(_sample()))
    described = case.describe()["inputs"][0]
    assert described["file"] == "samples/frame.npy" and described["dtype"] == "float32"
    assert len(described["sha256_16"]) == 16 and str(tmp_path) not in json.dumps(described)


def test_a_pt_sample_is_read(tmp_path, isolated):
    case_file = _team(tmp_path, "samples/frame.pt")
    torch.save(torch.from_numpy(_sample()), tmp_path / "samples" / "frame.pt")
    (x,) = _build(case_file).make_inputs()
    assert torch.equal(x, torch.from_numpy(_sample()))


def test_the_golden_names_a_changed_sample(tmp_path, isolated):
    case_file = _team(tmp_path)
    numpy.save(tmp_path / "samples" / "frame.npy", _sample())
    case = _build(case_file)
    before = case.describe()["inputs"][0]["sha256_16"]
    numpy.save(tmp_path / "samples" / "frame.npy", _sample() * 0.5)
    assert case.describe()["inputs"][0]["sha256_16"] != before


def test_a_missing_sample_stops_the_build_naming_case_and_argument(tmp_path, isolated):
    case_file = _team(tmp_path, "samples/nope.npy")
    with pytest.raises(ValueError, match=r"case half-sample-int8io, input 0: InputSpec.path 'samples/nope.npy': "
                                         r"no such file \(relative to its case file's directory\)"):
        _build(case_file)


def test_a_sample_of_another_suffix_is_refused():
    with pytest.raises(ValueError, match=r"InputSpec.path must name a .npy or .pt file, got 'frame.png'"):
        InputSpec.file("frame.png", SHAPE)
    with pytest.raises(ValueError, match="InputSpec.path: an input of kind 'file' needs"):
        InputSpec("file", SHAPE)
    with pytest.raises(ValueError, match="InputSpec.path is for kind 'file' only"):
        InputSpec("image", SHAPE, path="frame.npy")
    with pytest.raises(ValueError, match="InputSpec.dtype must be one of"):
        InputSpec.file("frame.npy", SHAPE, dtype="float")
    with pytest.raises(ValueError, match="InputSpec.kind must be one of"):
        InputSpec("noise", SHAPE)


@pytest.mark.parametrize("declared, stored, message", [
    ((1, 3, 4, 4), _sample(), r"InputSpec.shape: the case declares \(1, 3, 4, 4\), but 'samples/frame.npy' "
                              r"holds a tensor of shape \(1, 3, 4, 6\)"),
    (SHAPE, _sample().astype(numpy.float64), r"InputSpec.dtype: the case declares float32, but "
                                            r"'samples/frame.npy' holds float64"),
])
def test_a_sample_that_is_not_what_the_case_declares_is_refused(tmp_path, isolated, declared, stored, message):
    case_file = _team(tmp_path, shape=declared)
    numpy.save(tmp_path / "samples" / "frame.npy", stored)
    with pytest.raises(ValueError, match=message):
        _build(case_file)


def test_a_big_endian_npy_is_read_as_its_values(tmp_path, isolated):
    case_file = _team(tmp_path)
    numpy.save(tmp_path / "samples" / "frame.npy", _sample().astype(">f4"))
    (x,) = _build(case_file).make_inputs()
    assert torch.equal(x, torch.from_numpy(_sample()))


def test_a_pickled_object_array_is_refused_without_running_its_code(tmp_path, isolated, monkeypatch):
    marker = tmp_path / "code-ran"
    case_file = _team(tmp_path, shape=(1,))
    numpy.save(tmp_path / "samples" / "frame.npy", numpy.array([RunsCode(marker)], dtype=object),
               allow_pickle=True)
    with pytest.raises(ValueError, match=r"InputSpec.path 'samples/frame.npy' holds a pickled object array; "
                                         r"sample inputs are read without executing code"):
        _build(case_file)
    assert not marker.exists()
    # The fault this guards against: a loader that unpickles runs the file's code.
    real_load = numpy.load
    monkeypatch.setattr(inputs_module.numpy, "load", lambda path, **kw: real_load(path, allow_pickle=True))
    with pytest.raises(Exception):
        _build(case_file)
    assert marker.exists()


def test_a_pt_holding_objects_is_refused_without_running_their_code(tmp_path, isolated, monkeypatch):
    marker = tmp_path / "code-ran"
    case_file = _team(tmp_path, "samples/frame.pt")
    torch.save({"frame": torch.zeros(SHAPE), "hook": RunsCode(marker)}, tmp_path / "samples" / "frame.pt")
    with pytest.raises(ValueError, match=r"InputSpec.path 'samples/frame.pt' holds objects other than tensors"
                                         r"[\s\S]*torch.load\(path, weights_only=True\)"):
        _build(case_file)
    assert not marker.exists()
    real_load = torch.load
    monkeypatch.setattr(inputs_module.torch, "load", lambda path, **kw: real_load(path, weights_only=False))
    with pytest.raises(ValueError):
        _build(case_file)
    assert marker.exists()


def test_a_pt_holding_something_else_than_a_tensor_is_refused(tmp_path, isolated):
    case_file = _team(tmp_path, "samples/frame.pt")
    torch.save({"frame": torch.zeros(SHAPE)}, tmp_path / "samples" / "frame.pt")
    with pytest.raises(ValueError, match=r"InputSpec.path 'samples/frame.pt' holds a dict with keys \['frame'\], "
                                         r"expected one tensor"):
        _build(case_file)
    (tmp_path / "samples" / "frame.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=r"InputSpec.path 'samples/frame.pt' is not a readable .pt file"):
        _build(case_file)


def test_a_relative_sample_outside_a_case_file_is_refused():
    case = Case(id="half", family="x", model=None, inputs=(InputSpec.file("frame.npy", SHAPE),),
                input_qspecs=("int8",), output_qspecs=("int8",))
    with pytest.raises(ValueError, match=r"case half, input 0: InputSpec.path 'frame.npy' is relative, but its "
                                         r"case was not loaded from a case file"):
        case.make_inputs()


def test_a_sample_draws_nothing_from_the_seed(tmp_path):
    numpy.save(tmp_path / "frame.npy", _sample())
    sample = InputSpec.file(str(tmp_path / "frame.npy"), SHAPE)
    noise = InputSpec("image", SHAPE)
    io = dict(family="x", model=None, output_qspecs=("int8",))
    alone = Case(id="seeded", inputs=(noise,), input_qspecs=("int8",), **io).make_inputs()
    after = Case(id="seeded", inputs=(sample, noise), input_qspecs=("int8", "int8"), **io).make_inputs()
    assert torch.equal(alone[0], after[1])


# ---------------------------------------------------------------------------
# export_model options
# ---------------------------------------------------------------------------
def test_every_export_model_keyword_is_a_case_option_or_set_elsewhere():
    keywords = {name for name, p in inspect.signature(export_model).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keywords == (set(EXPORT_OPTIONS) - {"quant_config"}) | set(EXPORT_KEYWORDS_SET_ELSEWHERE)


def _case(**options) -> Case:
    return Case(id="opts", family="x", model=None, inputs=(InputSpec("image", SHAPE),), input_qspecs=("int8",),
                output_qspecs=("int8",), options=options)


@pytest.mark.parametrize("options, message", [
    (dict(quantize_grid_sample_outptu=False), r"options \['quantize_grid_sample_outptu'\] are not export_model "
                                              r"options a case sets; known: \["),
    (dict(quantized_input_qspecs=["int8"]), r"quantized_input_qspecs \(set by Case.input_qspecs\)"),
    (dict(module_name_quant_configs={"head": "int4"}), r"module_name_quant_configs'\] values must be one of"),
    (dict(module_name_quant_configs=["head"]), r"module_name_quant_configs'\] must be a dict"),
    (dict(quant_config="a16w8", module_name_quant_configs={"": "a16w8"}), "both name the whole model"),
    (dict(grid_sampler_grid_input_qspec="int4"), r"grid_sampler_grid_input_qspec'\] must be one of"),
    (dict(enable_pt2e_quantization="no"), r"enable_pt2e_quantization'\] must be True or False"),
    (dict(disable_workarounds="bilinear-scale-factor"), r"disable_workarounds'\] must be a tuple"),
    (dict(grid_sampler_lowering="native"), r"grid_sampler_lowering'\] must be one of \('project', 'upstream'\)"),
])
def test_bad_options_are_refused_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        _case(**options)


def test_per_module_quant_configs_are_given_by_name():
    case = _case(module_name_quant_configs={"head": "a16w8", "flow": None})
    configs = case.export_kwargs()["module_name_quant_configs"]
    assert configs["flow"] is None
    assert type(configs["head"]) is type(QUANT_CONFIGS["a16w8"][0]())
    assert case.internal_precision == "int8"
    whole = _case(module_name_quant_configs={"": "a16w8"})
    assert whole.internal_precision == "int16" == _case(quant_config="a16w8").internal_precision
    assert set(whole.export_kwargs()["module_name_quant_configs"]) == {""}
    # the golden states them by name
    assert _case(module_name_quant_configs={"flow": None}).options == {"module_name_quant_configs": {"flow": None}}


def test_a_family_built_outside_a_case_file_has_no_root():
    family = Family("x", "x", lambda: [], family_tolerance())
    assert family.root is None and family.build() == []
