"""Root conftest: quiets the stack's import-time logging. The suite's pytest
plugin (options, marks, report) is loaded by ``-p vgf_conformance.harness.plugin``
in pyproject.toml here, and by its pytest11 entry point elsewhere."""

import logging

# Import-time noise of the stack, not of this project: torchao's optional
# CUDA kernels that cannot load on a CPU build, and torch's pytree notices.
for _name in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_name).setLevel(logging.ERROR)
