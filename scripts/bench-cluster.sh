#!/usr/bin/env bash
# `scripts/bench.sh cluster …`: the shared harness against two nodes on PostgreSQL + Redis
# (scripts/cluster.sh), sockets and writes spread over both nodes (fixtures with base_urls/ws_urls).
#
#   scripts/bench.sh cluster                        the suite: fan-out at 200/s; 500, 1000, 1500/s; 200/s with Redis killed 10 s
#   scripts/bench.sh cluster fanout RATE SECONDS    one fan-out run
#   scripts/bench.sh cluster outage RATE SECONDS    one run with Redis SIGKILLed from 5 s to 15 s
#
# Results (one JSON line each) are appended to bench-results/results.jsonl, labelled waybill-cluster-….
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="${WAYBILL_BENCH_DIR:-$ROOT/../shared/bench}"
DRIVERS="${WAYBILL_BENCH_DRIVERS:-50}"
ORDERS="${WAYBILL_BENCH_ORDERS:-20}"
OUT="$ROOT/bench-results"
mkdir -p "$OUT"
export WAYBILL_CLUSTER_DIR="$(mktemp -d /tmp/waybill-bench-cluster.XXXXXX)"
export WAYBILL_CLUSTER_PORT="${WAYBILL_BENCH_PORT:-8090}"
export WAYBILL_CLUSTER_PG_PORT="${WAYBILL_BENCH_PG_PORT:-25442}"
export WAYBILL_CLUSTER_REDIS_PORT="${WAYBILL_BENCH_REDIS_PORT:-26389}"
BIN="${WAYBILL_BENCH_BIN:-$(cd "$ROOT" && swift build -c release --show-bin-path)/waybill}"
[ -x "$BIN" ] || (cd "$ROOT" && swift build -c release --product waybill)
export WAYBILL_BIN="$BIN"
STATE="$WAYBILL_CLUSTER_DIR"
N1=$((WAYBILL_CLUSTER_PORT + 1))
N2=$((WAYBILL_CLUSTER_PORT + 2))

cleanup() { "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1 || true; }
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" start-all >&2
"$BIN" seed --database-url "postgresql://waybill@127.0.0.1:$WAYBILL_CLUSTER_PG_PORT/waybill" \
    --drivers "$DRIVERS" --orders-per-driver "$ORDERS" --out "$STATE/seed.json" 2>/dev/null
python3 - "$STATE/seed.json" "$STATE/fixtures.json" "$N1" "$N2" "$(cat "$STATE/node1.pid")" <<'PY'
import json, sys
seed = json.load(open(sys.argv[1]))
n1, n2 = sys.argv[3], sys.argv[4]
seed.update(base_url=f"http://127.0.0.1:{n1}", ws_url=f"ws://127.0.0.1:{n1}/ws/orders/",
            base_urls=[f"http://127.0.0.1:{n1}", f"http://127.0.0.1:{n2}"],
            ws_urls=[f"ws://127.0.0.1:{n1}/ws/orders/", f"ws://127.0.0.1:{n2}/ws/orders/"],
            server_pid=int(sys.argv[5]))
json.dump(seed, open(sys.argv[2], "w"))
PY
# Both nodes must have fanned out the seed's events before measuring (else they arrive mid-run).
for _ in $(seq 1 200); do
    a="$(curl -sf "http://127.0.0.1:$N1/metrics" | awk '/^waybill_delivered_event_id /{print $2}')"
    b="$(curl -sf "http://127.0.0.1:$N2/metrics" | awk '/^waybill_delivered_event_id /{print $2}')"
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" -gt 0 ] && break
    sleep 0.1
done
sleep 0.5

watch_args=(--watch "node2=$(cat "$STATE/node2.pid")" --watch "redis=$(cat "$STATE/redis.pid")"
    --watch "postgres=$(head -1 "$STATE/pg/data/postmaster.pid")")

fanout() {  # fanout RATE SECONDS LABEL
    "$BENCH/bench.sh" --fixtures "$STATE/fixtures.json" --scenario fanout --rate "$1" --duration "$2" \
        --label "$3" --out "$OUT/results.jsonl" "${watch_args[@]}"
}

outage() {  # outage RATE SECONDS: Redis SIGKILLed 5 s into the run, back 10 s later
    ( sleep 5; "$ROOT/scripts/cluster.sh" kill redis >/dev/null; sleep 10; "$ROOT/scripts/cluster.sh" start redis >/dev/null ) &
    local killer=$!
    fanout "$1" "$2" "waybill-cluster-redis-outage-$1"
    wait "$killer" || true
}

case "${1:-suite}" in
    fanout) fanout "${2:-200}" "${3:-20}" "waybill-cluster-fanout-${2:-200}" ;;
    outage) outage "${2:-200}" "${3:-20}" ;;
    suite)
        fanout 200 20 waybill-cluster-fanout-200
        for rate in 500 1000 1500; do fanout "$rate" 15 "waybill-cluster-fanout-$rate"; done
        outage 200 20
        ;;
    *) echo "usage: scripts/bench.sh cluster [fanout|outage RATE SECONDS]" >&2; exit 2 ;;
esac
echo "node logs: $(grep -c 'level=error' "$STATE/node1.log" "$STATE/node2.log" | tr '\n' ' ') error lines" >&2
