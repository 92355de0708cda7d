#!/usr/bin/env bash
# The main job: the conformance suite against the installed ExecuTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -n auto vgf_conformance "$@"
