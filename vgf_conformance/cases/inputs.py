"""A case's example inputs: :class:`InputSpec`, generated from the case's
seed (images, smooth images, sampling grids, flows) or read from a team's
sample file (``.npy``/``.pt``, read without executing code).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import pickle
from pathlib import Path, PurePath
from typing import Callable

import numpy
import torch

#: Suffixes of sample-input files: how each is read, without executing code.
SAMPLE_LOADERS = {".npy": "numpy.load(path, allow_pickle=False)",
                  ".pt": "torch.load(path, weights_only=True)"}
#: dtypes a sample-input file may declare (``InputSpec.dtype``).
SAMPLE_DTYPES = ("float32", "float16", "float64", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool")


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One example input: generated from the case's seed, or read from a file.

    kind: "image" (uniform noise in [-1, 1]), "smooth" (a smooth random
    image in [-1, 1]: 5x5 random control points upsampled, so that resizes which sample
    other pixels than the direct resize, such as the split of large
    downscales, stay comparable to float), "image_clip" (uniform in
    [-1.25, 1.25]: beyond the SNORM range, so the int8 boundary clips),
    "grid:<name>" (a sampling grid, see :data:`GRIDS`), "flow" (a small flow
    field in [-0.25, 0.25]), or "file": a sample tensor of the team's
    (:meth:`InputSpec.file`).

    A "file" input names ``path``, a ``.npy`` or ``.pt`` file holding one
    tensor of exactly ``shape`` and ``dtype``; a relative path is relative to
    the directory of the case file that declares it (``--vgf-cases``). Files
    are read without executing code (:data:`SAMPLE_LOADERS`): a pickled
    object array, or a ``.pt`` holding anything but a tensor, is refused.
    """

    kind: str
    shape: tuple[int, ...]
    #: kind "file": the sample's path (``.npy`` or ``.pt``), as declared.
    path: str | None = None
    #: kind "file": the dtype the file holds (:data:`SAMPLE_DTYPES`).
    dtype: str = "float32"
    #: The directory a relative ``path`` resolves against: the case file's
    #: (set by ``Family.build`` from ``Family.root``).
    root: Path | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def file(cls, path: str | PurePath, shape: tuple[int, ...], dtype: str = "float32") -> "InputSpec":
        """A sample tensor from ``path`` (``.npy``/``.pt``), of ``shape`` and ``dtype``."""
        return cls("file", tuple(shape), path=str(path), dtype=dtype)

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple) or not all(isinstance(d, int) and d > 0 for d in self.shape):
            raise ValueError(f"InputSpec.shape must be a tuple of positive ints, got {self.shape!r}")
        if self.kind != "file":
            if self.path is not None:
                raise ValueError(f"InputSpec.path is for kind 'file' only, got kind {self.kind!r} "
                                 f"with path {self.path!r}")
            if not (self.kind in _INPUT_KINDS or self.kind.startswith("grid:")):
                raise ValueError(f"InputSpec.kind must be one of {sorted(_INPUT_KINDS)}, 'file' or "
                                 f"'grid:<{'|'.join(GRIDS)}>', got {self.kind!r}")
            return
        if not self.path:
            raise ValueError("InputSpec.path: an input of kind 'file' needs the path of a .npy or .pt file")
        suffix = PurePath(self.path).suffix.lower()
        if suffix not in SAMPLE_LOADERS:
            raise ValueError(f"InputSpec.path must name a {' or '.join(SAMPLE_LOADERS)} file, "
                             f"got {self.path!r}")
        if self.dtype not in SAMPLE_DTYPES:
            raise ValueError(f"InputSpec.dtype must be one of {SAMPLE_DTYPES}, got {self.dtype!r}")

    @property
    def resolved_path(self) -> Path:
        """The file of a "file" input: ``path``, relative to ``root``."""
        path = Path(self.path)
        if path.is_absolute():
            return path
        if self.root is None:
            raise ValueError(f"InputSpec.path {self.path!r} is relative, but its case was not loaded "
                             "from a case file (relative paths resolve against the case file's "
                             "directory); give an absolute path or declare it in a --vgf-cases file")
        return self.root / path

    def make(self, gen: torch.Generator) -> torch.Tensor:
        if self.kind == "file":
            return self.load()
        if self.kind.startswith("grid:"):
            return _grid(self.kind.split(":", 1)[1], self.shape, gen)
        return _INPUT_KINDS[self.kind](self.shape, gen)

    def load(self) -> torch.Tensor:
        """The tensor of a "file" input, checked against the declared shape and dtype."""
        path = self.resolved_path
        if not path.is_file():
            where = "" if Path(self.path).is_absolute() else " (relative to its case file's directory)"
            raise ValueError(f"InputSpec.path {self.path!r}: no such file{where}")
        tensor = _load_npy(self.path, path) if path.suffix.lower() == ".npy" else _load_pt(self.path, path)
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype != self.dtype:
            raise ValueError(f"InputSpec.dtype: the case declares {self.dtype}, but {self.path!r} holds "
                             f"{dtype} (convert the file, or declare dtype={dtype!r})")
        if tuple(tensor.shape) != self.shape:
            raise ValueError(f"InputSpec.shape: the case declares {self.shape}, but {self.path!r} holds "
                             f"a tensor of shape {tuple(tensor.shape)}")
        return tensor

    def describe(self) -> dict:
        """What the golden says of this input (no machine paths: a file is
        named as declared when relative, by its name otherwise, with the hash
        of its data, so a changed sample shows in review)."""
        described = {"kind": self.kind, "shape": list(self.shape)}
        if self.kind == "file":
            declared = PurePath(self.path)
            data = self.load().contiguous()
            described.update(
                file=declared.as_posix() if not declared.is_absolute() else declared.name,
                dtype=self.dtype,
                sha256_16=hashlib.sha256(data.flatten().view(torch.uint8).numpy().tobytes()).hexdigest()[:16])
        return described


