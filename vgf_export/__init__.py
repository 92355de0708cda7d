"""Export PyTorch image models to ExecuTorch programs for the Arm VGF backend.

``export_model`` is the entry point; the modules map onto the ideas
of the reference export script (``export_executorch.py``, see README.md):

* :mod:`vgf_export.qdq`: the SNORM image/grid qspecs and Q/DQ predicates
* :mod:`vgf_export.quantizer`: the quantizer wrapper (IO and grid_sample qspecs)
* :mod:`vgf_export.partitioner`: the VGF partitioner wrapper (Q/DQ detagging)
* :mod:`vgf_export.passes`: the resize split and channels-last passes
* :mod:`vgf_export.grid_sampler_backend`: grid-sampler partitioner, backend, payload
* :mod:`vgf_export.patches`: version-gated Arm backend patches
* :mod:`vgf_export.artifacts`: the export report, debug logging, where an export's files go
* :mod:`vgf_export.names`: backend ids, stages, file names and the workaround ledger, shared with the suite
* :mod:`vgf_export.stages`: the flow's stages: their timing, ``ExportStageError``, ``current_stage``
* :mod:`vgf_export.arguments`: ``export_model``'s argument checks

The public names below are imported on first use, so that a light module
(``vgf_export.names``) can be read without importing torch and ExecuTorch.
"""

import importlib

_PUBLIC = {
    "ExportResult": "vgf_export.export",
    "ExportStageError": "vgf_export.stages",
    "STAGES": "vgf_export.names",
    "export_model": "vgf_export.export",
    "apply_arm_backend_monkey_patch": "vgf_export.patches",
    "grid_qspec": "vgf_export.qdq",
    "image_qspec": "vgf_export.qdq",
    "snorm_qspec": "vgf_export.qdq",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'vgf_export' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
