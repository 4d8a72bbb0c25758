#!/usr/bin/env bash
# `scripts/bench.sh floor RATE SECONDS [get|patch]`: the floor of a request through libwebsockets.
# Builds scripts/lws_floor.c (lws 4.1 on its libev loop answering `{"status":"ok"}`, nothing else) and
# sends it wrk's paced requests exactly as `scripts/bench.sh paced` sends Waybill (64 keep-alive
# connections, 2 threads, scripts/bench_paced.lua): GETs of /healthz, or PATCHes with the same body.
# The row's server_cpu_us_per_request is the floor's CPU per request, to set beside Waybill's
# `WAYBILL_PACED_GET=/healthz scripts/bench.sh paced RATE SECONDS` and `paced RATE SECONDS` run in the
# same session (docs/BENCHMARKS.md). One JSON line, appended to bench-results/results.jsonl or to
# $WAYBILL_BENCH_OUT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RATE="${1:-1000}" DUR="${2:-20}" METHOD="${3:-get}" THREADS=2
PORT="${WAYBILL_BENCH_PORT:-8090}"
case "$METHOD" in get|patch) ;; *) echo "floor: the method is get or patch" >&2; exit 2 ;; esac
command -v wrk >/dev/null || { echo "floor: needs wrk (scripts/install-deps.sh --bench)" >&2; exit 1; }
mkdir -p "$ROOT/bench-results"
RESULTS="${WAYBILL_BENCH_OUT:-$ROOT/bench-results/results.jsonl}"
DATA="$(mktemp -d /tmp/waybill-floor.XXXXXX)"
cleanup() {
    [ -n "${FLOOR_PID:-}" ] && kill -TERM "$FLOOR_PID" 2>/dev/null && wait "$FLOOR_PID" 2>/dev/null || true
    rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

cc -O2 -o "$DATA/lws_floor" "$ROOT/scripts/lws_floor.c" -lwebsockets
"$DATA/lws_floor" "$PORT" &
FLOOR_PID=$!
for _ in $(seq 1 50); do
    curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
# bench_paced.lua's fixtures: any ids (the floor ignores the path) and a token it ignores.
echo 'return {ids = {1, 2, 3}, token = "floor"}' >"$DATA/fixtures.lua"
ticks() { awk '{print $14+$15}' "/proc/$FLOOR_PID/stat"; }
before="$(ticks)"
get_path=""
[ "$METHOD" = get ] && get_path=/healthz
WAYBILL_PACED_GET="$get_path" timeout -k 5 $(( DUR + 30 )) wrk -t "$THREADS" -c 64 -d "${DUR}s" --latency \
    -s "$ROOT/scripts/bench_paced.lua" "http://127.0.0.1:$PORT" -- "$DATA/fixtures.lua" \
    "$(python3 -c "print($THREADS * 1000 / $RATE)")" >"$DATA/wrk.txt"
after="$(ticks)"
python3 - "$DATA/wrk.txt" "$before" "$after" "$(getconf CLK_TCK)" "$RATE" "$DUR" "$METHOD" <<'PY' | tee -a "$RESULTS"
import json, re, sys
wrk = open(sys.argv[1]).read()
ticks = float(sys.argv[3]) - float(sys.argv[2]); tck = float(sys.argv[4])
m = re.search(r"(\d+) requests in ([\d.]+)s", wrk)
s = re.search(r"errors: (\d+) of \d+; answer p50 ([\d.]+) ms, p99 ([\d.]+) ms", wrk)
n = int(m.group(1)) if m else 0
print(json.dumps({"scenario": "floor", "label": f"lws-floor-{sys.argv[7]}-{int(float(sys.argv[5]))}",
    "offered_per_s": float(sys.argv[5]), "duration_s": float(sys.argv[6]), "requests": n,
    "errors": int(s.group(1)) if s else None,
    "answer_ms": {"p50": float(s.group(2)), "p99": float(s.group(3))} if s else None,
    "server_cpu_us_per_request": round(ticks / tck * 1e6 / n, 1) if n else None}, separators=(",", ":")))
PY
