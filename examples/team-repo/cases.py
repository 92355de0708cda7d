"""team: the team's models, as the conformance suite's case API declares them
(``docs/case-api.md`` in vgf-conformance).

Each case: a model factory, its example inputs (a sample frame checked in
under ``samples/``, or inputs generated from the case id's seed), the IO
qspecs by name (int8 = SNORM8 images, float = left float), the tolerance
traits and, by default, full delegation.
"""

from vgf_conformance.cases import Case, Family, InputSpec
from vgf_conformance.cases.tolerances import family_tolerance

from models import BackwardWarp, Thumbnailer


def _cases() -> list[Case]:
    return [
        # The thumbnail of a real frame: a sample tensor, read without executing code.
        Case(id="thumbnail-down4-int8io", family="team", model=lambda: Thumbnailer(scale=0.25),
             inputs=(InputSpec.file("samples/frame.npy", (1, 3, 32, 48)),),
             input_qspecs=("int8",), output_qspecs=("int8",),
             traits=frozenset({"chain"})),  # the blur and the resize each requantize
        # The warp: an RGBA frame (int8, aliased as an R8G8B8A8_SNORM image on
        # Vulkan) and a float flow, seeded; the SNORM16 grid is the default.
        Case(id="warp-rgba-border-int8io", family="team", model=lambda: BackwardWarp(16, 24),
             inputs=(InputSpec("smooth", (1, 4, 16, 24)), InputSpec("flow", (1, 2, 16, 24))),
             input_qspecs=("int8", "float"), output_qspecs=("int8",),
             options=dict(quantize_grid_sample_output=True),
             traits=frozenset({"chain", "computed-grid"})),  # base + flow is an int8 add before the grid
    ]


FAMILY = Family("team", __doc__, _cases, family_tolerance(), quick=frozenset({"thumbnail-down4-int8io"}))
