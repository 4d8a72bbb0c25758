#!/usr/bin/env bash
# Browser tests of the dispatcher panel, in Debian's headless Chromium driven by Playwright for Python.
#
#   WAYBILL_BIN="$(swift build --show-bin-path)/waybill" scripts/browser-tests.sh [pytest args…]
#
# Idempotent: installs chromium (apt, when root and missing) and a venv in .venv-browser (again only
# when tests/browser/requirements.txt changes), seeds a temp data dir, starts `waybill serve` on a free
# port, runs pytest, stops the server and exits with pytest's status. Screenshots and the server log
# land in artifacts/browser/ (git-ignored).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [ -z "${WAYBILL_BIN:-}" ] || [ ! -x "$WAYBILL_BIN" ]; then
  echo "browser-tests: set WAYBILL_BIN to the built server, e.g. WAYBILL_BIN=\"\$(swift build --show-bin-path)/waybill\"" >&2
  exit 2
fi

# --- Chromium from Debian (Playwright's own browser download cannot be reached here).
chromium_bin=${CHROMIUM_BIN:-$(command -v chromium || true)}
if [ -z "$chromium_bin" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "browser-tests: installing chromium with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium fonts-dejavu-core >/dev/null
    chromium_bin=$(command -v chromium)
  else
    echo "browser-tests: chromium is missing; install Debian's chromium package (or set CHROMIUM_BIN)" >&2
    exit 2
  fi
fi
export CHROMIUM_BIN="$chromium_bin"

# --- Python environment, reinstalled only when the pinned requirements change.
venv="$root/.venv-browser"
requirements="$root/tests/browser/requirements.txt"
stamp="$venv/.requirements.sha256"
wanted=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's python3 ships venv separately.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3-venv >/dev/null
      rm -rf "$venv"
      python3 -m venv "$venv"
    else
      echo "browser-tests: python3 -m venv failed; install python3-venv" >&2
      exit 2
    fi
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$wanted" > "$stamp"
fi
py="$venv/bin/python"

# --- A fresh server: seeded temp data dir, free port.
artifacts="$root/artifacts/browser"
mkdir -p "$artifacts"
rm -f "$artifacts"/*.png
work=$(mktemp -d "${TMPDIR:-/tmp}/waybill-browser.XXXXXX")
state="$work/server.json"
ctl=("$py" "$root/tests/browser/server_ctl.py")

cleanup() {
  "${ctl[@]}" stop "$state" 2>/dev/null || true
  cp "$work/server.log" "$artifacts/server.log" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"${ctl[@]}" init "$state" --bin "$WAYBILL_BIN" --dir "$work"
"${ctl[@]}" start "$state"

# --- The tests. pytest's last line is its summary ("N passed in Xs").
export WAYBILL_TEST_STATE="$state"
export WAYBILL_BROWSER_ARTIFACTS="$artifacts"
status=0
[ $# -gt 0 ] || set -- "$root/tests/browser"   # default: every browser test; else what was asked for
"$py" -m pytest -p no:cacheprovider -q -o console_output_style=classic "$@" || status=$?
exit "$status"
