#!/usr/bin/env bash
# What would change if we moved part of the stack to a candidate pin set?
#
#   scripts/candidate.sh NAME [pytest args...]     e.g. tosa-tools-2026.8, ml-sdk-0.12, 1.4.1
#   scripts/candidate.sh baseline [pytest args...] the pinned stack (.venv), to compare with
#
# NAME is a pin set candidates/NAME.txt (or candidates/executorch-NAME.txt, so
# `scripts/candidate.sh 1.4.1` still works) that overrides any part of the
# stack: its lines, then every line of requirements.lock naming a package it
# does not name. Creates (once per pin set) a separate environment outside the
# repository ($VGF_CANDIDATE_HOME, default ~/.cache/vgf-conformance/NAME),
# then runs the conformance suite against the current goldens in report mode:
# reports/NAME/ ($VGF_CANDIDATE_REPORT) gets report.json (with a `candidate`
# record: pins, installed versions, scope), report.md and junit.xml; a
# candidate's run also records its stack coverage (stack-coverage/) and
# stack-changes.md says how much of the stack code it changed the run reached.
#
# Findings never fail this command: golden differences and test failures, a
# pin set pip cannot resolve, a native tool that cannot run here (each ends
# with report.json saying why, read by `python -m vgf_conformance report compat`).
# A run that could not complete for another reason does.
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${1:?usage: scripts/candidate.sh NAME [pytest args]  (NAME: a pin set in candidates/)}
shift
if [ "$NAME" = baseline ]; then PINS=""  # the pinned stack itself, in .venv: what candidates are compared with
elif [ -f "candidates/$NAME.txt" ]; then PINS="candidates/$NAME.txt"
elif [ -f "candidates/executorch-$NAME.txt" ]; then NAME="executorch-$NAME"; PINS="candidates/$NAME.txt"
else
  known=(candidates/*.txt)
  known=("${known[@]#candidates/}")
  echo "candidate: no pin set $NAME: write candidates/$NAME.txt; there are: ${known[*]%.txt}" >&2
  exit 2
fi
ENVS=${VGF_CANDIDATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/vgf-conformance}
ENV="$ENVS/$NAME"
[ -z "$PINS" ] && ENV=.venv
OUT=${VGF_CANDIDATE_REPORT:-reports/$NAME}
scripts/setup.sh  # Debian packages for the Vulkan tier; the baseline venv (runs the helpers below)
COMPAT=(.venv/bin/python -m vgf_conformance candidate)
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }  # a venv's site-packages
mkdir -p "$OUT" "$ENVS"
PIN_ARGS=()
if [ -n "$PINS" ]; then
  PIN_ARGS=(--pins "$PINS")
  REQS="$OUT/requirements.txt"
  "${COMPAT[@]}" pins "$PINS" requirements.lock > "$REQS"
  STAMP="$ENV/.pins-stamp"
fi
if [ -n "$PINS" ] && { [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$(sha256sum < "$REQS")" ]; }; then
  echo "candidate: creating $ENV from $PINS on top of requirements.lock"
  rm -rf "$ENV"
  PY=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
  "$PY" -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip > "$OUT/install.log" 2>&1
  if ! "$ENV/bin/python" -m pip install --disable-pip-version-check -r "$REQS" >> "$OUT/install.log" 2>&1; then
    "${COMPAT[@]}" finding "$OUT" --name "$NAME" "${PIN_ARGS[@]}" --pip-log "$OUT/install.log" --scope "$@"
    echo "candidate: finding in $OUT/report.json (pip's log: $OUT/install.log)"
    exit 0
  fi
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e . >> "$OUT/install.log" 2>&1
  sha256sum < "$REQS" > "$STAMP"
fi
export PATH="$ENV/bin:$PATH"  # the VGF backend calls model-converter from PATH
if ! "$ENV/bin/python" -m vgf_conformance candidate preflight "$OUT" --name "$NAME" "${PIN_ARGS[@]}" --scope "$@"; then
  echo "candidate: finding in $OUT/report.json"
  exit 0
fi
echo "candidate: $NAME ($([ -n "$PINS" ] && grep -v '^#' "$PINS" | grep . | tr '\n' ' ' || echo requirements.lock)) against the goldens of $(git rev-parse --short HEAD 2>/dev/null || echo this tree)"
rm -f "$OUT/report.json" "$OUT/report.md" "$OUT/stack-changes.json" "$OUT/stack-changes.md"
rm -rf "$OUT/stack-coverage"  # an older run's data files would mix in
COVER=()  # a candidate's run records the stack lines its cases reach, for stack-changes below
if [ -n "$PINS" ]; then COVER=(--vgf-stack-coverage "$OUT/stack-coverage"); fi
set +e
# --vgf-require-vulkan: a candidate whose Vulkan stack is not found fails that tier, not skips it.
"$ENV/bin/python" -m pytest vgf_conformance -n auto -p no:cacheprovider --vgf-require-vulkan \
  --vgf-report "$OUT" --junitxml "$OUT/junit.xml" "${COVER[@]}" -q "$@" > "$OUT/pytest.log" 2>&1
status=$?
set -e
tail -n 3 "$OUT/pytest.log"
if [ "$status" -gt 1 ] || [ ! -f "$OUT/report.json" ]; then
  echo "candidate: the run did not complete (pytest exit $status); see $OUT/pytest.log"
  exit "$((status > 1 ? status : 1))"
fi
"$ENV/bin/python" -m vgf_conformance candidate stamp "$OUT" --name "$NAME" "${PIN_ARGS[@]}" --scope "$@"
"$ENV/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check > "$OUT/freeze.txt"  # what ran
# The summary: report.md up to its "Not passing" section, at most 80 lines.
# One awk that stops reading itself: a `sed | head` pipe would end in SIGPIPE
# (exit 141 under pipefail) whenever the summary is longer.
awk 'NR > 80 { exit } { print } /^## Not passing/ { exit }' "$OUT/report.md"
if [ -n "$PINS" ]; then
  # What the candidate changed in the stack's Python against the baseline's (.venv), and the run's reach of it.
  if "${COMPAT[@]}" stack-changes "$OUT" --baseline "$(purelib .venv)" --candidate "$(purelib "$ENV")"; then
    echo "candidate: the changed stack code the run does not reach first: $OUT/stack-changes.md"
  else
    echo "candidate: no stack-changes.md (above: why)"
  fi
fi
echo "candidate: full report in $OUT/report.md, $OUT/report.json, $OUT/junit.xml"
