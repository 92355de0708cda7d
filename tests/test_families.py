"""A family is one module: a toy ``avg_pool2d`` family, declared in a file of
its own and nowhere else, runs through every tier of the suite (export,
delegation, golden, the three numerics comparisons, the shipped .pte, Vulkan)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vgf_conformance.cases import CASES, Case, Family, build_table, load_case_file
from vgf_conformance.cases.tolerances import family_tolerance

REPO = Path(__file__).resolve().parent.parent

TOY_FAMILY = textwrap.dedent('''
    """avg_pool2d: a toy family for the suite's own tests."""
    import torch
    from torch import nn

    from vgf_conformance.cases import Case, Family, InputSpec
    from vgf_conformance.cases.tolerances import family_tolerance
    from vgf_conformance.oracles.compare import Bound


    class AvgPool(nn.Module):
        def __init__(self, kernel: int) -> None:
            super().__init__()
            self.kernel = kernel

        def extra_repr(self) -> str:
            return f"kernel={self.kernel}"

        def forward(self, x):
            return torch.nn.functional.avg_pool2d(x, self.kernel)


    def _cases():
        return [Case(id=f"avgpool-k{k}-int8io", family="avg_pool2d", model=lambda k=k: AvgPool(k),
                     inputs=(InputSpec("smooth", (1, 4, 8, 12)),), input_qspecs=("int8",),
                     output_qspecs=("int8",)) for k in (2, 4)]


    FAMILY = Family("avg_pool2d", __doc__, _cases, family_tolerance(vs_float=Bound(2.0)),
                    quick=frozenset({"avgpool-k2-int8io"}))
''')


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CI": "true"}  # the Vulkan tier is required, as in CI
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "vgf_conformance" / "test_cases.py"), "-p", "no:cacheprovider",
         "--vgf-cases", str(tmp_path / "toy_cases.py"), "--vgf-golden-dir", str(tmp_path / "golden"),
         "--vgf-report", str(tmp_path / "report"), "-q", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_a_family_in_one_file_runs_through_every_tier(tmp_path):
    (tmp_path / "toy_cases.py").write_text(TOY_FAMILY)
    first = _pytest(tmp_path, "--snapshot-update")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    written = sorted(p.name for p in (tmp_path / "golden").iterdir())
    assert written == ["avgpool-k2-int8io.json", "avgpool-k4-int8io.json"]
    assert json.loads((tmp_path / "golden" / written[0]).read_text())["case"]["model"] == "AvgPool(kernel=2)"
    # Every tier of both cases ran and passed (that a golden written so holds
    # on the next run is tests/test_team_repo.py's, for a team's case file).
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    every_tier = {"test_export", "test_delegation", "test_golden", "test_statistics", "test_numerics_vs_fake_quant",
                  "test_numerics_vs_float_dq", "test_numerics_vs_float", "test_pte", "test_vulkan"}
    assert {c["id"]: c["tests"] for c in report["cases"]} == dict.fromkeys(
        ("avgpool-k2-int8io", "avgpool-k4-int8io"), dict.fromkeys(every_tier, "passed"))
    # The quick tier is the family's quick case, every tier of it (collected in a
    # child: --vgf-cases and --vgf-golden-dir configure the process they run in).
    quick = _pytest(tmp_path, "-m", "quick", "--collect-only")
    assert quick.returncode == 0, quick.stdout[-3000:] + quick.stderr[-3000:]
    assert sorted(re.findall(r"::(test_\w+\[[\w.-]+\])$", quick.stdout, re.M)) == sorted(
        f"{test}[avgpool-k2-int8io]" for test in every_tier)
    # the built-in goldens were neither used nor touched
    assert not (REPO / "golden" / "cases" / "avgpool-k2-int8io.json").exists()


def test_case_files_need_their_own_golden_directory(tmp_path):
    (tmp_path / "toy_cases.py").write_text(TOY_FAMILY)
    proc = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "vgf_conformance" / "test_cases.py"),
                           "-p", "no:cacheprovider", "--collect-only", "-q",
                           "--vgf-cases", str(tmp_path / "toy_cases.py")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "--vgf-golden-dir" in proc.stderr


def test_family_declarations_are_checked(tmp_path):
    def family(**overrides):
        case = CASES["resize-bilinear-ac0-up2-int8io"]
        fields = dict(name="resize", doc="x", cases=lambda: [case], tolerance=family_tolerance())
        return Family(**{**fields, **overrides})

    with pytest.raises(ValueError, match="quick names unknown cases"):
        family(quick=frozenset({"nope"})).build()
    with pytest.raises(ValueError, match="expectations names unknown cases"):
        family(expectations={"nope": None}).build()
    with pytest.raises(ValueError, match="say another family"):
        family(name="other").build()
    with pytest.raises(ValueError, match="duplicate case id"):
        build_table([family(), family()])
    with pytest.raises(ValueError, match="unknown oracles"):
        family_tolerance(vs_nothing=None)
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="must define FAMILY"):
        load_case_file(tmp_path / "empty.py")
    with pytest.raises(ValueError, match="is not a file"):
        load_case_file(tmp_path / "missing.py")
    with pytest.raises(ValueError, match="must be lowercase"):
        Case(id="Bad Id", family="x", model=None, inputs=(), input_qspecs=(), output_qspecs=())
