"""The nightly works on GitHub as written: .github/workflows/*.yml validated
offline with GitHub's workflow schema (check-jsonschema's bundled
``vendor.github-workflows``) and actionlint with shellcheck; every shell
script passes shellcheck; the project's own workflow rules (least privilege,
timeouts, no expression interpolated into a script, each job set up as the
README says); and scripts/candidate.sh runs to the end on a long summary."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh")) + [ROOT / ".ci" / "run"]
BIN = Path(sys.executable).parent  # the venv's console scripts (pinned in requirements.lock)


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is not installed in {BIN}: scripts/setup.sh installs it (requirements.lock)"
    return str(path)


def schema_errors(workflow: Path) -> str:
    """check-jsonschema's complaints about ``workflow`` ('' when it is valid)."""
    done = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
                          capture_output=True, text=True, timeout=120)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def actionlint_errors(workflow: Path) -> str:
    """actionlint's (with shellcheck's) complaints about ``workflow``."""
    done = subprocess.run([_tool("actionlint"), "-shellcheck", _tool("shellcheck"), "-no-color", str(workflow)],
                          capture_output=True, text=True, timeout=120)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_there_is_a_workflow_and_scripts_to_check():
    assert WORKFLOWS and all(s.exists() for s in SCRIPTS)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_the_workflow_validates_against_githubs_schema_and_actionlint(workflow):
    assert schema_errors(workflow) == ""
    assert actionlint_errors(workflow) == ""


