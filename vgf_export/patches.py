"""Named patches of the Arm backend, each applied only where it is needed.

Every :class:`Patch` states what it fixes, the upstream issue, and the
ExecuTorch versions it applies to (a PEP 440 specifier); a patch of torch
itself also names the torch versions it was checked against. The registry is
applied by :func:`apply_arm_backend_monkey_patch`: idempotent, and a patch
whose version range excludes the installed ExecuTorch (or torch) is not
applied.

Here: fixes of the backend's behaviour (the converter timeout, the bilinear
scale factor). Nothing here touches torch itself; the suite registers its own
speed patches of torch.export (:mod:`vgf_conformance.speed_patches`, opt-in)
through :func:`register`, which change how long an export takes and never
what it computes ("Speed, same result." in their ``fixes``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import types
from importlib.metadata import version as _dist_version
from typing import Callable

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from vgf_export import process_group


@dataclasses.dataclass(frozen=True)
class Patch:
    name: str
    fixes: str
    upstream: str
    applies_to: str  # PEP 440 specifier of executorch versions
    apply: Callable[[], Callable[[], None]]  # applies; returns its undo
    #: PEP 440 specifier of torch versions ("" = any): for patches of torch
    #: itself, the versions whose code the patch was checked against.
    torch_applies_to: str = ""

    def is_needed(self, executorch_version: str, torch_version: str | None = None) -> bool:
        if Version(executorch_version) not in SpecifierSet(self.applies_to):
            return False
        if not self.torch_applies_to:
            return True
        torch_version = torch_version or installed_torch_version()
        # "2.13.0+cpu" is 2.13.0 (a local version label is not a different release).
        return Version(Version(torch_version).public) in SpecifierSet(self.torch_applies_to)


_REGISTRY: dict[str, Patch] = {}
_APPLIED: dict[str, Callable[[], None]] = {}
_DISABLED: set[str] = set()
#: Patches whose apply() found the code it patches not as checked: name -> why.
_NOT_APPLICABLE: dict[str, str] = {}


class PatchNotApplicable(RuntimeError):
    """Raised by a patch's apply() (before it changes anything) when the code
    it would patch is not the code it was checked against. The patch is left
    off for the process; the export goes on without it. For patches that only
    save time: a fix whose absence changes results must not raise this."""


def register(patch: Patch) -> Patch:
    if patch.name in _REGISTRY:
        raise ValueError(f"patch name {patch.name!r} is already registered")
    _REGISTRY[patch.name] = patch
    return patch


def registered_patches() -> list[Patch]:
    return list(_REGISTRY.values())


def installed_executorch_version() -> str:
    return _dist_version("executorch")


def installed_torch_version() -> str:
    return _dist_version("torch")


def apply_arm_backend_monkey_patch(executorch_version: str | None = None) -> list[str]:
    """Apply every registered patch needed on ``executorch_version`` (default:
    the installed one). Returns the names of the patches now in effect."""
    version = executorch_version or installed_executorch_version()
    for patch in _REGISTRY.values():
        if patch.name in _DISABLED:
            continue
        if patch.name in _APPLIED or patch.name in _NOT_APPLICABLE:
            continue
        if patch.is_needed(version):
            try:
                _APPLIED[patch.name] = patch.apply()
            except PatchNotApplicable as reason:
                _NOT_APPLICABLE[patch.name] = str(reason)
    return sorted(_APPLIED)


def not_applicable_patches() -> dict[str, str]:
    """Patches left off because the code they patch was not as checked: name -> why."""
    return dict(_NOT_APPLICABLE)


def applied_patches() -> list[str]:
    return sorted(_APPLIED)


def revert_patch(name: str) -> None:
    """Undo one applied patch (a later apply_arm_backend_monkey_patch() applies it again)."""
    if name not in _APPLIED:
        raise ValueError(f"patch {name!r} is not applied; applied: {applied_patches()}")
    _APPLIED.pop(name)()


def disable_patch(name: str) -> None:
    """Revert a patch and keep it off in this process (to show it is still needed)."""
    if name not in _REGISTRY:
        raise ValueError(f"no patch named {name!r}; registered: {sorted(_REGISTRY)}")
    _DISABLED.add(name)
    if name in _APPLIED:
        revert_patch(name)


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------
#: Seconds model-converter may run for one delegate (env override).
CONVERTER_TIMEOUT_ENV = "VGF_EXPORT_CONVERTER_TIMEOUT"
DEFAULT_CONVERTER_TIMEOUT = 300.0


def _converter_timeout() -> float:
    raw = os.environ.get(CONVERTER_TIMEOUT_ENV, "")
    try:
        return float(raw) if raw else DEFAULT_CONVERTER_TIMEOUT
    except ValueError:
        raise ValueError(
            f"{CONVERTER_TIMEOUT_ENV} must be a number of seconds, got {raw!r}"
        ) from None


def _apply_converter_timeout() -> Callable[[], None]:
    from executorch.backends.arm.vgf import backend as vgf_backend

    real = vgf_backend.subprocess

    def run(command, **kwargs):
        # In its own process group: a timeout kills the converter's children too.
        kwargs.setdefault("timeout", _converter_timeout())
        return process_group.run(command, **kwargs)

    proxy = types.SimpleNamespace(
        **{name: getattr(real, name) for name in dir(real) if not name.startswith("__")}
    )
    proxy.run = run
    vgf_backend.subprocess = proxy

    def undo() -> None:
        vgf_backend.subprocess = real

    return undo


register(
    Patch(
        name="model-converter-timeout",
        fixes=(
            "ExecuTorch runs model-converter with no timeout, so a hanging "
            "converter hangs the export; with the patch it runs in its own "
            "process group, killed with it after "
            f"${CONVERTER_TIMEOUT_ENV} seconds (default {DEFAULT_CONVERTER_TIMEOUT:g}), "
            "and the export fails at the convert stage."
        ),
        upstream="none filed: vgf_compile() in executorch/backends/arm/vgf/backend.py",
        applies_to=">=1.3",
        apply=_apply_converter_timeout,
    )
)


#: Whether the bilinear-scale-factor patch acts in the current export (the
#: "bilinear-scale-factor" workaround; export_model turns it off per export).
BILINEAR_SCALE_FACTOR = contextvars.ContextVar("bilinear_scale_factor", default=True)


def _bilinear_parameters_from_scale(input_size, output_size, scale_factor):
    """TOSA RESIZE terms of PyTorch's bilinear (align_corners=False) with an
    explicit factor s: source = (dst + 0.5) / s - 0.5, i.e. scale 2*num/2*den
    of s = num/den, offset den - num, and the border the spec derives."""
    import sympy

    ratio = sympy.nsimplify(scale_factor, tolerance=1e-6, rational=True)
    num, den = (int(v) for v in ratio.as_numer_denom())
    scale_n, scale_d = 2 * num, 2 * den
    offset = scale_d // 2 - scale_n // 2
    border = scale_d * (output_size - 1) - scale_n * (input_size - 1) + offset
    return scale_n, scale_d, offset, border


def _apply_bilinear_scale_factor() -> Callable[[], None]:
    from executorch.backends.arm._passes.rewrite_upsample import RewriteUpsamplePass

    real = RewriteUpsamplePass.get_resize_parameters_1d

    def parameters(input_size, output_size, align_corners, resize_mode="bilinear", scale_factor=None):
        if (BILINEAR_SCALE_FACTOR.get() and resize_mode == "bilinear" and not align_corners
                and scale_factor is not None and isinstance(input_size, int)
                and isinstance(output_size, int)):
            return _bilinear_parameters_from_scale(input_size, output_size, scale_factor)
        return real(input_size, output_size, align_corners, resize_mode, scale_factor)

    RewriteUpsamplePass.get_resize_parameters_1d = staticmethod(parameters)

    def undo() -> None:
        RewriteUpsamplePass.get_resize_parameters_1d = staticmethod(real)

    return undo


register(
    Patch(
        name="bilinear-scale-factor",
        fixes=(
            "RewriteUpsamplePass encodes a bilinear (align_corners=False) RESIZE from the "
            "output/input size ratio even when an explicit scale factor is given; PyTorch samples "
            "with the factor (recompute_scale_factor False/None), so where floor(in * s) is not an "
            "exact multiple the lowered program samples elsewhere (24 to 194 LSB). The patch encodes "
            "the factor, as 1.5 already does for nearest (#22437). Exact multiples are unchanged."
        ),
        upstream="none filed; reproduction in docs/divergences/bilinear_scale_factor.py",
        applies_to=">=1.5,<1.6",
        apply=_apply_bilinear_scale_factor,
    )
)

