"""The section registry: a section registered in one place is built, compared
and worded; a section that fails to build is recorded, the others still are."""

import json
from types import SimpleNamespace

import pytest

from vgf_conformance.goldens import (
    GOLDEN_DIR,
    SECTIONS,
    Section,
    build_golden,
    changed_sections,
    describe_changes,
    golden_path,
    serialize,
)


class _Case:
    id = "toy-case"

    def describe(self, model=None):
        return {"id": self.id, "ratio": 0.1 + 0.2}


@pytest.fixture
def toy(monkeypatch):
    """A toy section, registered the way a real one is: one registry entry."""
    monkeypatch.setitem(SECTIONS, "toy", Section(
        "toy", "what the toy result says", lambda s: {"says": s.result.says, "value": 1 / 3}))


def test_a_registered_section_is_built_in_registry_order(toy):
    golden = build_golden(_Case(), SimpleNamespace(says="hello"))
    assert golden["toy"] == {"says": "hello", "value": 0.333333}  # rounded like the rest
    assert golden["case"] == {"id": "toy-case", "ratio": 0.3}
    assert list(golden) == [name for name in SECTIONS if name in golden]
    assert list(golden)[-1] == "toy"


def test_a_section_that_fails_is_recorded_and_the_others_still_built(toy):
    golden = build_golden(_Case(), SimpleNamespace(says="hello"))
    # The stand-in result has no edge program, report or artifacts.
    assert golden["graph"] == {"error": "AttributeError: 'types.SimpleNamespace' object has no attribute 'edge_program'"}
    assert set(golden["pte"]) == {"error"}
    assert golden["toy"]["says"] == "hello"


def test_numerics_are_a_section_only_when_given(toy):
    result = SimpleNamespace(says="hello")
    assert "numerics" not in build_golden(_Case(), result)
    assert build_golden(_Case(), result, {"outputs": []})["numerics"] == {"outputs": []}


def test_a_changed_section_is_named_and_worded(toy):
    stored = serialize(build_golden(_Case(), SimpleNamespace(says="hello")))
    current = build_golden(_Case(), SimpleNamespace(says="goodbye"))
    assert changed_sections(stored, current) == ["toy"]
    assert describe_changes(stored, current) == ["toy changed"]
    assert changed_sections(stored, json.loads(stored)) == []
    assert describe_changes(stored, json.loads(stored)) == []


def test_a_section_that_can_no_longer_be_built_is_worded_as_such(toy):
    stored = serialize(build_golden(_Case(), SimpleNamespace(says="hello")))
    current = build_golden(_Case(), SimpleNamespace())
    assert current["toy"] == {"error": "AttributeError: 'types.SimpleNamespace' object has no attribute 'says'"}
    assert changed_sections(stored, current) == ["toy"]
    assert describe_changes(stored, current) == ["toy could not be built"]
    assert describe_changes(serialize(current), json.loads(stored)) == ["toy changed"]


def test_a_section_words_its_own_changes(monkeypatch):
    def louder(stored, current):
        return ["toy got louder"] if len(current["toy"]) > len(stored["toy"]) else []

    monkeypatch.setitem(SECTIONS, "toy", Section("toy", "a word", lambda s: s.result, wording=louder))
    stored = serialize({"case": {}, "toy": "hi"})
    assert describe_changes(stored, {"case": {}, "toy": "HELLO"}) == ["toy got louder"]
    assert describe_changes(stored, {"case": {}, "toy": "ho"}) == []
    assert changed_sections(stored, {"case": {}, "toy": "ho"}) == ["toy"]


def test_a_section_no_longer_registered_still_shows():
    stored = serialize({"case": 1, "graph": [1], "retired": [1]})
    assert changed_sections(stored, {"case": 1, "graph": [1]}) == ["retired"]
    assert describe_changes(stored, {"case": 1, "graph": [1]}) == ["retired changed"]


def test_every_stored_golden_holds_registered_sections_only():
    paths = sorted(GOLDEN_DIR.glob("*.json"))
    assert paths, f"no goldens in {GOLDEN_DIR}"
    for path in paths:
        assert set(json.loads(path.read_text())) <= set(SECTIONS), path.name
    assert golden_path(paths[0].stem) == paths[0]
