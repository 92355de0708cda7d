"""Shared fixtures of the package's tests."""

import pytest

from vgf_conformance.harness.skips import VULKAN_UNAVAILABLE
from vgf_conformance.oracles import vulkan

pytest_plugins = ("pytester",)


@pytest.fixture(scope="module")
def stack():
    """The Vulkan stack, or a skip naming what is missing."""
    try:
        return vulkan.vulkan_stack()
    except vulkan.VulkanUnavailable as error:
        pytest.skip(f"{VULKAN_UNAVAILABLE}: {error}")
