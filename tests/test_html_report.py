"""report.html: a suite run with a planted numerics fault writes a page whose
section for the broken case shows its error map; the page, opened in a real
headless browser (Debian's chromium through its WebDriver), loads without
script errors and its case filter works. The screenshot of the failing case
is kept in ``$VGF_SCREENSHOT_DIR`` (CI uploads it) or the test's tmp_path.

The browser tests skip where chromium is missing, and fail where CI=true
(scripts/setup.sh installs it there), as --vgf-require-vulkan does for Vulkan.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vgf_conformance.harness.reporting.html import golden_diff, render_html, write_html
from vgf_conformance.harness.reporting.publish import write_report
from vgf_conformance.harness.reporting.records import CaseRecord, build_report

#: One worker runs the module (under --dist loadgroup): the planted-fault run is made once.
pytestmark = pytest.mark.xdist_group("html-report")

REPO = Path(__file__).resolve().parent.parent
CASE = "resize-bilinear-ac0-up2-int8io"
MAP = "output0-c0-3.png"

#: The planted fault: every VGF delegate's outputs 3 LSB higher in the last
#: column (NHWC), as a RESIZE border regression would be.
FAULT = '''
import dataclasses
import numpy as np
from vgf_conformance.oracles import delegates

_real = delegates.run_tosa_in_child_ex


def _right_column_plus_3(flatbuffer, inputs, timeout, **options):
    result = _real(flatbuffer, inputs, timeout, **options)
    outputs = []
    for o in result.outputs:
        shifted = o.astype(np.int32)
        shifted[..., -1, :] += 3
        outputs.append(np.clip(shifted, -127, 127).astype(o.dtype))
    return dataclasses.replace(result, outputs=outputs)


delegates.run_tosa_in_child_ex = _right_column_plus_3
'''


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory) -> Path:
    """The report directory of a suite run of CASE with the planted fault."""
    root = tmp_path_factory.mktemp("faulty-run")
    (root / "planted_fault.py").write_text(FAULT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "vgf_conformance" / "test_cases.py"), "-p", "no:cacheprovider",
         "-p", "planted_fault", "-n", "0", "-m", "not vulkan", "-k", CASE, "-q",
         "--vgf-report", str(root / "report"), "--vgf-artifacts", str(root / "artifacts")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the fault fails the run
    return root / "report"


def test_a_planted_numerics_fault_puts_its_error_map_in_report_html(faulty_run):
    report = json.loads((faulty_run / "report.json").read_text())
    (case,) = [c for c in report["cases"] if c["id"] == CASE]
    assert case["tests"]["test_numerics_vs_fake_quant"] == "failed"
    (entry,) = case["error_maps"]
    assert entry["file"] == f"error_maps/{MAP}" and entry["shape"] == [1, 4, 16, 18]
    assert entry["ranges"]["vs_fake_quant"]["max_lsb"] >= 3  # the planted 3 LSB
    assert (faulty_run / "maps" / CASE / MAP).stat().st_size > 10_000  # copied beside the page
    page = (faulty_run / "report.html").read_text()
    section = page[page.index(f'id="case-{CASE}"'):]
    section = section[:section.index("</section>")]
    assert f'<img src="maps/{CASE}/{MAP}"' in section
    assert "numerics" in case["golden_changed"] and any(line.startswith("+") for line in case["golden_diff"])
    assert f"scripts/conformance.sh --vgf-case {CASE}" in section  # the rerun command
    assert "src=\"http" not in page and "href=\"http" not in page  # nothing from the network
    # The tables of report.md: counts by outcome, golden sections changed, tolerance margins.
    assert '<td class="outcome-failed">failed</td><td class="num">1</td>' in page
    assert f'<td><a href="#case={CASE}">{CASE}</a></td><td>' in page[page.index('id="golden-changed"'):]
    assert 'id="margins"' in page and "| failed | 1 |" in (faulty_run / "report.md").read_text()


def test_a_map_that_cannot_be_found_is_said_so_on_the_page(tmp_path):
    report = build_report({"c-1": {"family": "resize", "tests": {"test_numerics_vs_float": "failed"},
                                   "error_maps": [{"file": "error_maps/x.png", "output": 0, "channels": [0, 0],
                                                   "shape": [1, 1, 2, 2], "ranges": {}}],
                                   "run": {"artifacts": str(tmp_path / "gone")}}})
    page = write_html(report, tmp_path / "report").read_text()
    assert "error map error_maps/x.png: not found" in page


def test_merged_shards_keep_their_maps(faulty_run, tmp_path):
    """A merged report finds each map in its shard's maps/ (CI merges shards of other jobs)."""
    shard = tmp_path / "shard-1"
    shutil.copytree(faulty_run, shard)
    report = json.loads((shard / "report.json").read_text())
    for case in report["cases"]:
        case["run"]["artifacts"] = "/elsewhere"  # the shard job's machine
    (shard / "report.json").write_text(json.dumps(report))
    from vgf_conformance.harness.reporting.publish import main

    assert main(["merge", str(tmp_path / "merged"), str(shard)]) == 0
    assert (tmp_path / "merged" / "maps" / CASE / MAP).is_file()
    assert f'src="maps/{CASE}/{MAP}"' in (tmp_path / "merged" / "report.html").read_text()


def test_golden_diff_is_capped_and_names_both_sides():
    stored = json.dumps({"a": list(range(300))}, indent=2)
    lines = golden_diff(stored, {"a": list(range(1, 301))}, limit=10)
    assert lines[0].startswith("--- golden (stored)") and lines[1].startswith("+++ this run")
    assert len(lines) == 11 and lines[-1].startswith("... ")
    assert golden_diff(None, {"a": 1}) == []


