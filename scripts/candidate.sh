#!/usr/bin/env bash
# What would change if we upgraded (or moved) ExecuTorch to VERSION?
#
#   scripts/candidate.sh 1.4.1 [pytest args...]
#
# Creates (once) a separate environment outside the repository with the stack
# pinned in candidates/executorch-VERSION.txt, then runs the conformance suite
# against the current goldens in report mode: reports/executorch-VERSION/
# gets report.json, report.md (changes grouped) and junit.xml. Golden
# differences and failures are the findings, so they do not fail this
# command; a run that could not complete does.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?usage: scripts/candidate.sh EXECUTORCH_VERSION [pytest args]}
shift
PINS="candidates/executorch-$VERSION.txt"
[ -f "$PINS" ] || { echo "candidate: no pins for executorch $VERSION: write $PINS (see candidates/)"; exit 2; }
ENVS=${VGF_CANDIDATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/vgf-conformance}
ENV="$ENVS/executorch-$VERSION"
OUT=${VGF_CANDIDATE_REPORT:-reports/executorch-$VERSION}
scripts/setup.sh  # Debian packages for the Vulkan tier; the baseline venv
STAMP="$ENV/.pins-stamp"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$(sha256sum "$PINS")" ]; then
  echo "candidate: creating $ENV"
  PY=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
  "$PY" -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check -r "$PINS"
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e .
  sha256sum "$PINS" > "$STAMP"
fi
mkdir -p "$OUT"
echo "candidate: executorch $("$ENV/bin/python" -c 'import importlib.metadata as m; print(m.version("executorch"))') against the goldens of $(git rev-parse --short HEAD 2>/dev/null || echo this tree)"
set +e
"$ENV/bin/python" -m pytest conformance -n auto -p no:cacheprovider \
  --vgf-report "$OUT" --junitxml "$OUT/junit.xml" -q "$@" > "$OUT/pytest.log" 2>&1
status=$?
set -e
tail -n 3 "$OUT/pytest.log"
if [ "$status" -gt 1 ]; then
  echo "candidate: the run did not complete (pytest exit $status); see $OUT/pytest.log"
  exit "$status"
fi
sed -n '1,/^## Not passing/p' "$OUT/report.md" | head -n 80
echo "candidate: full report in $OUT/report.md, $OUT/report.json, $OUT/junit.xml"
