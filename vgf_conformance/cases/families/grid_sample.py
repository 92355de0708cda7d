"""``F.grid_sample``: RGB and RGBA images, bilinear and nearest, the three
padding modes, both align_corners, four grids (identity, zoom, rotation,
random); an int8 (SNORM8) grid instead of the int16 (SNORM16) default; the
sampler's output left in float; float, int16 and mixed IO, PT2E off; clipped
images; batch 2 and 4; grids larger and smaller than the image; coordinates
beyond [-1, 1]; one- and two-channel images.

Traits this family gives its cases: ``int8-grid`` / ``int8-grid-nearest``
(an SNORM8 grid), ``clipped-inputs``, ``clipped-grid`` /
``clipped-grid-nearest`` (the SNORM16 grid clips coordinates beyond [-1, 1]:
given by ``grid_case`` to every ``beyond`` grid with zeros or reflection
padding and a quantized grid).
"""

from __future__ import annotations

import vgf_conformance.cases.op_models as models
from vgf_conformance.cases.case import Case, io_suffix
from vgf_conformance.cases.inputs import InputSpec
from vgf_conformance.cases.family import Family
from vgf_conformance.cases.tolerances import family_tolerance
from vgf_conformance.oracles.compare import EXACT, Bound

IMAGE = (12, 16)  # H, W of the sampled image (non-square on purpose)
#: H, W of the grid and the output. Identity and zoom grids have the image's
#: size: at (6, 10) their coordinates land on texel ties (x.5), where nearest
#: sampling of a quantized grid picks either neighbour.
OUT = {"identity": IMAGE, "zoom": IMAGE, "rotation": (6, 10), "random": (6, 10)}
GRID_NAMES = ("identity", "zoom", "rotation", "random")
#: Grids beyond the named ones, as input kinds: "beyond" is uniform in
#: [-1.25, 1.25] (the ``image_clip`` input kind), so a third of the
#: coordinates fall outside the image and the padding mode decides.
GRID_INPUT = {"beyond": ("image_clip",)}
OUT["beyond"] = OUT["random"]
#: The default IO: an SNORM8 image, an SNORM16 grid, an SNORM8 output.
DEFAULT_IO = (("int8", "int16"), ("int8",))

# The pull-request tier, chosen by coverage (python -m vgf_conformance coverage
# --from-scratch; tests/test_coverage.py): with the other families' quick cases,
# every lowering feature of the full matrix at the least recorded time. Each
# case with the features only it brings to the tier.
QUICK = frozenset({
    "grid-c1-bilinear-zeros-ac0-rotation-int8io",  # a one-channel (not RGBA) contiguous image
    "grid-rgb-bilinear-reflection-ac1-zoom-int8io",  # bilinear reflection, align_corners
    "grid-rgb-bilinear-zeros-ac0-rotation-fp",  # a float grid and image; PAD FP32
    "grid-rgba-bilinear-border-ac1-random-int8io",  # stack: the quantizer's border/align_corners configs
    "grid-rgba-bilinear-border-ac1-zoom-int8io",  # stack: quantization_config's other branch
    "grid-rgba-nearest-reflection-ac1-random-int8io",  # nearest reflection, align_corners
    "grid-rgba-nearest-zeros-ac0-random-floatout",  # the output left float
    "grid-rgba-nearest-zeros-ac0-random-int8grid-int8io",  # an int8 grid
})


def grid_case(channels: int, mode: str, padding: str, ac: bool, grid: str, *,
              tag: str = "", io=DEFAULT_IO, options=None, image_kind="image", batch: int = 1,
              out: tuple[int, int] | None = None, traits=()) -> Case:
    """One grid_sample case; ``int8io`` in its id stands for the default IO.

    ``batch``: N of image and grid (``-n2`` in the id); ``out``: the grid's
    (and output's) H, W instead of the grid's default (``-out24x32``);
    ``grid="beyond"``: uniform coordinates in [-1.25, 1.25] (beyond the
    image, where the padding mode decides)."""
    color = {1: "c1", 2: "c2", 3: "rgb", 4: "rgba"}[channels]
    size = f"-out{out[0]}x{out[1]}" if out else ""
    batch_tag = f"-n{batch}" if batch != 1 else ""
    base = f"grid-{color}-{mode}-{padding}-ac{int(ac)}-{grid}{size}{batch_tag}{tag}"
    case_id = f"{base}-int8io" if io == DEFAULT_IO else f"{base}-{io_suffix(*io)}"
    if options and options.get("enable_pt2e_quantization") is False:
        case_id = f"{base}-fp"
    if tag == "-floatout":
        case_id = base
    traits = set(traits)
    if (options or {}).get("grid_sampler_grid_input_qspec") == "int8":
        traits.add("int8-grid-nearest" if mode == "nearest" else "int8-grid")
    if image_kind == "image_clip":
        traits.add("clipped-inputs")
    if grid in GRID_INPUT and padding != "border" and (options or {}).get("enable_pt2e_quantization") is not False:
        # A grid beyond [-1, 1] is clipped by the grid's SNORM qspec (also behind a
        # float grid input: the sampler's qspec quantizes it inside); border
        # padding clamps to the same edge, PT2E off keeps the coordinates.
        traits.add("clipped-grid-nearest" if mode == "nearest" else "clipped-grid")
    return Case(
        id=case_id,
        family="grid_sample",
        model=lambda: models.GridSample(mode, padding, ac),
        inputs=(
            InputSpec(image_kind, (batch, channels, *IMAGE)),
            InputSpec(*GRID_INPUT.get(grid, (f"grid:{grid}",)), (batch, *(out or OUT[grid]), 2)),
        ),
        input_qspecs=io[0],
        output_qspecs=io[1],
        options=dict(options or {}),
        traits=frozenset(traits),
    )


