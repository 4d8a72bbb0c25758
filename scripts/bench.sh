#!/usr/bin/env bash
# Benchmarks the release build with the harness in ../shared/bench (read-only; it keeps its venv in
# $WAYBILL_BENCH_STATE). Starts a fresh server on 127.0.0.1, seeds it, runs the scenarios, stops it.
#   scripts/bench.sh                      the default suite (fan-out at several rates, idle sockets, saturation)
#   scripts/bench.sh fanout 2000 20       one fan-out run: rate, duration
#   scripts/bench.sh connections 5000 30  idle sockets: count, hold seconds (+ scripts/pong_probe.py on one more socket)
#   scripts/bench.sh paced 2000 20 [50 [drivers|dispatcher]]
#                                         wrk PATCHes on a fixed schedule (scripts/bench_paced.lua) + wsdrain:
#                                         rate, duration, sockets, whose (dispatcher: every socket gets every event);
#                                         WAYBILL_PACED_GET=PATH sends GETs of PATH instead (ID: a random order id),
#                                         for what a request without a write costs (server_cpu_us_per_request)
#   scripts/bench.sh saturate 20 [2000 [all|dispatcher|drivers [CONNECTIONS]]]
#                                         wrk PATCH load + wsdrain: duration, sink sockets, whose tokens,
#                                         wrk connections (default 32, patchload.sh's)
#   scripts/bench.sh cluster [fanout|outage|paced RATE SECONDS]
#                                         two nodes on PostgreSQL + Redis (scripts/bench-cluster.sh)
#   scripts/bench.sh compare [--quick]    Waybill, the Django Channels peer and Nchan on the issue-10
#                                         scenarios, one markdown table (scripts/bench-compare.sh)
#   scripts/bench.sh storm [CLIENTS [PROCESSES]]
#                                         reconnect storm after a restart (scripts/bench-storm.sh)
#   scripts/bench.sh floor 1000 20 [get|patch]
#                                         the same paced requests to a bare libwebsockets server
#                                         (scripts/lws_floor.c): what lws itself costs per request
#   WAYBILL_BENCH_IDLE_HTTP=N scripts/bench.sh …
#                                         any of the above with N kept-alive HTTP connections held idle
#                                         beside it (scripts/idle_clients.py; the server's keep-alive is
#                                         raised to an hour so they stay)
#   WAYBILL_BENCH_IDLE_WS=N scripts/bench.sh paced RATE SECONDS 40
#                                         with N WebSockets held open and quiet beside it
#                                         (scripts/idle_clients.py --kind ws), on the last 10 drivers' tokens
#                                         (WAYBILL_BENCH_IDLE_WS_DRIVERS): give paced at most the
#                                         other drivers' sockets, so the idle ones get no event
#   scripts/bench.sh ab 6 BIN_A BIN_B [RATE [SECONDS]]
#                                         CPU per write of two builds run side by side, `paced` against
#                                         both at once for each round (scripts/bench-ab.sh)
# Results (one JSON line each) are appended to bench-results/results.jsonl (git-ignored), or to
# $WAYBILL_BENCH_OUT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = cluster ]; then shift; exec "$ROOT/scripts/bench-cluster.sh" "$@"; fi
if [ "${1:-}" = compare ]; then shift; exec "$ROOT/scripts/bench-compare.sh" "$@"; fi
if [ "${1:-}" = storm ]; then shift; exec "$ROOT/scripts/bench-storm.sh" "$@"; fi
if [ "${1:-}" = floor ]; then shift; exec "$ROOT/scripts/bench-floor.sh" "$@"; fi
if [ "${1:-}" = ab ]; then shift; exec "$ROOT/scripts/bench-ab.sh" "$@"; fi
BENCH="${WAYBILL_BENCH_DIR:-$ROOT/../shared/bench}"
PORT="${WAYBILL_BENCH_PORT:-8090}"
DRIVERS="${WAYBILL_BENCH_DRIVERS:-50}"
ORDERS="${WAYBILL_BENCH_ORDERS:-20}"
OUT="$ROOT/bench-results"
mkdir -p "$OUT"
RESULTS="${WAYBILL_BENCH_OUT:-$OUT/results.jsonl}"
DATA="$(mktemp -d /tmp/waybill-bench.XXXXXX)"
# WAYBILL_BENCH_BIN runs another build (e.g. a saved copy, for A/B runs); WAYBILL_EVENT_LOOP=poll|libev
# reaches the server through the environment.
BIN="${WAYBILL_BENCH_BIN:-$(cd "$ROOT" && swift build -c release --show-bin-path)/waybill}"
[ -x "$BIN" ] || "$ROOT/scripts/build-release.sh"

