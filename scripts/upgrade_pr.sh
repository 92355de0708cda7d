#!/usr/bin/env bash
# The upgrade's pull request from its shards (scripts/upgrade_shard.sh): the
# shards' goldens, reports and lock collected into this checkout, the branch
# upgrade/NAME with one commit, and the pull request's body in
# reports/upgrade/pr-body.md. Pushing and opening the draft are the
# workflow's (python -m vgf_conformance upgrade pr).
#
#   scripts/upgrade_pr.sh NAME BASE SHARD_DIR...    e.g. executorch-1.4.1 origin/main reports/upgrade-shard-*
#
# BASELINE_REPORT, when set, is a report of the pinned stack: the body then
# lists the warnings that are new with the candidate.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/upgrade_pr.sh NAME BASE SHARD_DIR..."
NAME=${1:?$usage}
BASE=${2:?$usage}
shift 2
[ "$#" -gt 0 ] || { echo "$usage" >&2; exit 2; }
PY=(.venv/bin/python -m vgf_conformance upgrade)
"${PY[@]}" collect "$NAME" "$@" --out reports/upgrade
baseline=()
if [ -n "${BASELINE_REPORT:-}" ] && [ -f "$BASELINE_REPORT/report.json" ]; then baseline=(--baseline "$BASELINE_REPORT"); fi
"${PY[@]}" commit "$NAME" --base "$BASE" --report reports/upgrade "${baseline[@]}" --body reports/upgrade/pr-body.md
