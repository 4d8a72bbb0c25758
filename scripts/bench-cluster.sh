#!/usr/bin/env bash
# `scripts/bench.sh cluster …`: the shared harness against two nodes on PostgreSQL + Redis
# (scripts/cluster.sh), sockets and writes spread over both nodes (fixtures with base_urls/ws_urls).
#
#   scripts/bench.sh cluster                        the suite: fan-out at 200/s; 500, 1000, 1500/s; 200/s with Redis killed 10 s
#   scripts/bench.sh cluster fanout RATE SECONDS    one fan-out run
#   scripts/bench.sh cluster outage RATE SECONDS    one run with Redis SIGKILLed from 5 s to 15 s
#   scripts/bench.sh cluster paced RATE SECONDS     C clients instead of the Python harness: one wrk per
#                                                   node (scripts/bench_paced.lua, half the rate each, any
#                                                   driver's order) and one wsdrain per node (half the
#                                                   drivers each), so most events cross nodes; lost =
#                                                   events committed (PostgreSQL's counter) - frames
#   scripts/bench.sh cluster paced RATE SECONDS redis   the same with Redis SIGKILLed from 5 s to 15 s
#   scripts/bench.sh cluster paced RATE SECONDS node2   writes through nginx, every socket on node 1,
#                                                   node 2 SIGKILLed at 5 s and started again at 15 s
#   scripts/bench.sh cluster paced RATE SECONDS node2-term   the same with node 2 stopped as a deploy
#                                                   stops it (SIGTERM, its drain waited for) at 5 s
#   scripts/bench.sh cluster paced RATE SECONDS node2-cut    a partition: node 2 runs in a network namespace
#                                                   (root; scripts/cluster.sh, WAYBILL_CLUSTER_NETNS) and is cut
#                                                   off from PostgreSQL and Redis from 5 s to 15 s, its packets
#                                                   dropped; it stays reachable, and keeps its writer and
#                                                   its half of the sockets, whose events must arrive once
#                                                   it is joined again (lost counts them as for the others)
#
# WAYBILL_BENCH_CLUSTER_WRITE_NODES="2" (paced only; default "1 2") sends every write to node 2 at the
# whole rate: node 1 starts first and leads the relay, so every event is then a follower's commit,
# found by the leader's poll. The result line's relay_leader names every node that logged taking the
# lease since the cluster started (one name unless the lease moved).
# WAYBILL_BENCH_PG_STATEMENTS=1 (paced only) loads pg_stat_statements and writes what PostgreSQL ran
# during the window, by total time, to bench-results/pg-statements-<UTC time>.txt. The statistics
# cost PostgreSQL CPU: compare the CPU figures only of runs without them.
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
[ -x "$BIN" ] || "$ROOT/scripts/build-release.sh"
export WAYBILL_BIN="$BIN"
# The nodes read them from the environment: the sinks open many sockets, and the writers send
# thousands of writes a second, per seeded token (bench.sh).
export WAYBILL_MAX_SOCKETS_PER_USER=1000000
export WAYBILL_USER_REQUESTS_PER_SECOND=0
STATE="$WAYBILL_CLUSTER_DIR"
N1=$((WAYBILL_CLUSTER_PORT + 1))
N2=$((WAYBILL_CLUSTER_PORT + 2))
# A partition needs node 2 in a namespace of its own, where it listens on its link's address.
[ "${1:-}" = paced ] && [ "${4:-}" = node2-cut ] && export WAYBILL_CLUSTER_NETNS=1
H2=127.0.0.1
[ -n "${WAYBILL_CLUSTER_NETNS:-}" ] && H2=10.231.1.2

PG_STATEMENTS="${WAYBILL_BENCH_PG_STATEMENTS:-0}"
[ "$PG_STATEMENTS" = 1 ] && export WAYBILL_CLUSTER_PG_OPTIONS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"

