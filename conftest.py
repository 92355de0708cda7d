"""Root conftest: the conformance suite's pytest plugin (options, marks,
report) is registered here so its command-line options exist everywhere."""

import logging

# Import-time noise of the stack, not of this project: torchao's optional
# CUDA kernels that cannot load on a CPU build, and torch's pytree notices.
for _name in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_name).setLevel(logging.ERROR)

pytest_plugins = ("conformance.harness.plugin",)
