#!/usr/bin/env bash
# Login flood benchmark (hardening item 1): release build, `waybill demo` on a temporary data
# directory, 500 concurrent bogus logins spread over 50 loopback addresses, while measuring
# /healthz latency, live event delivery to the panel and a real user's login time.
#
#   scripts/bench-login-flood.sh    # FLOOD=500 FLOOD_SECONDS=10 FLOOD_ADDRESSES=50 PORT=18480 by default
#   WAYBILL_BIN=/path/to/waybill scripts/bench-login-flood.sh    # another build (e.g. before the fix)
#
# FLOOD clients each send bogus logins back to back for FLOOD_SECONDS, from FLOOD_ADDRESSES
# loopback source addresses (127.0.1.x; the real user logs in from 127.0.0.4).
#
# Prints the JSON result of scripts/login-flood.py. Targets: healthz p99 ≤ 50 ms, delivery
# p99 ≤ 50 ms, real login ≤ 2 s (retrying 503 after Retry-After counts in the time).
set -euo pipefail
cd "$(dirname "$0")/.."
# FLOOD_NICE (default 19): the flood generator's processes run at this nice level, so on a machine
# where they must share the server's cores they use the idle time, as attackers' machines elsewhere
# would, instead of starving the server (the probes and the real user keep normal priority).
# FLOOD_NICE=0 measures the contended case. FLOOD_SECONDS=0: one login per client (a burst).
export PORT="${PORT:-18480}" FLOOD="${FLOOD:-500}" FLOOD_ADDRESSES="${FLOOD_ADDRESSES:-50}" FLOOD_SECONDS="${FLOOD_SECONDS:-10}"
export FLOOD_NICE="${FLOOD_NICE:-19}"

if [ -n "${WAYBILL_BIN:-}" ]; then
    BIN="$WAYBILL_BIN"
else
    scripts/build-release.sh 2>&1 | grep -E "error:" || true
    BIN="$(swift build -c release --show-bin-path)/waybill"
fi
ulimit -n 4096 2>/dev/null || true  # server and flood both hold hundreds of sockets
DATA="$(mktemp -d /tmp/waybill-flood.XXXXXX)"
"$BIN" demo --port "$PORT" --data-dir "$DATA" >"$DATA/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; rm -rf "$DATA"' EXIT

for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null || { echo "server did not start; log:"; cat "$DATA/server.log"; exit 1; }

SERVER_PID=$SERVER python3 scripts/login-flood.py
