"""The patch registry: version gating, idempotence, and the converter timeout."""

import stat
import subprocess

import pytest
import torch

from vgf_conformance.cases.op_models import Resize
from vgf_export import ExportStageError, export_model, patches
from vgf_export.patches import Patch


def test_every_patch_says_what_it_fixes_and_where():
    assert patches.registered_patches()
    for patch in patches.registered_patches():
        assert patch.name and patch.fixes and patch.upstream and patch.applies_to
        patch.is_needed("1.5.1")  # the specifier parses


def test_patches_apply_once(monkeypatch):
    calls = []

    def apply():
        calls.append(1)
        return lambda: calls.append(-1)

    monkeypatch.setattr(patches, "_REGISTRY", {})
    monkeypatch.setattr(patches, "_APPLIED", {})
    patches.register(Patch("p", "fixes x", "issue", ">=1.0", apply))
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == ["p"]
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == ["p"]
    assert calls == [1]
    patches.revert_patch("p")
    assert calls == [1, -1] and patches.applied_patches() == []


def test_patch_outside_its_versions_is_not_applied(monkeypatch):
    monkeypatch.setattr(patches, "_REGISTRY", {})
    monkeypatch.setattr(patches, "_APPLIED", {})
    patches.register(Patch("old", "fixes 1.2", "issue", "<1.3", lambda: (lambda: None)))
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == []
    assert patches.apply_arm_backend_monkey_patch("1.2.0") == ["old"]


def test_duplicate_names_are_refused(monkeypatch):
    monkeypatch.setattr(patches, "_REGISTRY", {})
    patch = Patch("p", "x", "y", ">=1", lambda: (lambda: None))
    patches.register(patch)
    with pytest.raises(ValueError, match="already registered"):
        patches.register(patch)


def test_disabled_patch_stays_off(monkeypatch):
    monkeypatch.setattr(patches, "_REGISTRY", {})
    monkeypatch.setattr(patches, "_APPLIED", {})
    monkeypatch.setattr(patches, "_DISABLED", set())
    patches.register(Patch("p", "x", "y", ">=1", lambda: (lambda: None)))
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == ["p"]
    patches.disable_patch("p")
    assert patches.apply_arm_backend_monkey_patch("1.5.1") == []
    with pytest.raises(ValueError, match="no patch named 'q'"):
        patches.disable_patch("q")


def test_revert_of_unapplied_patch_names_it():
    with pytest.raises(ValueError, match="'nope' is not applied"):
        patches.revert_patch("nope")


def test_converter_timeout_fails_the_convert_stage_and_kills_the_converters_children(tmp_path, monkeypatch):
    # The converter starts a child of its own, which holds its output pipes:
    # killed with the converter's process group, not left running.
    lasting = "61.7"  # seconds the child lives: a number no other sleep here uses
    fake = tmp_path / "model-converter"
    fake.write_text(f"#!/bin/sh\nsleep {lasting} &\nexec sleep 60\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("MODEL_CONVERTER_PATH", str(fake))
    monkeypatch.setenv(patches.CONVERTER_TIMEOUT_ENV, "1")
    with pytest.raises(ExportStageError) as info:
        export_model(
            Resize(scale_factor=0.5, align_corners=False),
            (torch.rand(1, 4, 8, 8),),
            artifacts_root=tmp_path / "art",
            enable_pt2e_quantization=False,
        )
    assert info.value.stage == "convert"
    assert "timed out" in str(info.value)
    left = subprocess.run(["pgrep", "-f", f"sleep {lasting}"], capture_output=True, text=True).stdout.split()
    subprocess.run(["pkill", "-f", f"sleep {lasting}"], check=False)
    assert not left, "the converter's child outlived the timeout"


def test_converter_timeout_must_be_a_number(monkeypatch):
    monkeypatch.setenv(patches.CONVERTER_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match="VGF_EXPORT_CONVERTER_TIMEOUT must be a number"):
        patches._converter_timeout()


@pytest.mark.parametrize("size_in, size_out, scale", [(7, 10, 1.5), (5, 12, 2.5), (10, 3, 1 / 3), (8, 16, 2.0),
                                                      (16, 8, 0.5), (12, 18, 1.5)])
def test_bilinear_scale_factor_encodes_pytorchs_mapping(size_in, size_out, scale):
    """TOSA RESIZE: in = (out * scale_d + offset) / scale_n must be PyTorch's
    (out + 0.5) / s - 0.5; for exact multiples it equals the size-ratio encoding."""
    from fractions import Fraction

    from executorch.backends.arm._passes.rewrite_upsample import RewriteUpsamplePass
    from vgf_export.patches import _bilinear_parameters_from_scale

    n, d, offset, border = _bilinear_parameters_from_scale(size_in, size_out, scale)
    s = Fraction(scale).limit_denominator(1000)
    for y in range(size_out):
        assert Fraction(y * d + offset, n) == (y + Fraction(1, 2)) / s - Fraction(1, 2)
    assert border == d * (size_out - 1) - n * (size_in - 1) + offset
    if size_in * s == size_out:  # exact: the same as ExecuTorch's own encoding
        real = RewriteUpsamplePass.get_resize_parameters_1d  # patched or not: the patch is off here
        token = patches.BILINEAR_SCALE_FACTOR.set(False)
        try:
            assert tuple(real(size_in, size_out, False, "bilinear", scale)) == (n, d, offset, border)
        finally:
            patches.BILINEAR_SCALE_FACTOR.reset(token)