def test_the_page_escapes_what_a_case_recorded():
    report = build_report({"c-<b>": {"family": "f", "error": "<script>alert(1)</script>",
                                     "tests": {"test_export": "failed"}}})
    page = render_html(report)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


def test_a_report_diff_renders_as_the_new_page_with_the_changes_on_top(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    write_report(build_report({"c-1": {"family": "resize", "tests": {"test_export": "passed"}},
                               "c-2": {"family": "resize", "tests": {"test_export": "passed"}}}), old)
    write_report(build_report({"c-1": {"family": "resize", "tests": {"test_export": "failed"}},
                               "c-2": {"family": "resize", "tests": {"test_export": "passed"}}}), new)
    from vgf_conformance.harness.reporting.html import main

    assert main([str(new), "--diff", str(old)]) == 0
    page = (new / "diff.html").read_text()
    top = page[page.index('id="diff"'):page.index("<h2>By outcome")]
    assert "<strong>1 changed</strong>" in top and '<a href="#case=c-1">c-1</a>' in top
    assert "outcome passed -&gt; failed" in top and "c-2" not in top
    assert (new / "report.html").read_text() != page  # the run's own page is left as it was
    with pytest.raises(SystemExit):
        main([str(new), "--diff", str(tmp_path / "missing")])


# ---------------------------------------------------------------------------
# In a real browser
# ---------------------------------------------------------------------------
def browser_or_skip():
    """(chromium, chromedriver) paths; skip with what to install, or fail where CI=true."""
    found = {name: shutil.which(binary) for name, binary in (("chromium", "chromium"),
                                                              ("chromium-driver", "chromedriver"))}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        message = (f"the HTML report's browser test needs the Debian packages {' '.join(missing)} "
                   "(scripts/setup.sh installs them where CI=true or VGF_BROWSER=1)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"required in CI but missing: {message}")
        pytest.skip(message)
    return found["chromium"], found["chromium-driver"]


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required in CI but missing.*chromium chromium-driver"):
        browser_or_skip()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="install"):
        browser_or_skip()


@pytest.fixture(scope="module")
def browser():
    chromium, chromedriver = browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,2200"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(faulty_run, tmp_path_factory) -> Path:
    """The faulty run's report plus passing cases of two other families, so that the filter has choices."""
    report = json.loads((faulty_run / "report.json").read_text())
    faulty = report["cases"][0]
    for i, family in enumerate(("grid_sample", "grid_sample", "composite")):
        passing = copy.deepcopy(CaseRecord(id=f"zz-{family}-{i}", family=family, stage="run",
                                           tests={"test_export": "passed"}).__dict__)
        passing["delegates"] = faulty["delegates"]
        report["cases"].append(passing)
    directory = tmp_path_factory.mktemp("page")
    shutil.copytree(faulty_run / "maps", directory / "maps")
    write_report(report, directory)
    return directory / "report.html"


def _errors(driver) -> list[str]:
    logged = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return logged + list(driver.execute_script("return window.reportErrors") or [])


def test_the_page_loads_without_errors(browser, page):
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    assert _errors(browser) == []
    assert browser.find_element(By.ID, "shown").text == "4 of 4 cases shown"


def test_the_filter_works(browser, page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(page.as_uri())

    def visible() -> list[str]:
        return [r.get_attribute("data-case") for r in browser.find_elements(By.CSS_SELECTOR, "tr.case-row")
                if r.is_displayed()]

    Select(browser.find_element(By.ID, "filter-family")).select_by_visible_text("grid_sample")
    assert visible() == ["zz-grid_sample-0", "zz-grid_sample-1"]
    Select(browser.find_element(By.ID, "filter-family")).select_by_index(0)
    Select(browser.find_element(By.ID, "filter-outcome")).select_by_visible_text("failed")
    assert visible() == [CASE]
    Select(browser.find_element(By.ID, "filter-outcome")).select_by_index(0)
    Select(browser.find_element(By.ID, "filter-section")).select_by_visible_text("numerics")
    assert visible() == [CASE]
    browser.get(page.as_uri() + "#family=composite")  # a filter as a link
    assert visible() == ["zz-composite-2"]
    assert browser.find_element(By.ID, "shown").text == "1 of 4 cases shown"
    assert _errors(browser) == []


def test_a_screenshot_of_the_failing_case_shows_its_error_map(browser, page, tmp_path):
    from PIL import Image
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri() + f"#case={CASE}")
    section = browser.find_element(By.ID, f"case-{CASE}")
    image = section.find_element(By.CSS_SELECTOR, "figure.errormap img")
    browser.execute_script("arguments[0].scrollIntoView()", section)
    assert "selected" in section.get_attribute("class")
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 500
    rect = browser.execute_script("var r = arguments[0].getBoundingClientRect();"
                                  "return [r.top, r.bottom, window.innerHeight]", image)
    assert 0 <= rect[0] and rect[1] <= rect[2], f"the error map is not on screen: {rect}"
    shots = Path(os.environ.get("VGF_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{CASE}.png"
    assert browser.save_screenshot(str(shot))
    # The planted fault is on screen: the red of the error scale (RdBu_r's top) in the map's area.
    picture = Image.open(shot).convert("RGB")
    pixels, (width, height) = picture.load(), picture.size
    top = int(rect[0])
    reds = sum(1 for y in range(top, min(top + 600, height), 3) for x in range(0, width, 3)
               if pixels[x, y][0] > 170 and pixels[x, y][1] < 110 and pixels[x, y][2] < 110)
    assert reds > 100, "no error-scale red in the screenshot of the failing case"
    assert _errors(browser) == []
