#!/usr/bin/env bash
# One idempotent setup step: Debian packages for the Vulkan tier, a virtual
# environment in .venv with the pinned stack. A second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES=(libvulkan1 mesa-vulkan-drivers)
# The HTML report's browser test (tests/test_html_report.py) needs Chromium and
# its WebDriver: installed where CI=true (there the test fails without them),
# or with VGF_BROWSER=1; elsewhere the test skips and says what to install.
if [ "${CI:-}" = "true" ] || [ "${VGF_BROWSER:-}" = "1" ]; then
  DEB_PACKAGES+=(chromium chromium-driver)
fi
VENV=.venv
STAMP="$VENV/.setup-stamp"
stamp_value() { cat pyproject.toml requirements.lock scripts/setup.sh | sha256sum | cut -d' ' -f1; }

missing_debs() {
  local missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[*]:-}"
}

install_debs() {
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: apt is not available here; skipping Debian packages (${DEB_PACKAGES[*]})."
    echo "setup: the Vulkan tier will be skipped unless a Vulkan loader and llvmpipe are installed."
    return
  fi
  local missing
  read -r -a missing <<< "$(missing_debs)"
  [ "${#missing[@]}" -eq 0 ] && return
  if [ "$(id -u)" != 0 ]; then
    echo "setup: not root; skipping Debian packages. Install them with:"
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    return
  fi
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

find_python() {
  for candidate in "${PYTHON:-}" python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  echo "setup: Python 3.11 is required (torch 2.13.0 is pinned for cp311); set PYTHON=/path/to/python3.11" >&2
  exit 1
}

install_debs

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_value)" ] && [ -x "$VENV/bin/python" ]; then
  echo "setup: up to date ($VENV)"
  exit 0
fi

PY=$(find_python)
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $PY"
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11-venv >/dev/null || true
    fi
    "$PY" -m venv "$VENV"
  fi
fi
echo "setup: installing the pinned stack into $VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c requirements.lock -e .
stamp_value > "$STAMP"
echo "setup: done"