def test_every_shell_script_passes_shellcheck():
    done = subprocess.run([_tool("shellcheck"), *map(str, SCRIPTS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = WORKFLOWS[0].read_text()
    assert old in text, old
    path = tmp_path / WORKFLOWS[0].name
    path.write_text(text.replace(old, new, 1))
    return path


def test_the_validators_fail_on_a_broken_workflow(tmp_path):
    """The faults of the workflow as it was: the compatibility step's
    unquoted, unguarded baseline line; an expression in a script; a job
    without runs-on; a misspelt key; a node20 action."""
    unguarded = _broken(tmp_path, '          baseline=()\n          if [ -f reports/baseline/report.json ]; '
                                  'then baseline=(--baseline reports/baseline); fi\n',
                        '          baseline=$([ -f reports/baseline/report.json ] && echo "--baseline reports/baseline")\n')
    unguarded.write_text(unguarded.read_text().replace('"${baseline[@]}"', "$baseline"))
    assert "SC2086" in actionlint_errors(unguarded)
    assert "runtime \"node20\" is deprecated" in actionlint_errors(
        _broken(tmp_path, "actions/checkout@v6", "actions/checkout@v4"))
    assert schema_errors(_broken(tmp_path, "    timeout-minutes: 30\n", "    timeout-minuets: 30\n"))
    assert actionlint_errors(_broken(tmp_path, "    runs-on: ubuntu-24.04\n", ""))


# ---------------------------------------------------------------------------
# The project's own rules, beyond what the validators check
# ---------------------------------------------------------------------------
def workflow_problems(workflow: dict) -> list[str]:
    """What breaks the project's rules for a workflow (parsed YAML)."""
    problems = []
    if workflow.get("permissions") != {"contents": "read"}:
        problems.append("no least-privilege top-level permissions (contents: read)")
    if "concurrency" not in workflow:
        problems.append("no concurrency group")
    for name, job in workflow["jobs"].items():
        if "timeout-minutes" not in job:
            problems.append(f"job {name}: no timeout-minutes")
        steps = job.get("steps", [])
        setup = next((i for i, s in enumerate(steps) if s.get("run", "").strip() == "scripts/setup.sh"), None)
        for i, step in enumerate(steps):
            script = step.get("run", "")
            if "${{" in script:
                problems.append(f"job {name}, step {step.get('name', i)}: an expression in a script "
                                "(pass it through env)")
            uses_venv = ".venv/bin/python" in script or "scripts/candidate.sh" in script
            bare = re.search(r"(^|\s)python3?\s+-m\s+(?!venv\s)", script)
            if bare:
                problems.append(f"job {name}, step {step.get('name', i)}: a bare `python -m` (the container's "
                                "python has none of the stack; use .venv/bin/python after scripts/setup.sh)")
            if uses_venv and "scripts/candidate.sh" not in script and (setup is None or setup > i):
                problems.append(f"job {name}, step {step.get('name', i)}: .venv/bin/python before scripts/setup.sh")
        if setup is not None and not any("actions/cache@" in s.get("uses", "") for s in steps[:setup]):
            problems.append(f"job {name}: installs the stack without the pip cache keyed on the lock")
        writes = {k for k, v in (job.get("permissions") or {}).items() if v == "write"}
        triggers = workflow.get("on", workflow.get(True)) or {}  # YAML 1.1 reads a bare `on` as True
        from_pull_requests = {"pull_request", "pull_request_target", "workflow_run"} & set(triggers)
        if from_pull_requests and "pull-requests" in writes and any("actions/checkout@" in s.get("uses", "")
                                                                    for s in steps):
            problems.append(f"job {name}: checks out code with pull-requests: write (a fork's code would run "
                            "with a write token: comment from a workflow_run job that only downloads)")
        for step in steps:
            action = step.get("uses", "")
            if action and not action.startswith(("actions/", "./")) and not re.search(r"@[0-9a-f]{40}$", action):
                problems.append(f"job {name}: third-party action {action} is not pinned by a commit SHA")
    return problems


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_the_workflow_follows_the_projects_rules(workflow):
    assert workflow_problems(yaml.safe_load(workflow.read_text())) == []


def test_the_rules_catch_a_comment_job_that_runs_pull_request_code():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "golden-review-comment.yml").read_text())
    assert workflow_problems(workflow) == []
    job = workflow["jobs"]["comment"]
    job["steps"].insert(0, {"uses": "actions/checkout@v6"})
    job["steps"][-1]["uses"] = job["steps"][-1]["uses"].split("@")[0] + "@v3"
    problems = "\n".join(workflow_problems(workflow))
    assert "checks out code with pull-requests: write" in problems
    assert "marocchino/sticky-pull-request-comment@v3 is not pinned by a commit SHA" in problems


def test_the_rules_catch_the_workflows_old_faults():
    workflow = yaml.safe_load(WORKFLOWS[0].read_text())
    del workflow["permissions"]
    job = workflow["jobs"]["compatibility"]
    del job["timeout-minutes"]
    job["steps"] = [s for s in job["steps"] if s.get("run") != "scripts/setup.sh"]
    workflow["jobs"]["candidates"]["steps"][-2]["run"] = 'scripts/candidate.sh ${{ matrix.candidate }} -k quick'
    workflow["jobs"]["durations"]["steps"].append({"run": "python -m vgf_conformance durations update r"})
    problems = "\n".join(workflow_problems(workflow))
    for expected in ("least-privilege", "job compatibility: no timeout-minutes",
                     "job compatibility, step The compatibility matrix (docs/compatibility.md, generated): "
                     ".venv/bin/python before scripts/setup.sh",
                     "an expression in a script", "a bare `python -m`"):
        assert expected in problems, problems


# ---------------------------------------------------------------------------
# The upgrade command runs to the end
# ---------------------------------------------------------------------------
@pytest.mark.expensive("the quick tier through scripts/candidate.sh")
def test_candidate_runs_to_the_end_on_a_long_summary(tmp_path):
    """scripts/candidate.sh on the quick tier (report.md is over 80 lines
    before any "Not passing"): it prints the summary and exits 0, where a
    `sed | head` pipe under pipefail used to end in SIGPIPE (141)."""
    if not shutil.which("bash"):
        pytest.fail("bash is needed to run scripts/candidate.sh")
    out = tmp_path / "baseline"
    env = {**os.environ, "VGF_CANDIDATE_REPORT": str(out), "CI": os.environ.get("CI", "false")}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(["bash", "scripts/candidate.sh", "baseline", "-m", "quick", "-n", "2"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1200)
    lines = (out / "report.md").read_text().splitlines()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(lines) > 80 and not any(line.startswith("## Not passing") for line in lines[:80])
    assert "candidate: full report in" in done.stdout
    assert "# VGF conformance report" in done.stdout


# ---------------------------------------------------------------------------
# The golden-review job's script, run here on a repository with two revisions
# ---------------------------------------------------------------------------
def _step_script(workflow: str, job: str, name: str) -> tuple[str, dict]:
    steps = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())["jobs"][job]["steps"]
    step = next(s for s in steps if s.get("name") == name)
    return step["run"], step.get("env", {})


def test_the_golden_review_job_reviews_base_against_head(tmp_path):
    """The job's own script (with the stack's interpreter standing in for
    the wheel's venv): the review of the pull request's base against its
    head lands in the summary and the artifact, with the PR's number."""
    repo = tmp_path / "repo"
    (repo / "golden" / "cases").mkdir(parents=True)
    golden = next(p for p in sorted((ROOT / "golden" / "cases").glob("*.json"))
                  if "rounding_mode=SINGLE_ROUND" in p.read_text())
    env = {**os.environ, "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (repo / "golden" / "cases" / golden.name).write_text(golden.read_text())
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD")
    (repo / "golden" / "cases" / golden.name).write_text(
        golden.read_text().replace("rounding_mode=SINGLE_ROUND", "rounding_mode=DOUBLE_ROUND"))
    git("commit", "-q", "-am", "head")
    head = git("rev-parse", "HEAD")
    (repo / ".review" / "bin").mkdir(parents=True)
    (repo / ".review" / "bin" / "python").symlink_to(sys.executable)
    script, step_env = _step_script("golden-review.yml", "review", "Review the base against the head")
    assert set(step_env) == {"BASE_SHA", "HEAD_SHA", "PR_NUMBER"}
    summary = tmp_path / "summary.md"
    done = subprocess.run(["bash", "-e", "-c", script], cwd=repo, capture_output=True, text=True, timeout=300,
                          env={**env, "BASE_SHA": base, "HEAD_SHA": head, "PR_NUMBER": "42",
                               "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(repo),
                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    text = (repo / "golden-review" / "review.md").read_text()
    assert "RESCALE rounding_mode: SINGLE_ROUND -> DOUBLE_ROUND" in text and summary.read_text() == text
    assert (repo / "golden-review" / "pr-number").read_text().strip() == "42"
    assert json.loads((repo / "golden-review" / "review.json").read_text())["changed"] == 1


# ---------------------------------------------------------------------------
# Pull requests run the whole matrix, sharded, gated on the merged report
# ---------------------------------------------------------------------------
def _conformance() -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / "conformance.yml").read_text())


def test_pull_requests_run_the_whole_matrix_in_shards_gated_on_the_merged_report():
    jobs = _conformance()["jobs"]
    assert jobs["pr-plan"]["if"] == "github.event_name == 'pull_request' && vars.PR_FULL_MATRIX != 'false'"
    assert jobs["pr-plan"]["steps"][0]["env"]["COUNT"] == "${{ vars.PR_SHARDS || '4' }}"
    assert jobs["pr-matrix"]["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.pr-plan.outputs.shards) }}"
    run = next(s["run"] for s in jobs["pr-matrix"]["steps"] if "--vgf-shard" in s.get("run", ""))
    assert '--vgf-shard "$SHARD/$COUNT"' in run and " -m quick" not in run and " -k " not in run  # every tier
    report_steps = [s.get("run", "") for s in jobs["pr-report"]["steps"]]
    assert any("report merge reports/merged reports/pr-shard-*" in r for r in report_steps)
    assert any(r.strip() == ".venv/bin/python -m vgf_conformance stale" for r in report_steps)
    assert report_steps[-1].strip().endswith("report gate reports/merged --whole-table")
    assert "quick" in jobs and "-m quick" in next(s["run"] for s in jobs["quick"]["steps"] if "Quick" in s.get("name", ""))


@pytest.mark.parametrize("count,shards", [("4", "[1,2,3,4]"), ("1", "[1]"), ("7", "[1,2,3,4,5,6,7]")])
def test_the_shard_plan_step_lists_the_shards(count, shards, tmp_path):
    script = _conformance()["jobs"]["pr-plan"]["steps"][0]["run"]
    out = tmp_path / "out"
    done = subprocess.run(["bash", "-e", "-c", script], env={**os.environ, "COUNT": count, "GITHUB_OUTPUT": str(out)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines() == [f"count={count}", f"shards={shards}"]
    for bad in ("0", "four", ""):
        refused = subprocess.run(["bash", "-e", "-c", script], env={**os.environ, "COUNT": bad,
                                                                     "GITHUB_OUTPUT": str(out)},
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and "PR_SHARDS must be a number of shards above 0" in refused.stderr


@pytest.mark.parametrize("count", [2, 4, 5])
def test_the_shards_are_disjoint_and_their_union_is_the_whole_table(count):
    from vgf_conformance.cases import CASES
    from vgf_conformance.harness.schedule import durations, plan

    seconds = durations.load(None)
    quick = {c for c, case in CASES.items() if case.quick}
    members = [set(plan.shard_members(list(CASES), (i, count), quick, seconds)) for i in range(1, count + 1)]
    assert set().union(*members) == set(CASES)
    assert sum(map(len, members)) == len(CASES), "a case is in more than one shard"
    assert all(members), "an empty shard"


def test_the_gate_fails_on_a_failing_case_a_shard_that_did_not_end_and_a_missing_case():
    from vgf_conformance.harness.reporting.records import gate_problems

    passing = {"cases": [{"id": "a", "outcome": "passed"}, {"id": "b", "outcome": "xfailed"}]}
    assert gate_problems(passing, ["a", "b"]) == []
    failing = {"cases": [{"id": "a", "outcome": "failed", "stage": "run", "error": "max error 3 LSB\nmore"},
                         {"id": "b", "outcome": "xpassed"}],
               "run": {"partial_shards": {"reports/pr-shard-2": {"missing": ["c", "d"]}}}}
    assert gate_problems(failing, ["a", "b", "c", "d", "e"]) == [
        "a: failed at run: max error 3 LSB", "b: xpassed",
        "shard reports/pr-shard-2 did not end: 2 planned case(s) missing",
        "3 case(s) of the table in no shard: c, d, e"]