def _cases() -> list[Case]:
    cases = [
        grid_case(c, mode, padding, ac, grid)
        for c in (3, 4)
        for mode in ("bilinear", "nearest")
        for padding in ("zeros", "border", "reflection")
        for ac in (False, True)
        for grid in GRID_NAMES
    ]
    for c in (3, 4):
        for mode in ("bilinear", "nearest"):
            # An int8 (SNORM8) grid instead of the default int16.
            cases += [grid_case(c, mode, "zeros", False, grid, tag="-int8grid", io=(("int8", "int8"), ("int8",)),
                                options=dict(grid_sampler_grid_input_qspec="int8"))
                      for grid in ("identity", "rotation", "random")]
            # The sampler's output left in float (quantize_grid_sample_output=False).
            cases += [grid_case(c, mode, "zeros", False, grid, tag="-floatout", io=(("int8", "int16"), ("float",)),
                                options=dict(quantize_grid_sample_output=False))
                      for grid in ("rotation", "random")]
    for c in (3, 4):  # other IO: float image, float grid, int16, PT2E off, clipped images
        cases += [
            grid_case(c, "bilinear", "zeros", False, "rotation", io=(("float", "int16"), ("int8",))),
            grid_case(c, "bilinear", "zeros", False, "rotation", io=(("int8", "float"), ("int8",))),
            grid_case(c, "bilinear", "zeros", False, "rotation", io=(("float", "float"), ("float",))),
            grid_case(c, "bilinear", "border", False, "random", io=(("int16", "int16"), ("int16",))),
            grid_case(c, "bilinear", "zeros", False, "rotation", options=dict(enable_pt2e_quantization=False)),
            grid_case(c, "bilinear", "zeros", False, "random", tag="-clip", image_kind="image_clip"),
        ]
    return cases + _dimension_cases()


def _dimension_cases() -> list[Case]:
    """Batch, grid size, coordinates beyond [-1, 1], one- and two-channel images."""
    cases = [
        # Batch > 1: one image per batch element on Vulkan.
        grid_case(4, "bilinear", "zeros", False, "rotation", batch=2),
        grid_case(3, "nearest", "border", True, "random", batch=2),
        grid_case(4, "bilinear", "reflection", False, "random", batch=4),
        grid_case(4, "bilinear", "zeros", False, "rotation", batch=2, tag="-floatout", io=(("int8", "int16"), ("float",)),
                  options=dict(quantize_grid_sample_output=False)),
        # A grid (and output) larger and smaller than the image.
        grid_case(4, "bilinear", "border", False, "rotation", out=(24, 32)),
        grid_case(3, "nearest", "zeros", True, "random", out=(24, 32)),
        grid_case(4, "bilinear", "zeros", False, "random", out=(3, 5)),
    ]
    # Coordinates beyond [-1, 1]. The SNORM16 grid qspec clips them to [-1, 1]
    # by design (also behind a float grid input: the sampler's grid qspec
    # quantizes it inside): border padding gives the same result (ac0: -1 is
    # already half a texel beyond the edge), zeros and reflection do not
    # (the ``clipped-grid`` trait). PT2E off keeps the coordinates.
    # (the ``clipped-grid`` traits follow from grid_case's parameters).
    cases += [grid_case(4, "bilinear", padding, False, "beyond") for padding in ("zeros", "border", "reflection")]
    cases += [grid_case(3, "nearest", "reflection", True, "beyond")]
    cases += [grid_case(4, "bilinear", padding, False, "beyond", options=dict(enable_pt2e_quantization=False))
              for padding in ("zeros", "reflection")]
    # One- and two-channel images.
    cases += [grid_case(c, mode, "zeros", False, "rotation") for c in (1, 2) for mode in ("bilinear", "nearest")]
    return cases



# Each bound at most 1.5x the worst measured over the outputs it decides
# (python -m vgf_conformance slack). The lowered program equals fake-quant
# bit for bit (137 outputs; the others are chains or clip): exact. The grid
# sampler reference rounds once: 0.85 LSB measured against the float model on
# dequantized inputs (the oracle's default of 1 LSB holds); on the raw inputs,
# input quantization adds up to 0.5 LSB (measured 0.92, bias 0.073).
TOLERANCE = family_tolerance(vs_fake_quant=EXACT, vs_float=Bound(1.35, bias_lsb=0.105))

FAMILY = Family("grid_sample", __doc__, _cases, TOLERANCE, QUICK)
