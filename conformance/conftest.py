"""Fixtures of the conformance suite: one session-scoped run per case.

``case_run`` is parametrized over the case table with session scope, so
pytest groups each case's tests together and exports the case once; the
plugin puts each case's tests in one xdist group, so under ``-n auto`` they
stay on one worker. The previous case's run is released when the next starts.
"""

from __future__ import annotations

import pytest

from conformance.cases import CASES
from conformance.golden import GoldenExtension
from conformance.plugin import case_params
from conformance.runner import CaseRun, run_case


@pytest.fixture(scope="session", params=case_params(CASES))
def case_run(request, vgf_artifacts_dir) -> CaseRun:
    return run_case(CASES[request.param], vgf_artifacts_dir)


@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(GoldenExtension)