cleanup() {
    for pid in ${IDLE_PIDS:-}; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
    [ -n "${SERVER_PID:-}" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    # WAYBILL_BENCH_KEEP=1 keeps the data directory (the server's log, its database) to look into a run.
    if [ -n "${WAYBILL_BENCH_KEEP:-}" ]; then echo "bench: kept $DATA" >&2; else rm -rf "$DATA"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # a timeout's TERM still runs cleanup (stops the server)

start_server() {
    # The harness opens thousands of sockets and sends thousands of writes a second with a few
    # seeded tokens (one dispatcher, N drivers): the per-user caps (for real users) are lifted for it.
    # WAYBILL_BENCH_USER_RATE=N keeps the request limiter on at N a second (and burst), to measure it.
    local rate="${WAYBILL_BENCH_USER_RATE:-0}"
    "$BIN" serve --port "$PORT" --data-dir "$DATA" --max-socket-queue-bytes 4194304 --max-sockets-per-user 1000000 \
        --user-requests-per-second "$rate" --user-request-burst "$(( rate > 0 ? rate : 1 ))" \
        2>"$DATA/server.log" &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    "$BIN" seed --data-dir "$DATA" --drivers "$DRIVERS" --orders-per-driver "$ORDERS" --out "$DATA/seed.json" 2>/dev/null
    python3 - "$DATA/seed.json" "$DATA/fixtures.json" "$PORT" "$SERVER_PID" <<'PY'
import json, sys
seed = json.load(open(sys.argv[1]))
seed.update(base_url=f"http://127.0.0.1:{sys.argv[3]}", ws_url=f"ws://127.0.0.1:{sys.argv[3]}/ws/orders/",
            server_pid=int(sys.argv[4]))
json.dump(seed, open(sys.argv[2], "w"))
PY
    # The seed is committed by another process: the server's relay only finds its events (1000 orders) on
    # its next poll (every 1 s). Wait until they are relayed, or they reach the driver sockets during
    # the measurement (as frames for orders the harness has not written: events_unknown_order).
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -qx 'waybill_outbox_lag_seconds 0\(\.0\)\?' && break
        sleep 0.1
    done
    sleep 0.5
}

# The server's committed-events counter (from /metrics).
committed_events() {
    curl -sf "http://127.0.0.1:$PORT/metrics" | awk '/^waybill_events_committed_total /{print $2}' || echo 0
}

# "wall_s server_ticks drain_ticks machine_total_ticks machine_idle_ticks" (utime+stime from /proc).
cpu_sample() {
    local t s d
    t="$(date +%s.%N)"
    s="$(awk '{print $14+$15}' "/proc/$SERVER_PID/stat" 2>/dev/null || echo 0)"
    d="$(awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0)"
    echo "$t $s $d $(awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $5+$6}' /proc/stat)"
}

# probe_during_hold N HOLD: waits (up to 180 s) until N sockets are open, then runs the pong probe for
# the hold minus 5 s (at least 5 s); its JSON line goes to $DATA/probe.json. If the sockets never all
# open, no probe runs (a probe of an empty server would be labelled with N). Never fails the caller.
probe_during_hold() {
    set +e +o pipefail
    local n="$1" hold="$2" open=0 token
    token="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dispatcher_token"])' "$DATA/fixtures.json")"
    local metrics_auth=()
    [ -n "${WAYBILL_METRICS_TOKEN:-}" ] && metrics_auth=(-H "Authorization: Bearer $WAYBILL_METRICS_TOKEN")
    for _ in $(seq 1 1800); do
        open="$(curl -sf "${metrics_auth[@]}" "http://127.0.0.1:$PORT/metrics" | awk '/^waybill_websockets_open/{s+=$2} END{print s+0}')"
        [ "${open:-0}" -ge "$n" ] && break
        sleep 0.1
    done
    if [ "${open:-0}" -lt "$n" ]; then echo "pong probe: only ${open:-0} of $n sockets opened; no probe" >&2; return 0; fi
    timeout -k 5 $(( hold + 30 )) python3 "$ROOT/scripts/pong_probe.py" --port "$PORT" --token "$token" \
        --duration "$(( hold > 10 ? hold - 5 : 5 ))" 2>"$DATA/probe.err" |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d.update(scenario="pong_probe", sockets=int(sys.argv[1])); print(json.dumps(d, separators=(",", ":")))' "$n" \
        >"$DATA/probe.json" || true
}

