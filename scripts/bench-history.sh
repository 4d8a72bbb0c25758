#!/usr/bin/env bash
# The long-history benchmark (docs/HISTORY-BENCH.md): a company with a long past, measured where the
# issue set its targets.
#
#   scripts/bench-history.sh                 100 drivers × (2 active + 1000 finished) = 100 200 orders
#   DRIVERS=20 FINISHED=100 scripts/bench-history.sh     a smaller company
#
# Starts the release build on 127.0.0.1 with a fresh SQLite data dir, seeds it, then measures:
#   1. server time per list page (duration_ms of the server's own request log; median and p95 of
#      REPEAT requests each) and its size: the panel's first page, history pages near the top and
#      deep down, a status page, a driver's page, a text search, and ids= for 50 ids;
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

get() { curl -s -o /dev/null -w '%{size_download}' -H "Authorization: Bearer $TOKEN" "$BASE$1"; }
# A page in the middle of the history, the first driver, and 50 ids spread over the history.
IDS=$(curl -s -H "Authorization: Bearer $TOKEN" "$BASE/api/orders/?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
MID=$((IDS / 2))
DRIVER=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["drivers"][0]["id"])' "$DATA/seed.json")
FIFTY=$(python3 -c 'import sys; n=int(sys.argv[1]); print(",".join(str(1 + i * (n // 50)) for i in range(50)))' "$IDS")

declare -A PATHS=(
    [panel_first_page]="/api/orders/?active=true&limit=50"
    [history_first_page]="/api/orders/?limit=50"
    [history_deep_page]="/api/orders/?before=$MID&limit=50"
    [default_limit_100]="/api/orders/"
    [status_completed]="/api/orders/?status=completed&before=$MID&limit=50"
    [driver_page]="/api/orders/?driver_id=$DRIVER&limit=50"
    [search_common]="/api/orders/?q=depot%203&limit=50"
    [search_rare]="/api/orders/?q=no-such-text&limit=50"
    [counts]="/api/orders/counts"
    [ids_50]="/api/orders/?ids=$FIFTY"
)
declare -A BYTES=()
for name in "${!PATHS[@]}"; do
    path="${PATHS[$name]}"
    sep='?'; [[ "$path" == *\?* ]] && sep='&'
    for _ in $(seq 1 "$REPEAT"); do BYTES[$name]=$(get "$path${sep}bench=$name"); done
done
sleep 0.3

panel=$(cd "$ROOT/scripts" && "$PY" bench_history_panel.py "$BASE" "$DATA/seed.json" "$EVENTS")

python3 - "$DATA/server.log" "$seed_seconds" "$DRIVERS" "$ACTIVE" "$FINISHED" "$panel" <<PY | tee -a "$OUT/history.jsonl"
import json, re, statistics, sys, datetime
log, seed_seconds, drivers, active, finished, panel = sys.argv[1:7]
bytes_ = {$(for n in "${!BYTES[@]}"; do printf '"%s": %s, ' "$n" "${BYTES[$n]}"; done)}
times = {}
for line in open(log):
    m = re.search(r'bench=(\w+).* status=200 duration_ms=([\d.]+)', line)
    if m: times.setdefault(m.group(1), []).append(float(m.group(2)))
def p95(xs): xs = sorted(xs); return xs[min(len(xs) - 1, int(0.95 * len(xs)))]
pages = {name: {"median_ms": round(statistics.median(xs), 2), "p95_ms": round(p95(xs), 2), "n": len(xs),
                "bytes": bytes_.get(name)} for name, xs in sorted(times.items())}
print(json.dumps({
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "orders": int(drivers) * (int(active) + int(finished)), "seed_seconds": round(float(seed_seconds), 1),
    "server": pages, "panel": json.loads(panel)}, indent=1))
PY
