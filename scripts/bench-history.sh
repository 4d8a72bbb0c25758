#!/usr/bin/env bash
# The long-history benchmark (docs/HISTORY-BENCH.md): a company with a long past, measured where the
# issue set its targets.
#
#   scripts/bench-history.sh                 100 drivers × (2 active + 1000 finished) = 100 200 orders
#   DRIVERS=20 FINISHED=100 scripts/bench-history.sh     a smaller company
#
# Starts the release build on 127.0.0.1 with a fresh SQLite data dir, seeds it, then measures:
#   1. time per list page (median and p95 of REPEAT requests each on one kept-alive connection,
#      timed by the client) with the server's CPU per request, and its size: the panel's first page,
#      history pages near the top and deep down, a status page, a driver's page, a text search,
#      ids= for 50 ids, the counts, and a driver app's two list halves and counts;
#   2. in headless Chromium (Debian's chromium, Playwright for Python from .venv-browser, made by
#      `make browser-test`): the panel's first render and the API bytes it downloads per event.
# Prints a JSON summary and appends it to bench-results/history.jsonl (git-ignored).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PORT="${WAYBILL_BENCH_PORT:-8091}"
DRIVERS="${DRIVERS:-100}"
ACTIVE="${ACTIVE:-2}"
FINISHED="${FINISHED:-1000}"
REPEAT="${REPEAT:-30}"
EVENTS="${EVENTS:-10}"
BIN="${WAYBILL_BENCH_BIN:-$(cd "$ROOT" && swift build -c release --show-bin-path)/waybill}"
[ -x "$BIN" ] || "$ROOT/scripts/build-release.sh"
PY="$ROOT/.venv-browser/bin/python"
[ -x "$PY" ] || { echo "bench-history: run 'make browser-test' once first (it makes .venv-browser)" >&2; exit 2; }
export CHROMIUM_BIN="${CHROMIUM_BIN:-$(command -v chromium || echo /usr/bin/chromium)}"
DATA="$(mktemp -d /tmp/waybill-history-bench.XXXXXX)"
OUT="$ROOT/bench-results"
mkdir -p "$OUT"
BASE="http://127.0.0.1:$PORT"

cleanup() {
    [ -n "${SERVER_PID:-}" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    rm -rf "$DATA"
}
trap cleanup EXIT

# REPEAT requests of each path with one token, as fast as curl goes: past the per-user rate (429).
"$BIN" serve --port "$PORT" --data-dir "$DATA" --user-requests-per-second 0 2>"$DATA/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -sf "$BASE/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

seed_started=$(date +%s.%N)
"$BIN" seed --data-dir "$DATA" --drivers "$DRIVERS" --orders-per-driver "$ACTIVE" --finished-per-driver "$FINISHED" \
    --password-iterations 1000 --out "$DATA/seed.json"
seed_seconds=$(python3 -c "print($(date +%s.%N) - $seed_started)")
TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dispatcher_token"])' "$DATA/seed.json")
# Wait until the server's relay has published the seed's events (they would otherwise reach the panel mid-run).
for _ in $(seq 1 100); do
    curl -sf "$BASE/metrics" | grep -qx 'waybill_outbox_lag_seconds 0\(\.0\)\?' && break
    sleep 0.1
done

# A page in the middle of the history, the first driver, and 50 ids spread over the history.
IDS=$(curl -s -H "Authorization: Bearer $TOKEN" "$BASE/api/orders/?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
MID=$((IDS / 2))
DRIVER=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["drivers"][0]["id"])' "$DATA/seed.json")
FIFTY=$(python3 -c 'import sys; n=int(sys.argv[1]); print(",".join(str(1 + i * (n // 50)) for i in range(50)))' "$IDS")

# REPEAT requests of each path on one kept-alive connection, timed from this side (the request log
# names no query arguments but the API's own, so it cannot tell the paths apart), with the server
# process's CPU per request from /proc.
DRIVER_TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["drivers"][0]["token"])' "$DATA/seed.json")
SINCE=$(python3 -c 'import datetime; print((datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))')
pages=$(python3 - "$PORT" "$TOKEN" "$SERVER_PID" "$REPEAT" "$DRIVER_TOKEN" <<PY
import http.client, json, statistics, sys, time
port, token, pid, repeat, driver_token = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
paths = {
    "panel_first_page": "/api/orders/?active=true&limit=50",
    "history_first_page": "/api/orders/?limit=50",
    "history_deep_page": "/api/orders/?before=$MID&limit=50",
    "default_limit_100": "/api/orders/",
    "status_completed": "/api/orders/?status=completed&before=$MID&limit=50",
    "driver_page": "/api/orders/?driver_id=$DRIVER&limit=50",
    "search_common": "/api/orders/?q=depot%203&limit=50",
    "search_rare": "/api/orders/?q=no-such-text&limit=50",
    "counts": "/api/orders/counts",
    "ids_50": "/api/orders/?ids=$FIFTY",
    # As the driver app asks for its list (WaybillClient's driverList): active, and finished lately.
    "driver_active_half": ("/api/orders/?active=true&limit=500", driver_token),
    "driver_recent_half": ("/api/orders/?status=completed&status=cancelled&updated_after=$SINCE&limit=500", driver_token),
    "driver_counts": ("/api/orders/counts", driver_token),
}
def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100
connection = http.client.HTTPConnection("127.0.0.1", port)
result = {}
for name, target in paths.items():
    path, who = target if isinstance(target, tuple) else (target, token)
    times, size, used = [], 0, cpu()
    for _ in range(repeat):
        started = time.perf_counter()
        connection.request("GET", path, headers={"Authorization": "Bearer " + who})
        answer = connection.getresponse()
        body = answer.read()
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status == 200, (path, answer.status)
        size = len(body)
    xs = sorted(times)
    result[name] = {"median_ms": round(statistics.median(xs), 2), "p95_ms": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))], 2),
                    "n": len(xs), "bytes": size, "server_cpu_ms": round((cpu() - used) / repeat * 1000, 2)}
print(json.dumps(result))
PY
)
sleep 0.3

panel=$(cd "$ROOT/scripts" && "$PY" bench_history_panel.py "$BASE" "$DATA/seed.json" "$EVENTS")

python3 - "$seed_seconds" "$DRIVERS" "$ACTIVE" "$FINISHED" "$pages" "$panel" <<PY | tee -a "$OUT/history.jsonl"
import json, sys, datetime
seed_seconds, drivers, active, finished, pages, panel = sys.argv[1:7]
print(json.dumps({
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "orders": int(drivers) * (int(active) + int(finished)), "seed_seconds": round(float(seed_seconds), 1),
    "server": json.loads(pages), "panel": json.loads(panel)}, indent=1))
PY