run() {
    local kind="$1"; shift
    case "$kind" in
        fanout)
            "$BENCH/bench.sh" --fixtures "$DATA/fixtures.json" --scenario fanout --rate "${1:-100}" \
                --duration "${2:-20}" --label "waybill-fanout-${1:-100}" --out "$RESULTS" ;;
        connections)
            # Beside the harness, `scripts/pong_probe.py` pings every 20 ms on one socket of its own during
            # the hold: the harness times all N sockets' pongs in one Python loop, whose own lag dominates
            # its tail at 10 000+ sockets. Its line (scenario "pong_probe") follows the harness's.
            probe_during_hold "${1:-2000}" "${2:-30}" &
            local probe=$!
            "$BENCH/bench.sh" --fixtures "$DATA/fixtures.json" --scenario connections --connections "${1:-2000}" \
                --hold "${2:-30}" --ping-interval 10 --label "waybill-connections-${1:-2000}" --out "$RESULTS"
            wait "$probe" || true
            if [ -s "$DATA/probe.json" ]; then tee -a "$RESULTS" <"$DATA/probe.json"; fi ;;
        saturate)
            # $1 duration, $2 sink sockets (default 2000), $3 who: all (drivers + dispatcher, round-robin),
            # dispatcher (every socket gets every event, like Nchan's one channel) or drivers.
            local dur="${1:-20}" conns="${2:-2000}" who="${3:-all}" writers="${4:-32}"
            "$BENCH/drain.sh" --fixtures "$DATA/fixtures.json" --who "$who" --connections "$conns" --duration "$(( dur + 4 ))" \
                >"$DATA/drain.json" 2>"$DATA/drain.err" &
            local drain=$!
            sleep 2
            local before after c0 c1
            c0="$(committed_events)"
            before="$(cpu_sample "$drain")"
            "$BENCH/patchload.sh" --fixtures "$DATA/fixtures.json" --duration "$dur" --connections "$writers" \
                | tee "$DATA/wrk.txt" | tee -a "$OUT/patchload.txt"
            after="$(cpu_sample "$drain")"
            wait "$drain" || true
            c1="$(committed_events)"
            cat "$DATA/drain.err" >&2
            # One JSON line: wsdrain's own line plus the write count, frames per second of the write
            # window (wsdrain's frames_per_s divides by its whole window, which is 4 s longer) and CPU.
            python3 - "$DATA/drain.json" "$DATA/wrk.txt" "$before" "$after" "$dur" "$conns" "$who" "$(getconf CLK_TCK)" "$c0" "$c1" "$writers" <<'PY' | tee -a "$RESULTS"
import json, re, sys
drain = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
wrk = open(sys.argv[2]).read()
b, a = [list(map(float, x.split())) for x in sys.argv[3:5]]
dur, conns, who = float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
m = re.search(r"(\d+) requests in ([\d.]+)s", wrk); n2 = re.search(r"non-2xx: (\d+)", wrk)
wall = a[0] - b[0]; tck = float(sys.argv[8])
events = drain["latency_ms"]["n"]  # frames carrying changed_at: the event frames (not `connected`)
# Events the server committed in the window (its own counter; every PATCH commits one). In the
# dispatcher shape every socket must get every one of them: lost = committed x connected - frames.
committed = int(float(sys.argv[10])) - int(float(sys.argv[9]))
lost = committed * drain["connected"] - events if who == "dispatcher" else None
print(json.dumps({"scenario": "saturate", "label": f"waybill-saturate-{who}-{conns}", "who": who, "sockets": conns,
    "write_connections": int(sys.argv[11]),
    "duration_s": dur, "patch_requests": int(m.group(1)) if m else None,
    "patch_per_s": round(int(m.group(1)) / float(m.group(2)), 1) if m else None,
    "patch_non_2xx": int(n2.group(1)) if n2 else None,
    "event_frames": events, "event_frames_per_s_write_window": round(events / dur),
    "events_committed": committed, "lost": lost,
    "server_cpu_us_per_write": round((a[1] - b[1]) / tck * 1e6 / committed, 1) if committed else None,
    "cpu": {"wall_s": round(wall, 2), "server": round((a[1] - b[1]) / tck / wall, 3),
            "wsdrain": round((a[2] - b[2]) / tck / wall, 3),
            "machine_busy": round(1 - (a[4] - b[4]) / (a[3] - b[3]), 3) if a[3] > b[3] else None},
    "wsdrain": drain}, separators=(",", ":")))
