"""The conformance suite for ExecuTorch's Arm VGF export path: cases, goldens, oracles and the harness that runs them (see README.md's table of folders)."""