# WAYBILL_BENCH_KEEP_LOGS=DIR copies the nodes' and nginx's logs there before the cluster is removed.
cleanup() {
    if [ -n "${WAYBILL_BENCH_KEEP_LOGS:-}" ]; then
        mkdir -p "$WAYBILL_BENCH_KEEP_LOGS" && cp "$STATE"/*.log "$STATE"/nginx/*.log "$WAYBILL_BENCH_KEEP_LOGS"/ 2>/dev/null || true
    fi
    "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" start-all >&2
if [ -n "${WAYBILL_CLUSTER_NETNS:-}" ]; then
    # The node cut off leads the relay (the harder case): node 1, which took the lease first, is
    # restarted, and node 2 takes it over.
    "$ROOT/scripts/cluster.sh" stop node1 >/dev/null
    for _ in $(seq 1 100); do grep -q 'outbox relay leads' "$STATE/node2.log" && break; sleep 0.1; done
    "$ROOT/scripts/cluster.sh" start node1 >/dev/null
fi
"$BIN" seed --database-url "postgresql://waybill@127.0.0.1:$WAYBILL_CLUSTER_PG_PORT/waybill" \
    --drivers "$DRIVERS" --orders-per-driver "$ORDERS" --out "$STATE/seed.json" 2>/dev/null
python3 - "$STATE/seed.json" "$STATE/fixtures.json" "$N1" "$N2" "$(cat "$STATE/node1.pid")" "$H2" <<'PY'
import json, sys
seed = json.load(open(sys.argv[1]))
n1, n2, h2 = sys.argv[3], sys.argv[4], sys.argv[6]
seed.update(base_url=f"http://127.0.0.1:{n1}", ws_url=f"ws://127.0.0.1:{n1}/ws/orders/",
            base_urls=[f"http://127.0.0.1:{n1}", f"http://{h2}:{n2}"],
            ws_urls=[f"ws://127.0.0.1:{n1}/ws/orders/", f"ws://{h2}:{n2}/ws/orders/"],
            server_pid=int(sys.argv[5]))
json.dump(seed, open(sys.argv[2], "w"))
PY
# Both nodes must have fanned out the seed's events before measuring (else they arrive mid-run).
for _ in $(seq 1 200); do
    a="$(curl -sf "http://127.0.0.1:$N1/metrics" | awk '/^waybill_delivered_event_id /{print $2}')"
    b="$(curl -sf ${WAYBILL_CLUSTER_NETNS:+-H "Authorization: Bearer $(cat "$STATE/metrics-token")"} "http://$H2:$N2/metrics" | awk '/^waybill_delivered_event_id /{print $2}')"
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

# "unix_time node1_ticks node2_ticks postgres_ticks machine_total machine_idle" (utime+stime, /proc).
cluster_cpu() {
    local pg=0 p
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = postgres ] || continue
        pg=$((pg + $(awk '{print $14+$15}' "$p/stat" 2>/dev/null || echo 0)))
    done
    # A node killed and started again is another process: its figure then means nothing.
    echo "$(date +%s.%N) $(awk '{print $14+$15}' "/proc/$(cat "$STATE/node1.pid")/stat" 2>/dev/null || echo 0) \
$(awk '{print $14+$15}' "/proc/$(cat "$STATE/node2.pid")/stat" 2>/dev/null || echo 0) $pg \
$(awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $5+$6}' /proc/stat)"
}

pg_sql() { psql -h 127.0.0.1 -p "$WAYBILL_CLUSTER_PG_PORT" -U waybill -d waybill -qtAc "$1"; }

committed_events() { pg_sql "SELECT last_id FROM event_counter"; }

paced() {  # paced RATE SECONDS [redis|node2|node2-term|node2-cut]
    local rate="$1" dur="$2" outage="${3:-}" per_writer write_nodes="${WAYBILL_BENCH_CLUSTER_WRITE_NODES:-1 2}"
    case "$outage" in redis|node2|node2-term|node2-cut|"") ;; *) echo "paced: the outage is redis, node2, node2-term or node2-cut" >&2; exit 2 ;; esac
    # Which node is down for a while, its sockets moved to node 1 and every write sent through nginx.
    local node_down=""; case "$outage" in node2|node2-term) node_down=1 ;; esac
    case "$write_nodes" in "1 2"|1|2) ;; *) echo "paced: WAYBILL_BENCH_CLUSTER_WRITE_NODES is \"1 2\", 1 or 2" >&2; exit 2 ;; esac
    if [ -n "$node_down" ] && [ "$write_nodes" != "1 2" ]; then
        echo "paced: with node 2 killed every write goes through nginx; WAYBILL_BENCH_CLUSTER_WRITE_NODES does not apply" >&2; exit 2
    fi
    # The rate each writer sends.
    per_writer="$(python3 -c "print($rate / len('$write_nodes'.split()))")"
    python3 - "$STATE/fixtures.json" "$STATE" "$N1" "$N2" "$outage" "$H2" <<'PY'
import json, sys
fx = json.load(open(sys.argv[1])); state = sys.argv[2]; outage = sys.argv[5]; hosts = ["127.0.0.1", sys.argv[6]]
drivers = fx["drivers"]; half = len(drivers) // 2
ids = [i for d in drivers for i in d["order_ids"]]
open(f"{state}/paced-fixtures.lua", "w").write(
    "return {ids = {%s}, token = %s}\n" % (",".join(map(str, ids)), json.dumps(fx["dispatcher_token"])))
# With node 2 killed, every socket is on node 1 (a killed node's sockets would count as lost); cut
# off, node 2 keeps its sockets, and their events must arrive once it is back.
parts = [drivers, []] if outage in ("node2", "node2-term") else [drivers[:half], drivers[half:]]
for n, (port, part, host) in enumerate(zip(sys.argv[3:5], parts, hosts), 1):
    json.dump(dict(fx, drivers=part, ws_url=f"ws://{host}:{port}/ws/orders/"), open(f"{state}/drain{n}.json", "w"))
PY
    # The drains stop 2 s after the writers: an event delivered later than that counts as lost.
    local drains=() n sockets
    for n in 1 2; do
        sockets="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["drivers"]))' "$STATE/drain$n.json")"
        [ "$sockets" = 0 ] && { echo '{"latency_ms":{"n":0}}' >"$STATE/drain$n.out"; : >"$STATE/drain$n.err"; continue; }
        WAYBILL_BENCH_STATE="$STATE/drain$n" "$BENCH/drain.sh" --fixtures "$STATE/drain$n.json" \
            --connections "$sockets" --duration "$(( dur + 4 ))" >"$STATE/drain$n.out" 2>"$STATE/drain$n.err" &
        drains+=($!)
    done
    sleep 2
    local c0 c1 before after killer=""
    if [ "$PG_STATEMENTS" = 1 ]; then
        pg_sql "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
        pg_sql "SELECT pg_stat_statements_reset()" >/dev/null
    fi
    c0="$(committed_events)"
    before="$(cluster_cpu)"
    case "$outage" in
        redis) ( sleep 5; "$ROOT/scripts/cluster.sh" kill redis >/dev/null; sleep 10; "$ROOT/scripts/cluster.sh" start redis >/dev/null ) &
            killer=$! ;;
        node2) ( sleep 5; "$ROOT/scripts/cluster.sh" kill node2 >/dev/null; sleep 10; "$ROOT/scripts/cluster.sh" start node2 >/dev/null ) &
            killer=$! ;;
        node2-term) ( sleep 5; "$ROOT/scripts/cluster.sh" stop node2 >/dev/null; sleep 5; "$ROOT/scripts/cluster.sh" start node2 >/dev/null ) &
            killer=$! ;;
        node2-cut) ( sleep 5; "$ROOT/scripts/cluster.sh" cut node2 >/dev/null; sleep 10; "$ROOT/scripts/cluster.sh" heal node2 >/dev/null ) &
            killer=$! ;;
    esac
    local writers=() port host
    for n in $write_nodes; do
        port=$N1 host=127.0.0.1; [ "$n" = 2 ] && port=$N2 host=$H2
        # Through nginx when a node is killed: it sends each request to a live node.
        [ -n "$node_down" ] && port=$WAYBILL_CLUSTER_PORT host=127.0.0.1
        timeout -k 5 $(( dur + 30 )) wrk -t 1 -c "${WAYBILL_BENCH_WRK_CONNECTIONS:-64}" -d "${dur}s" --latency -s "$ROOT/scripts/bench_paced.lua" \
            "http://$host:$port" -- "$STATE/paced-fixtures.lua" "$(python3 -c "print(1000 / $per_writer)")" \
            >"$STATE/wrk$n.txt" &
        writers+=($!)
    done
    wait "${writers[@]}" || true
    [ -n "$killer" ] && { wait "$killer" || true; }
    after="$(cluster_cpu)"
    if [ "$PG_STATEMENTS" = 1 ]; then
        local report; report="$OUT/pg-statements-$(date -u +%Y%m%d-%H%M%S).txt"
        pg_sql "SELECT calls, round(total_exec_time::numeric, 1) AS ms, round((total_exec_time / greatest(calls, 1) * 1000)::numeric, 1) AS us_per_call,
                       rows, shared_blks_hit + shared_blks_read AS blocks, left(regexp_replace(query, '\s+', ' ', 'g'), 160)
                FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 30" >"$report"
        echo "PostgreSQL statements: $report" >&2
    fi
    wait "${drains[@]}" || true
    sleep 1
    c1="$(committed_events)"
    cat "$STATE/drain1.err" "$STATE/drain2.err" >&2
    local leader=""
    grep -q 'outbox relay leads' "$STATE/node1.log" && leader="node1"
    grep -q 'outbox relay leads' "$STATE/node2.log" && leader="$leader${leader:+ }node2"
    python3 - "$STATE" "$before" "$after" "$dur" "$rate" "$(getconf CLK_TCK)" "$c0" "$c1" "$outage" "$write_nodes" "$leader" <<'PY' | tee -a "$OUT/results.jsonl"
import json, re, sys
state, outage, write_nodes, leader = sys.argv[1], sys.argv[9], sys.argv[10].split(), sys.argv[11]
b, a = [list(map(float, x.split())) for x in sys.argv[2:4]]
dur, rate, tck = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
committed = int(sys.argv[8]) - int(sys.argv[7])
drains = [json.loads(open(f"{state}/drain{n}.out").read().strip().splitlines()[-1]) for n in (1, 2)]
writes, errors, answers = 0, 0, []
for n in map(int, write_nodes):
    wrk = open(f"{state}/wrk{n}.txt").read()
    m = re.search(r"(\d+) requests in ([\d.]+)s", wrk)
    s = re.search(r"errors: (\d+) of \d+; answer p50 ([\d.]+) ms, p99 ([\d.]+) ms", wrk)
    writes += int(m.group(1)) if m else 0
    errors += int(s.group(1)) if s else 0
    answers.append({"p50": float(s.group(2)), "p99": float(s.group(3))} if s else None)
frames = sum(d["latency_ms"]["n"] for d in drains)
wall = a[0] - b[0]
per_write = lambda i: round((a[i] - b[i]) / tck * 1e6 / committed, 1) if committed else None
# PostgreSQL's figure sums the backends alive at both samples: a node killed mid-run takes its
# backends' ticks with it, so that figure (and node 2's, another process after its restart) is left out.
killed = outage in ("node2", "node2-term")
pg_cpu = None if killed else per_write(3)
print(json.dumps({"scenario": "cluster-paced", "label": f"waybill-cluster-paced-{int(rate)}" + (f"-{outage}-stopped" if outage == "node2-term" else "-node2-cut-off" if outage == "node2-cut" else f"-{outage}-killed" if outage else "")
    + ("" if write_nodes == ["1", "2"] else f"-writes-node{write_nodes[0]}"),
    "write_nodes": write_nodes, "relay_leader": leader,
    "offered_writes_per_s": rate, "duration_s": dur, "writes": writes,
    "writes_per_s": round(writes / dur, 1), "write_errors": errors, "answer_ms": answers,
    "events_committed": committed, "committed_per_s": round(committed / dur, 1), "event_frames": frames,
    "lost": committed - frames,
    "delivery_latency_ms": [d["latency_ms"] for d in drains],
    "cpu_us_per_write": {"node1": per_write(1), "node2": None if killed else per_write(2), "postgres": pg_cpu},
    "cpu": {"wall_s": round(wall, 2), "node1": round((a[1] - b[1]) / tck / wall, 3),
            "node2": round((a[2] - b[2]) / tck / wall, 3), "postgres": round((a[3] - b[3]) / tck / wall, 3),
            "machine_busy": round(1 - (a[5] - b[5]) / (a[4] - b[4]), 3) if a[4] > b[4] else None}},
    separators=(",", ":")))
PY
}

case "${1:-suite}" in
    fanout) fanout "${2:-200}" "${3:-20}" "waybill-cluster-fanout-${2:-200}" ;;
    outage) outage "${2:-200}" "${3:-20}" ;;
    paced) paced "${2:-1000}" "${3:-15}" "${4:-}" ;;
    suite)
        fanout 200 20 waybill-cluster-fanout-200
        for rate in 500 1000 1500; do fanout "$rate" 15 "waybill-cluster-fanout-$rate"; done
        outage 200 20
        ;;
    *) echo "usage: scripts/bench.sh cluster [fanout|outage RATE SECONDS | paced RATE SECONDS [redis|node2|node2-term|node2-cut]]" >&2; exit 2 ;;
esac
echo "node logs: $(grep -c 'level=error' "$STATE/node1.log" "$STATE/node2.log" | tr '\n' ' ') error lines" >&2
