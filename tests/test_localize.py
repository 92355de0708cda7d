"""Localization (vgf_conformance/oracles/localize.py): a fault injected at one
op of the stack is named at that op, and an unbroken export names none."""

from __future__ import annotations

import numpy as np
import pytest

from vgf_conformance.cases import CASES
from vgf_conformance.oracles.localize import Localization, Row, localize
from vgf_conformance.oracles.tosa_log import parse_dump
from vgf_conformance.selftest.faults import get

_DUMP = """Node type: RESCALE ID: 8 Eval Count: 1
   Output[0]  Name: t0 DType=INT8 isValid=1 Rank=4 Shape=[1, 1, 2, 2, ]
Name: t0 DType=INT8 isValid=1 Rank=4 Shape=[1, 1, 2, 2, ]
[[[[ 1  -2 ]
[ 3  127 ]
]
]
]

Name: f0 DType=FP32 isValid=1 Rank=1 Shape=[2, ]
[ 0.5  1.25 ]
Name: c0 DType=INT32 isValid=1 Rank=1 Shape=[1, ]
[ -5096 ]
"""


def test_the_reference_models_dump_is_read_by_name_shape_and_integer_values():
    tensors = parse_dump(_DUMP)
    assert set(tensors) == {"t0", "c0"}  # float tensors are not compared
    np.testing.assert_array_equal(tensors["t0"], np.array([1, -2, 3, 127]).reshape(1, 1, 2, 2))
    assert tensors["c0"].tolist() == [-5096]


def test_the_first_op_beyond_its_local_bounds_is_named():
    def row(index, local, bias=0.0, elements=100):
        return Row(0, index, "RESCALE", f"t{index}", f"n{index}", local, bias, 9.0, 0.0, 1, elements)

    assert Localization("c", [row(1, 1.0, 0.6), row(2, 1.0, 0.9), row(3, 5.0)]).first.op_index == 2
    assert Localization("c", [row(1, 1.0, 0.9, elements=10), row(3, 5.0)]).first.op_index == 3  # too few for a bias
    assert Localization("c", [row(1, 1.0, -0.7)]).first is None


def _localized(tmp_path, case_id: str, fault: str | None) -> Localization:
    undo = get(fault).apply() if fault else None
    try:
        return localize(CASES[case_id], tmp_path / (fault or "none"))
    finally:
        if undo:
            undo()


@pytest.mark.parametrize("case_id, fault, op, source", [
    ("conv-resize-conv-up2-int8io", "conv2d-pad-shifted", "RESCALE", "conv2d"),  # the conv's requantized output
    ("model-unet-64x64-int8io", "concat-inputs-reversed", "CONCAT", "cat"),
    ("model-unet-64x64-int8io", "maxpool-window-grown", "MAX_POOL2D", "max_pool2d"),
])
def test_an_injected_fault_is_named_at_its_op(tmp_path, case_id, fault, op, source):
    found = _localized(tmp_path, case_id, fault)
    assert found.first is not None and (found.first.op, found.first.source) == (op, source), found.describe()
    assert found.first.local_lsb > 1


def test_an_unbroken_export_names_no_op(tmp_path):
    found = _localized(tmp_path, "model-unet-64x64-int8io", None)
    assert found.first is None and len(found.rows) >= 10, found.describe()