PY
            ;;
        paced)
            # $1 offered writes/s, $2 duration, $3 driver sockets (default all 50). Each PATCH's event
            # goes to one driver socket, so every committed event must arrive once: lost = committed -
            # frames. Latency is wsdrain's: its clock at arrival minus the event's `changed_at` (set by
            # the server when it handles the write; ms resolution), so it leaves out time the request
            # waited before the server read it — wrk's answer latency, also reported, covers that.
            # $4 who: drivers (default) or dispatcher — then every socket (any number) is the dispatcher's
            # and gets every event, the fan-out row's shape at a fixed rate: lost = committed x sockets - frames.
            local rate="${1:-2000}" dur="${2:-20}" conns="${3:-$DRIVERS}" who="${4:-drivers}" threads=2
            python3 - "$DATA/fixtures.json" "$DATA/paced-fixtures.lua" "$conns" "$who" <<'PY'
import json, sys
fx = json.load(open(sys.argv[1])); conns = int(sys.argv[3]); who = sys.argv[4]
if who not in ("drivers", "dispatcher"):
    sys.exit("paced: who must be drivers or dispatcher")
if who == "drivers" and not 0 < conns <= len(fx["drivers"]):
    sys.exit(f"paced: sockets must be 1..{len(fx['drivers'])} (one per driver)")
# Drivers: only orders of drivers with a socket (wsdrain takes the first N tokens), so each event
# reaches one socket. Dispatcher: any order; every socket gets every event.
ids = [i for d in (fx["drivers"][:conns] if who == "drivers" else fx["drivers"]) for i in d["order_ids"]]
open(sys.argv[2], "w").write("return {ids = {%s}, token = %s}\n" % (",".join(map(str, ids)), json.dumps(fx["dispatcher_token"])))
PY
            "$BENCH/drain.sh" --fixtures "$DATA/fixtures.json" --who "$who" --connections "$conns" --duration "$(( dur + 4 ))" \
                >"$DATA/drain.json" 2>"$DATA/drain.err" &
            local drain=$!
            sleep 2
            local before after c0 c1
            c0="$(committed_events)"
            before="$(cpu_sample "$drain")"
            timeout -k 5 $(( dur + 30 )) wrk -t "$threads" -c 64 -d "${dur}s" --latency -s "$ROOT/scripts/bench_paced.lua" \
                "http://127.0.0.1:$PORT" -- "$DATA/paced-fixtures.lua" "$(python3 -c "print($threads * 1000 / $rate)")" >"$DATA/wrk.txt"
            after="$(cpu_sample "$drain")"
            wait "$drain" || true
            sleep 1
            c1="$(committed_events)"
            cat "$DATA/drain.err" >&2
            python3 - "$DATA/drain.json" "$DATA/wrk.txt" "$before" "$after" "$dur" "$conns" "$rate" "$(getconf CLK_TCK)" "$c0" "$c1" "$who" <<'PY' | tee -a "$RESULTS"
