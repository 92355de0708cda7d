"""Goldens under pytest-xdist: --snapshot-update writes only what changed and
loses nothing; the golden directory does not depend on the test module's
name. (Stale goldens, and the goldens of failing cases under
--snapshot-update: tests/test_golden_keeping.py.)
Runs a small stand-in suite with the real GoldenExtension, its goldens in a
temporary directory named by VGF_GOLDEN_DIR."""

import json
import os
from pathlib import Path

import pytest

from vgf_conformance.goldens import changed_sections, serialize
from vgf_conformance.text import round_floats

REPO = Path(__file__).resolve().parent.parent

SUITE = """
import json, os, pytest
from vgf_conformance.goldens import GoldenExtension

DATA = json.loads(open(os.environ["GOLDEN_TEST_DATA"]).read())

@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(GoldenExtension)

@pytest.fixture(scope="session", params=[pytest.param(c, marks=pytest.mark.xdist_group(c)) for c in sorted(DATA)])
def case(request):
    return request.param

def test_golden(case, golden):
    assert golden == DATA[case]

def test_other(case):
    pass
"""


@pytest.fixture
def suite(pytester, tmp_path, monkeypatch):
    golden_dir = tmp_path / "golden" / "cases"
    data_file = tmp_path / "data.json"
    monkeypatch.setenv("VGF_GOLDEN_DIR", str(golden_dir))
    monkeypatch.setenv("GOLDEN_TEST_DATA", str(data_file))
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # When this test itself runs under xdist, the inner pytest must not
    # believe it is a worker (syrupy then skips unused-golden detection).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_cases=SUITE)

    def run(data: dict, *args):
        data_file.write_text(json.dumps(data))
        return pytester.runpytest_subprocess(
            "-p", "xdist", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", *args
        )

    def files():
        return {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in golden_dir.glob("*.json")}

    return run, files


def _workers_of_cases(result) -> dict[str, set[str]]:
    workers: dict[str, set[str]] = {}
    for line in result.stdout.lines:
        if line.startswith("[gw") and "PASSED" in line:
            nodeid = line.split()[-1]
            workers.setdefault(nodeid[nodeid.index("[") + 1: nodeid.rindex("]")], set()).add(line.split()[0])
    return workers


def test_update_under_xdist_writes_only_what_changed(suite, pytester):
    """Under two workers: each case's tests on one worker (the suite's "one
    export per case" rests on loadgroup: pytest-dev/pytest-xdist#1386); a
    change fails without --snapshot-update, and with it only the changed
    golden is rewritten; the goldens do not depend on the test module's name."""
    run, files = suite
    data = {c: {"graph": [c], "delegates": [1, 2]} for c in ("case-a", "case-b", "case-c", "case-d")}
    result = run(data, "--snapshot-update")
    assert result.ret == 0
    workers = _workers_of_cases(result)
    assert len(workers) == 4 and all(len(w) == 1 for w in workers.values()), workers
    before = files()
    assert sorted(before) == ["case-a.json", "case-b.json", "case-c.json", "case-d.json"]  # directly in VGF_GOLDEN_DIR
    assert json.loads(before["case-a.json"][0]) == data["case-a"]

    data["case-b"] = {"graph": ["case-b", "changed"], "delegates": [1, 2]}
    assert run(data).ret != 0  # a change fails without --snapshot-update
    (pytester.path / "test_cases.py").rename(pytester.path / "test_renamed.py")  # the same goldens, none new
    assert run(data, "--snapshot-update").ret == 0
    after = files()
    assert sorted(after) == sorted(before)
    assert after["case-b.json"] != before["case-b.json"]
    for name in ("case-a.json", "case-c.json", "case-d.json"):
        assert after[name] == before[name], f"{name} was rewritten"


def test_serialized_goldens_are_sorted_and_rounded():
    text = serialize(round_floats({"b": 1.0000001234, "a": [0.1 + 0.2]}))
    assert text == '{\n  "a": [\n    0.3\n  ],\n  "b": 1.0\n}\n'


def test_changed_sections_names_sections_in_order():
    stored = serialize({"case": 1, "graph": [1], "tosa": [1]})
    assert changed_sections(stored, {"case": 1, "graph": [2], "tosa": [2]}) == ["graph", "tosa"]
    assert changed_sections(stored, {"case": 1, "graph": [1], "tosa": [1]}) == []
    assert changed_sections(None, {"case": 1}) == ["<new>"]
