#!/usr/bin/env bash
# Reconnect storm (docs/BENCHMARKS.md, "Reconnect storm"): N driver sockets on a release
# `waybill serve`, the server stopped with SIGTERM and started again on the same data directory;
# every socket comes back with the client library's jittered backoff and resumes by cursor while
# orders keep being written. Reports time until all are back, peak server CPU, store transactions
# per second, and events lost (must be 0). Local addresses only; a temporary data directory,
# removed at the end. Bounded: every wait in scripts/storm.py has a deadline.
#   scripts/bench-storm.sh [CLIENTS [PROCESSES]]      default 2000 sockets in 4 client processes
#   STORM_AUTH=token STORM_WRITE_RATE=20 STORM_BEFORE=5 STORM_AFTER=5 STORM_DOWN=0 scripts/bench-storm.sh 10000 4
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CLIENTS="${1:-2000}"
PROCESSES="${2:-4}"
PORT="${WAYBILL_BENCH_PORT:-8091}"
OUT="$ROOT/bench-results"
mkdir -p "$OUT"
BIN="${WAYBILL_BENCH_BIN:-$(cd "$ROOT" && swift build -c release --show-bin-path)/waybill}"
[ -x "$BIN" ] || "$ROOT/scripts/build-release.sh"
# uvloop if the shared harness's venv has it; the tool needs only the standard library.
PY="python3"
VENV_PY="${WAYBILL_BENCH_STATE:-${XDG_STATE_HOME:-$HOME/.local/state}/waybill-bench}/bench-venv/bin/python"
[ -x "$VENV_PY" ] && PY="$VENV_PY"

DATA="$(mktemp -d /tmp/waybill-storm.XXXXXX)"
trap 'cp "$DATA/server.log" "$OUT/storm-server.log" 2>/dev/null; rm -rf "$DATA"' EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "seeding $CLIENTS drivers ..." >&2
"$BIN" seed --data-dir "$DATA" --drivers "$CLIENTS" --orders-per-driver 0 --password-iterations 1000 \
    --out "$DATA/seed.json" 2>/dev/null
# --password-iterations: only the seed's hashes; nobody logs in during the storm (tokens and tickets).
"$PY" "$ROOT/scripts/storm.py" --bin "$BIN" --data-dir "$DATA" --seed-file "$DATA/seed.json" --port "$PORT" \
    --clients "$CLIENTS" --processes "$PROCESSES" --auth "${STORM_AUTH:-ticket}" \
    --write-rate "${STORM_WRITE_RATE:-20}" --before "${STORM_BEFORE:-5}" --after "${STORM_AFTER:-5}" \
    --down "${STORM_DOWN:-0}" --stop-timeout "${STORM_STOP_TIMEOUT:-60}" | tee -a "$OUT/results.jsonl"
