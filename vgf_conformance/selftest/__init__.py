"""The suite's self-test: faults injected into the real stack, and the table of what caught each
(:mod:`.faults`, :mod:`.inject`, ``python -m vgf_conformance selftest``)."""
