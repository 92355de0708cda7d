"""Shared fixtures of the package's tests, and the ``expensive`` mark.

A test marked ``expensive`` proves something the cheap tests cannot, at a
cost no pull request that leaves export alone should pay (exports under
other oneDNN ISA levels, a wheel in a fresh venv, the candidate script):
it is deselected, and said so at the end of the run, unless
``--run-expensive`` is given. The nightly runs them, and so does a pull
request that touches export, quantization or goldens
(.github/workflows/conformance.yml)."""

import pytest

from vgf_conformance.harness.reporting.skips import VULKAN_UNAVAILABLE
from vgf_conformance.oracles import vulkan

pytest_plugins = ("pytester",)

EXPENSIVE = "expensive"


def pytest_addoption(parser):
    parser.addoption("--run-expensive", action="store_true",
                     help="also run the tests marked expensive (the nightly does)")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{EXPENSIVE}(why): deselected unless --run-expensive (tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-expensive"):
        return
    deselected = [item for item in items if item.get_closest_marker(EXPENSIVE)]
    if deselected:
        items[:] = [item for item in items if not item.get_closest_marker(EXPENSIVE)]
        config.hook.pytest_deselected(items=deselected)
        config.stash[_DESELECTED] = [item.nodeid for item in deselected]


_DESELECTED = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, config):
    if config.getoption("--run-expensive"):
        return
    deselected = config.stash.get(_DESELECTED, [])
    xdist_controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if not deselected and not xdist_controller:
        return
    names = ": " + ", ".join(sorted({nodeid.split("[")[0] for nodeid in deselected})) if deselected else ""
    # Under xdist the workers deselect: the controller says so without the names.
    terminalreporter.write_line(f"tests marked {EXPENSIVE} were deselected (the nightly runs them; "
                                f"--run-expensive here){names}")


@pytest.fixture(scope="module")
def stack():
    """The Vulkan stack, or a skip naming what is missing."""
    try:
        return vulkan.vulkan_stack()
    except vulkan.VulkanUnavailable as error:
        pytest.skip(f"{VULKAN_UNAVAILABLE}: {error}")
