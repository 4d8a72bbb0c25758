#!/usr/bin/env bash
# Installs the system packages Waybill needs, only those that are missing.
#   scripts/install-deps.sh            build + run (C libraries, pkg-config)
#   scripts/install-deps.sh --test     also what the tests start: PostgreSQL, Redis, Chromium (and a font), a Python venv, curl
#   scripts/install-deps.sh --cluster  also what `make cluster` runs: PostgreSQL, Redis, nginx, curl,
#                                      iproute2 (the partition demo)
#   scripts/install-deps.sh --bench    also what `scripts/bench.sh compare` runs: wrk, a C compiler (the
#                                      shared sink and publisher), Nchan (nginx + libnginx-mod-nchan), Redis
#                                      and a Python venv (the harness and the Django peer install their
#                                      own Python packages into it); curl
# On Debian as root it runs apt-get (through sudo for another user, which may ask for the
# password); without either it prints what to install. apt-get waits up to 10 minutes for a lock
# another apt holds (a fresh cloud VM runs its daily upgrade right after boot).
set -euo pipefail

mode="${1:-}"

if [ "$(uname -s)" = "Darwin" ]; then
    missing=()
    for formula in libwebsockets libev sqlite openssl@3 hiredis libpq pkg-config; do
        brew list --formula "$formula" >/dev/null 2>&1 || missing+=("$formula")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "Missing Homebrew packages: ${missing[*]}"
        echo "Install them with: brew install ${missing[*]}"
        exit 1
    fi
    exit 0
fi

# The C libraries behind the C* modules: libwebsockets (on libev: libev-dev builds the foreign
# loop, libwebsockets-evlib-ev is the lws plugin that runs it), SQLite, libcrypto, hiredis, libpq.
packages=(pkg-config libwebsockets-dev libev-dev libwebsockets-evlib-ev libsqlite3-dev libssl-dev libhiredis-dev libpq-dev)
# Servers the multi-node tests and `make cluster` start themselves (on free loopback ports).
# (No test starts nginx: only `make cluster` puts it in front of the nodes.)
services=(postgresql redis-server)
# The release build links Foundation in statically (scripts/build-release.sh), and with it
# Foundation's networking part, which asks the linker for libcurl by name: the development link
# (libcurl.so) must be there. Any libcurl development package gives it; only without one is the
# OpenSSL flavour installed (it conflicts with the GnuTLS one, which may be there already).
if [ "$(uname -s)" = Linux ] && ! compgen -G '/usr/lib/*/libcurl.so' >/dev/null && [ ! -e /usr/lib/libcurl.so ]; then
    packages+=(libcurl4-openssl-dev)
fi
case "$mode" in
    # curl: scripts/release-smoke.sh (the last step of `make test`) and scripts/cluster.sh ask the
    # server with it; a minimal Debian has none. fonts-dejavu-core: the panel's text in Chromium.
    --test) packages+=("${services[@]}" chromium fonts-dejavu-core python3-venv python3-pip curl) ;;
    # iproute2: `ip` and `tc` for the partition demo (WAYBILL_CLUSTER_NETNS=1 scripts/cluster.sh up).
    --cluster) packages+=("${services[@]}" nginx curl iproute2) ;;
    --bench) packages+=(wrk gcc libc6-dev curl nginx libnginx-mod-nchan redis-server python3-venv python3-pip) ;;
    "") ;;
    *) echo "usage: scripts/install-deps.sh [--test|--cluster|--bench]" >&2; exit 2 ;;
esac

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# Through sudo for another user: asking for the password on a terminal, never waiting for one
# without (CI), and only if sudo may run apt-get at all.
as_root=()
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then
    if [ -t 0 ]; then as_root=(sudo); else as_root=(sudo -n); fi
    "${as_root[@]}" true 2>/dev/null || as_root=(none)
fi
if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ "${as_root[0]:-}" = sudo ]; }; then
    echo "Installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    lock=(-o DPkg::Lock::Timeout=600)
    # `update` may not wait for the lists' lock as `install` waits for dpkg's: a few tries.
    for attempt in 1 2 3 4 5 6; do
        "${as_root[@]}" apt-get "${lock[@]}" update -qq && break
        [ "$attempt" = 6 ] && exit 1
        echo "apt-get update failed (another apt running?); trying again in 20 s"
        sleep 20
    done
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "Missing system packages: ${missing[*]}"
    echo "Install them with: sudo apt-get install ${missing[*]}"
    exit 1
fi
