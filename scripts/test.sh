#!/usr/bin/env bash
# The project's tests: the package's own tests and the conformance suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -n auto tests vgf_conformance "$@"
