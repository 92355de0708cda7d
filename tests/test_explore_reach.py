"""``explore --stack-target`` (vgf_conformance/explore/reach.py): draws that
reach stack lines the matrix does not are found, counted once, kept and
mutated, and listed in the findings by function."""

from __future__ import annotations

import io
import json
import random

import pytest

from tests.test_explore import RuleChild
from vgf_conformance.explore import reach
from vgf_conformance.explore.explorer import BUFFER_BYTES, Explorer, Options


class BlindSpotChild(RuleChild):
    """RuleChild that also answers the stack lines each draw reaches: every
    draw ``known.py:1``; a nearest resize ``blind.py:<channels>`` too."""

    def __init__(self):
        super().__init__()
        self.requests = []

    def run(self, request, timeout):
        self.requests.append(request)
        outcome = super().run(request, timeout)
        params = request["params"]
        if reach.REQUEST_FIELD in request:
            outcome[reach.REQUEST_FIELD] = ["known.py:1"] + (
                [f"blind.py:{params['channels']}"] if params["mode"] == "nearest" else [])
        return outcome


def test_draws_reaching_lines_the_matrix_does_not_are_found_counted_once_and_listed(tmp_path, monkeypatch):
    monkeypatch.setattr(reach.StackTarget, "recorded",
                        classmethod(lambda cls, buffer_bytes: cls({"known.py:1"}, buffer_bytes)))
    monkeypatch.setattr(reach, "functions_of", lambda entries, roots=None: [e.split(":")[0] + ":f" for e in entries])
    child = BlindSpotChild()
    options = Options(families=("resize",), seed=5, budget=60, out=tmp_path / "out", max_draws=30,
                      shrink_share=0.2, stack_target=True)
    explorer = Explorer(options, progress=io.StringIO(), child=child)
    summary = explorer.run()
    assert all(r[reach.REQUEST_FIELD] == str(tmp_path / "out" / "stack-coverage") for r in child.requests)
    section = summary["stack_target"]
    blind = {f"blind.py:{r['params']['channels']}" for r in child.requests if r["params"]["mode"] == "nearest"}
    assert blind and section["matrix_lines"] == 1
    # Each line counts once, in the first draw that reached it; nothing the matrix reaches counts.
    assert section["new_lines"] == len(blind) == len(section["draws"])
    assert {line for d in section["draws"] for line in d["lines"]} == blind
    assert all(d["id"] and "resize_case(" in d["code"] for d in section["draws"])
    # Kept for mutation: one buffer per drawn (not shrinking) draw that brought new lines.
    assert len(explorer.reach.corpus) == sum(d["phase"] == "explore" for d in section["draws"]) > 0
    markdown = (tmp_path / "out" / "findings.md").read_text()
    assert "## Stack lines the matrix does not reach" in markdown and "`blind.py:f`" in markdown
    logged = (tmp_path / "out" / "draws.jsonl").read_text()
    assert f'"{reach.REQUEST_FIELD}"' not in logged and '"new_stack_lines"' in logged  # the long list stays out
    assert json.loads((tmp_path / "out" / "findings.json").read_text())["stack_target"]["new_lines"] == len(blind)


def test_without_the_option_no_draw_is_recorded(tmp_path):
    child = BlindSpotChild()
    options = Options(families=("resize",), seed=5, budget=60, out=tmp_path / "out", max_draws=4)
    summary = Explorer(options, progress=io.StringIO(), child=child).run()
    assert summary["stack_target"] is None and not any(reach.REQUEST_FIELD in r for r in child.requests)


def test_a_kept_draw_is_mutated_in_a_few_bytes_for_half_of_the_draws():
    target = reach.StackTarget(set(), BUFFER_BYTES)
    rng = random.Random(1)
    assert len(target.next_buffer(rng)) == BUFFER_BYTES  # nothing kept: fresh bytes
    kept = bytes(BUFFER_BYTES)
    target.last_was_new = True
    target.keep(kept)
    target.keep(b"x" * BUFFER_BYTES)  # the draw before it brought nothing new: not kept
    assert target.corpus == [kept]
    buffers = [target.next_buffer(rng) for _ in range(200)]
    near = [b for b in buffers if sum(x != y for x, y in zip(b, kept)) <= reach.MUTATED_BYTES]
    assert 0.35 < len(near) / len(buffers) < 0.65 and all(len(b) == BUFFER_BYTES for b in buffers)


def test_new_lines_are_named_by_function(tmp_path):
    (tmp_path / "m.py").write_text("import os\n\nclass A:\n    def f(self):\n        def g():\n"
                                   "            return 1\n        return g()\n\nX = 2\n")
    found = reach.functions_of(["pkg/m.py:1,4-7,9"], roots={"pkg": tmp_path})
    assert found == ["pkg/m.py:<module>", "pkg/m.py:A.f", "pkg/m.py:A.f.g"]


def test_an_older_record_without_every_case_lines_is_refused(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps({"cases": ["a"], "groups": [], "stack": {},
                                                   "by_every_case": {"lines": 1, "arcs": 0}}))
    with pytest.raises(ValueError, match="records no lines reached by every case .* --record"):
        reach.StackTarget.recorded(BUFFER_BYTES, tmp_path / "old.json")


def test_the_draw_childs_recorder_gives_each_draws_lines_once(tmp_path):
    import inspect

    from vgf_export import passes

    recorder = reach.DrawRecorder(tmp_path)
    with recorder.context("draw-1"):
        assert passes.min_bilinear_resize_stage_count(64, 2) == 2
    lines = recorder.take("draw-1")
    source, first = inspect.getsourcelines(passes.min_bilinear_resize_stage_count)
    loop = first + next(i for i, text in enumerate(source) if "stage_count += 1" in text)
    assert f"vgf_export/passes.py:{loop}" in lines  # the split's loop: a 32x downscale takes it
    assert recorder.take("draw-1") == []  # forgotten once taken
    assert not any(tmp_path.iterdir())  # and no data file written