import json, os, re, sys
drain = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
wrk = open(sys.argv[2]).read()
b, a = [list(map(float, x.split())) for x in sys.argv[3:5]]
dur, conns, rate, tck = float(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
m = re.search(r"(\d+) requests in ([\d.]+)s", wrk)
s = re.search(r"errors: (\d+) of \d+; answer p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms; late slots (\d+)", wrk)
wall = a[0] - b[0]
committed = int(float(sys.argv[10])) - int(float(sys.argv[9]))
frames = drain["latency_ms"]["n"]  # frames carrying changed_at: the event frames
who = sys.argv[11]
expected = committed * (drain.get("connected") or 0) if who == "dispatcher" else committed
get_path = os.environ.get("WAYBILL_PACED_GET") or None
requests = int(m.group(1)) if m else None
print(json.dumps({"scenario": "paced", "label": f"waybill-paced-{int(rate)}" + ("-dispatcher" if who == "dispatcher" else "")
    + ("-get" if get_path else ""), "get_path": get_path,
    "offered_writes_per_s": rate, "who": who,
    "idle_http_connections": int(os.environ.get("WAYBILL_BENCH_IDLE_HTTP") or 0),
    "idle_websockets": int(os.environ.get("WAYBILL_BENCH_IDLE_WS") or 0),
    "duration_s": dur, "sockets": conns, "connected": drain.get("connected"),
    "writes": int(m.group(1)) if m else None, "writes_per_s": round(int(m.group(1)) / float(m.group(2)), 1) if m else None,
    "write_errors": int(s.group(1)) if s else None, "late_slots": int(s.group(5)) if s else None,
    "answer_ms": {"p50": float(s.group(2)), "p99": float(s.group(3)), "max": float(s.group(4))} if s else None,
    # Each event reaches exactly one socket (drivers) or every socket (dispatcher), so this is lost
    # minus duplicated; the harness rows check duplicates and id order per socket.
    "events_committed": committed, "event_frames": frames, "lost": expected - frames,
    "event_frames_per_s": round(frames / dur),
    "delivery_latency_ms": drain["latency_ms"],
    "server_cpu_us_per_write": round((a[1] - b[1]) / tck * 1e6 / committed, 1) if committed else None,
    "server_cpu_us_per_request": round((a[1] - b[1]) / tck * 1e6 / requests, 1) if requests else None,
    "cpu": {"wall_s": round(wall, 2), "server": round((a[1] - b[1]) / tck / wall, 3),
            "wsdrain": round((a[2] - b[2]) / tck / wall, 3),
            "machine_busy": round(1 - (a[4] - b[4]) / (a[3] - b[3]), 3) if a[3] > b[3] else None}},
    separators=(",", ":")))
PY
            ;;
        *) echo "unknown scenario $kind" >&2; exit 2 ;;
    esac
}

# N idle kept-alive connections beside the run (WAYBILL_BENCH_IDLE_HTTP=N); the keep-alive is raised
# through the environment, so a build without --keep-alive-seconds still starts (and closes them
# after its own 5 s).
[ -n "${WAYBILL_BENCH_IDLE_HTTP:-}" ] && export WAYBILL_KEEP_ALIVE_SECONDS=3600
# hold_idle KIND COUNT WHAT [idle_clients.py options]: COUNT idle clients of KIND (http, ws) beside the
# run, waited for until open (the tool itself gives up after 120 s); stopped by `cleanup`.
hold_idle() {
    local kind="$1" count="$2" what="$3"; shift 3
    python3 "$ROOT/scripts/idle_clients.py" --kind "$kind" --port "$PORT" --count "$count" \
        --ready "$DATA/idle-$kind-ready" "$@" 2>"$DATA/idle-$kind.err" &
    IDLE_PIDS="${IDLE_PIDS:-} $!"
    for _ in $(seq 1 1300); do [ -s "$DATA/idle-$kind-ready" ] && break; sleep 0.1; done
    echo "$what: $(cat "$DATA/idle-$kind-ready" 2>/dev/null || echo none) open" >&2
}
start_server
[ -n "${WAYBILL_BENCH_IDLE_HTTP:-}" ] && hold_idle http "$WAYBILL_BENCH_IDLE_HTTP" "idle kept-alive connections"
if [ -n "${WAYBILL_BENCH_IDLE_WS:-}" ]; then
    python3 -c 'import json,sys; fx=json.load(open(sys.argv[1])); print("\n".join(d["token"] for d in fx["drivers"][-int(sys.argv[2]):]))' \
        "$DATA/fixtures.json" "${WAYBILL_BENCH_IDLE_WS_DRIVERS:-10}" >"$DATA/idle-ws-tokens"
    hold_idle ws "$WAYBILL_BENCH_IDLE_WS" "idle WebSockets" --tokens "$DATA/idle-ws-tokens"
fi
if [ $# -gt 0 ]; then
    run "$@"
else
    for rate in 100 500 1000 2000; do run fanout "$rate" 20; done
    run connections 5000 30
    run saturate 20
fi
echo "server log: $(grep -c 'level=error' "$DATA/server.log" || true) error lines" >&2
