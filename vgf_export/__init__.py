"""Export PyTorch image models to ExecuTorch programs for the Arm VGF backend.

``export_model`` is the entry point; the modules map one-to-one onto the ideas
of the reference export script:

* :mod:`vgf_export.qdq`: the SNORM image/grid qspecs and Q/DQ predicates
* :mod:`vgf_export.quantizer`: the quantizer wrapper (IO and grid_sample qspecs)
* :mod:`vgf_export.partitioner`: the VGF partitioner wrapper (Q/DQ detagging)
* :mod:`vgf_export.passes`: the resize split and channels-last passes
* :mod:`vgf_export.grid_sampler_backend`: grid-sampler partitioner, backend, payload
* :mod:`vgf_export.patches`: version-gated Arm backend patches
* :mod:`vgf_export.reports`: export report and debug logging
* :mod:`vgf_export.artifacts`: where an export's files go
"""

from vgf_export.export import ExportResult, ExportStageError, STAGES, export_model
from vgf_export.patches import apply_arm_backend_monkey_patch
from vgf_export.qdq import grid_qspec, image_qspec, snorm_qspec

__all__ = [
    "ExportResult",
    "ExportStageError",
    "STAGES",
    "apply_arm_backend_monkey_patch",
    "export_model",
    "grid_qspec",
    "image_qspec",
    "snorm_qspec",
]
