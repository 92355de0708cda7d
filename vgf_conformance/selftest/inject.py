"""A pytest plugin that applies the fault named by ``VGF_INJECT_FAULT`` in
every process of a run (the controller and each xdist worker):
``VGF_INJECT_FAULT=clamp-min-raised pytest -p vgf_conformance.selftest.inject ...``.
Loaded only by the self-test (``python -m vgf_conformance selftest``); without
the variable it does nothing."""

from __future__ import annotations

import os

import pytest

from vgf_conformance.selftest.faults import ENV, get

_UNDO = pytest.StashKey()


def pytest_configure(config):
    name = os.environ.get(ENV)
    if name:
        fault = get(name)
        config.stash[_UNDO] = fault.apply()


def pytest_report_header(config):
    name = os.environ.get(ENV)
    return [f"vgf self-test: fault {name} injected ({get(name).what})"] if name else []


def pytest_unconfigure(config):
    undo = config.stash.get(_UNDO, None)
    if undo is not None:
        undo()
