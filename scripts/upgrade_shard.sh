#!/usr/bin/env bash
# One shard of an upgrade: shard I of N of the whole matrix on the candidate
# pin set NAME (scripts/candidate.sh), with --snapshot-update, so its goldens
# are the candidate's; then what the upgrade's pull request collects from it:
#
#   scripts/upgrade_shard.sh NAME I/N [pytest args...]
#     -> $VGF_UPGRADE_DIR (default reports/upgrade-shard-I): report.json,
#        goldens/ (the golden directory after the run), freeze.txt
#
# NAME may be `baseline` (the pinned stack), e.g. with a self-test fault:
#   VGF_INJECT_FAULT=rescale-double-round scripts/upgrade_shard.sh baseline 1/1 -p vgf_conformance.selftest.inject
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/upgrade_shard.sh NAME I/N [pytest args]"
NAME=${1:?$usage}
SHARD=${2:?$usage}
shift 2
if ! [[ "$SHARD" =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]]; then
  echo "upgrade: I/N must be a shard such as 1/2, got '$SHARD'" >&2
  exit 2
fi
OUT=${VGF_UPGRADE_DIR:-reports/upgrade-shard-${SHARD%/*}}
VGF_CANDIDATE_REPORT="$OUT" scripts/candidate.sh "$NAME" --snapshot-update --vgf-shard "$SHARD" "$@"
mkdir -p "$OUT/goldens"
cp golden/cases/*.json "$OUT/goldens/"
echo "upgrade: shard $SHARD of $NAME in $OUT"
