"""Fixtures of the conformance suite: one run per case, shared by its tests.

``case_run`` is parametrized over the case table with session scope (see
``pytest_generate_tests`` in plugin.py), so pytest groups each case's tests
together. Runs come from the batch store (conformance/batches.py), which
exports a case once and keeps it until the next batch of cases starts: a
batch's Vulkan tests run after all its cases' other tests, on one worker.
"""

from __future__ import annotations

import pytest

from conformance.goldens import GoldenExtension
from conformance.harness.runner import CaseRun


@pytest.fixture(scope="session")
def case_run(request, vgf_batches) -> CaseRun:
    return vgf_batches.run(request.param)


@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(GoldenExtension)