def _load_npy(declared: str, path: Path) -> torch.Tensor:
    try:
        array = numpy.load(path, allow_pickle=False)
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise ValueError(
                f"InputSpec.path {declared!r} holds a pickled object array; sample inputs are read "
                f"without executing code ({SAMPLE_LOADERS['.npy']}): save a numeric array, e.g. "
                "numpy.save(path, array.astype(numpy.float32))") from None
        raise ValueError(f"InputSpec.path {declared!r} is not a readable .npy file: {error}") from None
    except (OSError, EOFError) as error:
        raise ValueError(f"InputSpec.path {declared!r} is not a readable .npy file: {error}") from None
    if not isinstance(array, numpy.ndarray):  # an .npz archive under a .npy name
        raise ValueError(f"InputSpec.path {declared!r} holds a {type(array).__name__}, expected one array "
                         "(numpy.save(path, array))")
    if array.dtype.names is not None:
        raise ValueError(f"InputSpec.path {declared!r} holds a structured array {array.dtype}, "
                         "expected a numeric one")
    # torch.from_numpy needs native byte order and a writable, contiguous array.
    return torch.from_numpy(numpy.array(array, dtype=array.dtype.newbyteorder("="), order="C"))


def _load_pt(declared: str, path: Path) -> torch.Tensor:
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        why = next((line.strip() for line in str(error).splitlines() if "Unsupported global" in line), None)
        if why is None:  # not a pickle of torch.save's (torch tried the legacy format)
            raise ValueError(f"InputSpec.path {declared!r} is not a readable .pt file "
                             "(torch.save(tensor, path) writes one)") from None
        raise ValueError(
            f"InputSpec.path {declared!r} holds objects other than tensors, which are not read "
            f"(sample inputs are read without executing code: {SAMPLE_LOADERS['.pt']}; {why}); "
            "save the tensor alone: torch.save(tensor, path)") from None
    except (RuntimeError, OSError, EOFError) as error:
        raise ValueError(f"InputSpec.path {declared!r} is not a readable .pt file: "
                         f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None
    if not isinstance(value, torch.Tensor):
        what = f"a {type(value).__name__}" + (f" with keys {sorted(map(str, value))[:5]}"
                                                if isinstance(value, dict) else "")
        raise ValueError(f"InputSpec.path {declared!r} holds {what}, expected one tensor "
                         "(torch.save(tensor, path))")
    return value.detach().contiguous().clone()


# ---------------------------------------------------------------------------
# Input generators
# ---------------------------------------------------------------------------
def _affine(theta: list[list[float]]):
    def make(n: int, h: int, w: int) -> torch.Tensor:
        t = torch.tensor([theta], dtype=torch.float32).expand(n, 2, 3)
        return torch.nn.functional.affine_grid(t, [n, 1, h, w], align_corners=False)
    return make


_C, _S = 0.7 * math.cos(math.pi / 6), 0.7 * math.sin(math.pi / 6)
#: Sampling grids by name: identity; zoom (on the centre: coordinates within
#: [-0.5, 0.5]); rotation (30 degrees, scaled so the corners stay inside
#: [-1, 1]); random (uniform in [-1, 1]).
GRIDS: dict[str, Callable] = {
    "identity": _affine([[1, 0, 0], [0, 1, 0]]),
    "zoom": _affine([[0.5, 0, 0.1], [0, 0.5, -0.1]]),
    "rotation": _affine([[_C, -_S, 0], [_S, _C, 0]]),
    "random": None,  # seeded: drawn from the case's generator
}


def _grid(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; known: {sorted(GRIDS)}")
    if name == "random":
        return torch.rand(shape, generator=gen) * 2 - 1
    n, h, w, _ = shape
    return GRIDS[name](n, h, w)


def _smooth(shape, gen: torch.Generator) -> torch.Tensor:
    n, c, h, w = shape
    coarse = torch.rand((n, c, 5, 5), generator=gen) * 2 - 1
    smooth = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)
    return smooth.clamp(-1, 1)


_INPUT_KINDS: dict[str, Callable] = {
    "image": lambda shape, gen: torch.rand(shape, generator=gen) * 2 - 1,
    "smooth": _smooth,
    "image_clip": lambda shape, gen: torch.rand(shape, generator=gen) * 2.5 - 1.25,
    "flow": lambda shape, gen: torch.rand(shape, generator=gen) * 0.5 - 0.25,
}
