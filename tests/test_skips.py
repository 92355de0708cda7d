"""Skips say so (vgf_conformance/harness/reporting/skips.py): counted by reason in the summary
and the report; a Vulkan tier that cannot run is a finding; an undeclared
skip fails a strict (CI) run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vgf_conformance.harness.reporting import records, skips


def _skipped(message: str, xfail: bool = False):
    fields = dict(skipped=True, longrepr=("x.py", 1, f"Skipped: {message}"))
    if xfail:
        fields["wasxfail"] = "reason"
    return SimpleNamespace(**fields)


def test_the_ledger_counts_skips_by_reason_and_names_the_undeclared():
    ledger = skips.SkipLedger()
    for case in ("a", "b"):
        ledger.record(_skipped(f"{case}: stays on the CPU as declared (why): nothing to run on Vulkan"))
    ledger.record(_skipped(f"{skips.VULKAN_UNAVAILABLE}: no scenario-runner"))
    ledger.record(_skipped("no PIL"))
    ledger.record(_skipped("an expected failure", xfail=True))  # not a skip
    summary = {e["declared"]: e["count"] for e in ledger.summary()}
    assert summary == {"stays-on-cpu": 2, "vulkan-unavailable": 1, None: 1}
    assert [e["reason"] for e in ledger.refused(strict=False)] == ["no PIL"]
    assert {e["declared"] for e in ledger.refused(strict=True)} == {None, "vulkan-unavailable"}
    lines = skips.summary_lines(ledger.summary(), strict=False)
    assert "FINDING: 1 Vulkan test(s) skipped, the Vulkan tier did not run: no scenario-runner" in lines
    assert "1 skipped, NOT DECLARED (fails in CI): no PIL" in lines


def test_the_report_counts_skips_across_shards():
    one = {"skips": [{"reason": "no PIL", "count": 1, "declared": None},
                     {"reason": "a: stays on the CPU as declared (x)", "count": 2, "declared": "stays-on-cpu"}]}
    two = {"skips": [{"reason": "b: stays on the CPU as declared (y)", "count": 3, "declared": "stays-on-cpu"}]}
    merged = {e["declared"]: e["count"] for e in records.merge_run_times([one, two])["skips"]}
    assert merged == {"stays-on-cpu": 5, None: 1}
    text = records.render_markdown({"cases": [], "workarounds": [], "run": {"skips": one["skips"]}})
    assert "## Skipped" in text and "NOT DECLARED: no PIL" in text


_SKIPPING = """
import pytest

def test_vulkan_tier():
    pytest.skip("the Vulkan tier did not run: no Vulkan ICD")

def test_picture():
    pytest.importorskip("a_package_that_is_not_there")

def test_runs():
    pass
"""


@pytest.mark.parametrize("strict", [True, False])
def test_an_undeclared_skip_fails_a_strict_run_and_is_counted_in_any(pytester, strict):
    pytester.makepyfile(test_skipping=_SKIPPING)
    flag = "--vgf-strict-skips" if strict else "--no-vgf-strict-skips"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", flag)
    out = result.stdout.str()
    assert "FINDING: 1 Vulkan test(s) skipped, the Vulkan tier did not run: no Vulkan ICD" in out
    assert "NOT DECLARED" in out and "a_package_that_is_not_there" in out
    if strict:
        assert result.ret == pytest.ExitCode.TESTS_FAILED, out
        assert "ERROR: 2 test(s) skipped for a reason this run does not accept" in out
    else:
        assert result.ret == pytest.ExitCode.OK, out


def test_ini_paths_resolve_against_the_configuration_file(pytester, monkeypatch):
    """vgf_golden_dir and vgf_durations in a team's configuration resolve against
    its directory, not the current one; the command line still wins."""
    team = pytester.mkdir("team")
    (team / "pytest.ini").write_text("[pytest]\nvgf_golden_dir = golden\nvgf_durations = d.json\n")
    (team / "test_where.py").write_text(
        "def test_where(pytestconfig):\n"
        "    print('GOLDEN=' + pytestconfig.option.vgf_golden_dir)\n"
        "    print('DURATIONS=' + str(pytestconfig.option.vgf_durations))\n")
    (team / "golden").mkdir()
    (team / "d.json").write_text('{"about": "", "seconds": {}}')
    elsewhere = pytester.mkdir("elsewhere")
    monkeypatch.chdir(elsewhere)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-c", str(team / "pytest.ini"),
                                           str(team / "test_where.py"))
    out = result.stdout.str()
    assert result.ret == 0, out
    assert f"GOLDEN={team / 'golden'}" in out and f"DURATIONS={team / 'd.json'}" in out
