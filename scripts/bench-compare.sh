#!/usr/bin/env bash
# Waybill and its two anchors on the scenarios of issue 10, in one go, each run on a freshly started
# server, then one side-by-side markdown table with Waybill's ratio to the anchor of each row.
#   scripts/bench.sh compare            the full run (about 14 minutes)
#   scripts/bench.sh compare --quick    shorter runs (5 000 idle sockets, 10 s windows; about 7 minutes)
# Systems:
#   waybill  release build of this tree (`scripts/bench.sh`, SQLite, in-process broker)
#   peer     ../shared/peers/django-channels (Django + Channels + channels_redis on uvicorn; its own redis)
#   nchan    ../shared/peers/nchan (nginx + libnginx-mod-nchan, one worker): fan-out and idle only,
#            it has no store, no writes and no app-level ping
# Scenarios (the rows of the issue's table):
#   idle     N sockets held HOLD s, an app ping every 10 s each (wsbench `connections`; Nchan: wsdrain, no pings)
#   fanout   1 000 sockets that all get every event, writes as fast as taken for DUR s, with 4 writes
#            in flight on both (wrk PATCH with 4 connections + wsdrain; Nchan: nchanpub --rate 0 with 4
#            connections), then 32 on both; then Waybill again at the rate Nchan reached with 4, on a
#            schedule (`scripts/bench.sh paced RATE DUR 1000 dispatcher`); then the first shape again,
#            Nchan before Waybill, and the row gives each system's mean of its two runs
#   latency  100 writes/s for DUR s, 50 driver sockets (wsbench `fanout`; Nchan: 100 publishes/s to 50 sockets)
#   writes   open-loop writes at 1 000/s and 2 000/s (Waybill), 100/s and 200/s (peer): the highest
#            rate achieved with 0 lost, and server CPU per write
#   paced    Waybill's writes at 100, 1 000 and 2 000/s again with C clients (`scripts/bench.sh paced`: wrk on
#            a fixed schedule + wsdrain on the 50 driver sockets), beside Nchan at 1 000 messages/s to one socket
#            (its CPU per message: the anchor for server CPU per write)
# Output: bench-results/compare-<UTC time>.jsonl (every raw line, tagged) and .md (the table, also on
# stdout). Every step runs under `timeout`; the peers are stopped at the end whatever happened.
# Local addresses only (127.0.0.1). Environment: WAYBILL_BENCH_DIR (the shared harness),
# COMPARE_IDLE_SOCKETS, COMPARE_HOLD, COMPARE_DURATION, COMPARE_PORT (base port, default 18090).
set -euo pipefail
# Debian installs nginx in /usr/sbin, which is not on a normal user's PATH.
PATH="$PATH:/usr/sbin"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="${WAYBILL_BENCH_DIR:-$ROOT/../shared/bench}"
PEERS="$(cd "$BENCH/.." && pwd)/peers"
STATE="${WAYBILL_BENCH_STATE:-${XDG_STATE_HOME:-$HOME/.local/state}/waybill-bench}"
QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
IDLE="${COMPARE_IDLE_SOCKETS:-$([ $QUICK = 1 ] && echo 5000 || echo 15000)}"
HOLD="${COMPARE_HOLD:-$([ $QUICK = 1 ] && echo 15 || echo 30)}"
DUR="${COMPARE_DURATION:-$([ $QUICK = 1 ] && echo 10 || echo 20)}"
BASE="${COMPARE_PORT:-18090}"
WPORT=$BASE NPORT=$((BASE + 1)) PPORT=$((BASE + 2))
export REDIS_PORT="${COMPARE_REDIS_PORT:-$((BASE + 3))}"  # the peer's own redis, started and stopped by it
STAMP="$(date -u +%Y%m%d-%H%M%S)"
OUT="$ROOT/bench-results"
mkdir -p "$OUT"
JSONL="$OUT/compare-$STAMP.jsonl"
MD="$OUT/compare-$STAMP.md"
TMP="$(mktemp -d /tmp/waybill-compare.XXXXXX)"
log() { echo "compare: $*" >&2; }

for dir in "$BENCH" "$PEERS/django-channels" "$PEERS/nchan"; do
    [ -d "$dir" ] || { log "missing $dir (set WAYBILL_BENCH_DIR to the shared bench folder)"; exit 2; }
done
for tool in wrk curl cc python3 redis-server nginx; do
    command -v "$tool" >/dev/null || { log "missing $tool: run scripts/install-deps.sh --bench"; exit 2; }
done
[ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || { log "missing libnginx-mod-nchan: scripts/install-deps.sh --bench"; exit 2; }

# queues_start PORT / queues_stop: scripts/socket_queues.py around one run (the fan-out rows: where the
# backlog sits at the highest rates); queues_stop leaves its line in $TMP/q.json.
queues_start() {
    : >"$TMP/q.json"
    command -v ss >/dev/null || { log "no ss (iproute2): the fan-out rows go without socket queues"; return 0; }
    # --seconds: a safety net should queues_stop never run (it stops the sampler long before).
    python3 "$ROOT/scripts/socket_queues.py" "$1" --seconds $((DUR + 300)) >"$TMP/q.json" 2>>"$TMP/q.err" &
    QUEUES_PID=$!
}
queues_stop() {
    [ -n "${QUEUES_PID:-}" ] || return 0
    kill "$QUEUES_PID" 2>/dev/null || true
    wait "$QUEUES_PID" 2>/dev/null || true
    QUEUES_PID=
}

cleanup() {
    queues_stop
    "$PEERS/django-channels/stop.sh" >/dev/null 2>&1 || true
    "$PEERS/nchan/stop.sh" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

if [ -z "${WAYBILL_BENCH_BIN:-}" ]; then
    ("$ROOT/scripts/build-release.sh" 2>&1 | grep -E "error|Build complete" >&2) || true
fi
BIN="${WAYBILL_BENCH_BIN:-$(cd "$ROOT" && swift build -c release --show-bin-path)/waybill}"
[ -x "$BIN" ] || { log "no release build at $BIN"; exit 1; }

# The machine's "cpu" line of /proc/stat (for the stolen share of a run: the hypervisor running someone
# else on our cores; it shows up as latency spikes no change of ours can explain).
stat_line() { head -1 /proc/stat; }

# tag SYSTEM SCENARIO FILE STAT_BEFORE: appends FILE's JSON lines to $JSONL with "system" and "row"
# fields, and "machine_steal": the share of both cores' time stolen from STAT_BEFORE (a `stat_line`
# taken when the step began) to now — the whole step, server start and stop included, while
# "machine busy" covers the measured window only. Call it right after the step.
# A fifth argument names a file with scripts/socket_queues.py's line, added as "socket_queues".
tag() {
    python3 - "$1" "$2" "$3" "$JSONL" "$4" "$(stat_line)" "${5:-}" <<'PY'
import json, os, sys
system, row, src, dst, before, after, queues = sys.argv[1:8]
try:
    queues = json.loads(open(queues).read()) if queues and os.path.getsize(queues) > 0 else None
except (OSError, ValueError) as error:  # a sampler that died mid-line: the row goes on without it
    print(f"compare: no socket queue sample for {system} {row}: {error}", file=sys.stderr)
    queues = None
steal = None
if before and after:
    b, a = [list(map(int, x.split()[1:])) for x in (before, after)]
    d = [y - x for x, y in zip(b, a)]
    total = sum(d[:8])  # guest and guest_nice are already inside user and nice
    steal = round(d[7] / total, 4) if total > 0 and len(d) > 7 else None
with open(dst, "a") as out:
    for line in open(src):
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line); d["system"] = system; d["row"] = row
            if steal is not None: d["machine_steal"] = steal
            if queues is not None: d["socket_queues"] = queues
            out.write(json.dumps(d, separators=(",", ":")) + "\n")
PY
}

# waybill ROW SECONDS ARGS...: one scripts/bench.sh run (a fresh server, its own data folder).
waybill() {
    local row="$1" limit="$2"; shift 2
    log "waybill $row: scripts/bench.sh $*"
    : >"$TMP/w.jsonl"
    local s0
    s0="$(stat_line)"
    WAYBILL_BENCH_BIN="$BIN" WAYBILL_BENCH_PORT="$WPORT" WAYBILL_BENCH_OUT="$TMP/w.jsonl" WAYBILL_BENCH_DIR="$BENCH" \
        timeout -k 10 "$limit" "$ROOT/scripts/bench.sh" "$@" >/dev/null 2>"$TMP/w.err" || log "waybill $row failed: $(tail -3 "$TMP/w.err")"
    queues_stop
    tag waybill "$row" "$TMP/w.jsonl" "$s0" "${QUEUES_FILE:-}"
}

# peer ROW SECONDS KIND ARGS...: a fresh peer (new database, new process, new redis), one run.
peer() {
    local row="$1" limit="$2" kind="$3"; shift 3
    local fx="$STATE/peer-var/fixtures.json"
    log "peer $row: $kind $*"
    "$PEERS/django-channels/stop.sh" >/dev/null 2>&1 || true
    if ! timeout -k 10 600 "$PEERS/django-channels/run.sh" "$PPORT" 50 20 >/dev/null 2>"$TMP/p.err"; then
        log "peer did not start: $(tail -3 "$TMP/p.err")"; return 0
    fi
    local watch=()
    [ -f "$STATE/peer-var/redis.pid" ] && watch=(--watch "redis=$(cat "$STATE/peer-var/redis.pid")")
    : >"$TMP/p.jsonl"
    local s0
    s0="$(stat_line)"
    case "$kind" in
        harness)
            timeout -k 10 "$limit" "$BENCH/bench.sh" --fixtures "$fx" "$@" --out "$TMP/p.jsonl" "${watch[@]}" \
                >/dev/null 2>"$TMP/p.err" || log "peer $row failed: $(tail -3 "$TMP/p.err")" ;;
        saturate) peer_saturate "$fx" "$limit" "$@" ;;
    esac
    tag peer "$row" "$TMP/p.jsonl" "$s0"
    "$PEERS/django-channels/stop.sh" >/dev/null 2>&1 || true
}

# The fan-out shape of `scripts/bench.sh saturate DUR 1000 dispatcher`, against the peer: wsdrain on the
# dispatcher's token (company group: every event), wrk PATCHes. The peer has no event counter, so
# lost = wrk's answered PATCHes x sockets - frames (PATCHes still in flight when wrk stops make it
# slightly pessimistic).
peer_saturate() {
    local fx="$1" limit="$2" dur="$3" conns="$4" writers="${5:-32}"
    local pid; pid="$(cat "$STATE/peer-var/server.pid")"
    timeout -k 10 "$limit" "$BENCH/drain.sh" --fixtures "$fx" --who dispatcher --connections "$conns" \
        --duration "$((dur + 4))" >"$TMP/drain.json" 2>"$TMP/drain.err" &
    local drain=$!
    sleep 2
    local t0 c0; t0="$(date +%s.%N)"; c0="$(awk '{print $14+$15}' "/proc/$pid/stat")"
    timeout -k 10 "$limit" "$BENCH/patchload.sh" --fixtures "$fx" --duration "$dur" --connections "$writers" >"$TMP/wrk.txt" 2>&1 || true
    local t1 c1; t1="$(date +%s.%N)"; c1="$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null || echo "$c0")"
    wait "$drain" || true
    python3 - "$TMP/drain.json" "$TMP/wrk.txt" "$t0" "$t1" "$c0" "$c1" "$dur" "$conns" "$(getconf CLK_TCK)" "$writers" >>"$TMP/p.jsonl" <<'PY' || log "peer fanout: no result"
import json, re, sys
drain = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
wrk = open(sys.argv[2]).read()
t0, t1, c0, c1, dur = map(float, sys.argv[3:8]); conns, tck, writers = int(sys.argv[8]), float(sys.argv[9]), int(sys.argv[10])
m = re.search(r"(\d+) requests in ([\d.]+)s", wrk); n2 = re.search(r"non-2xx: (\d+)", wrk)
reqs = int(m.group(1)) if m else 0
ok = reqs - (int(n2.group(1)) if n2 else 0)
events = drain["latency_ms"]["n"]
print(json.dumps({"scenario": "saturate", "who": "dispatcher", "sockets": conns, "write_connections": writers, "duration_s": dur,
    "patch_requests": reqs, "patch_per_s": round(reqs / float(m.group(2)), 1) if m else None,
    "patch_non_2xx": int(n2.group(1)) if n2 else None, "event_frames": events,
    "event_frames_per_s_write_window": round(events / dur), "events_committed": ok,
    "lost": ok * drain["connected"] - events,
    "cpu": {"wall_s": round(t1 - t0, 2), "server": round((c1 - c0) / tck / (t1 - t0), 3)}, "wsdrain": drain},
    separators=(",", ":")))
PY
}

# nchan ROW SECONDS SUITE-ARGS...: ../shared/peers/nchan/suite.py (starts a fresh nchan, stops it).
nchan() {
    local row="$1" limit="$2"; shift 2
    log "nchan $row: suite.py $*"
    : >"$TMP/n.jsonl"
    local s0
    s0="$(stat_line)"
    timeout -k 10 "$limit" python3 "$PEERS/nchan/suite.py" --port "$NPORT" --out "$TMP/n.jsonl" "$@" \
        >/dev/null 2>"$TMP/n.err" || log "nchan $row failed: $(tail -3 "$TMP/n.err")"
    queues_stop
    tag nchan "$row" "$TMP/n.jsonl" "$s0" "${QUEUES_FILE:-}"
}

log "results: $JSONL"
START=$(date +%s)
# Scenario by scenario, the three systems back to back, so each row's runs see the same machine load.
waybill idle $((HOLD + 180)) connections "$IDLE" "$HOLD"
peer idle $((HOLD + 240)) harness --scenario connections --connections "$IDLE" --hold "$HOLD" --ping-interval 10 \
    --label "peer-connections-$IDLE"
nchan idle $((HOLD + 180)) idle --sockets "$IDLE" --hold "$HOLD"

# The fan-out runs of Waybill and Nchan also sample the TCP queues on their port (socket_queues.py):
# at these rates the sink's unread bytes show how much of the latency is the sink's own backlog.
# Both systems with the same writes in flight: 4 (nchanpub's connections in RESULTS-nchan.md, the
# anchor's shape), then 32 (wrk's connections in patchload.sh). Until 2026-12-07 Waybill ran with 32
# against Nchan's 4: more writes in flight gave it a higher rate, more than the sink could read on the
# shared cores, and its p99 was then mostly the sink's backlog (docs/BENCHMARKS.md).
queues_start "$WPORT"
QUEUES_FILE="$TMP/q.json" waybill fanout $((DUR + 120)) saturate "$DUR" 1000 dispatcher 4
peer fanout $((DUR + 120)) saturate "$DUR" 1000 4
queues_start "$NPORT"
QUEUES_FILE="$TMP/q.json" nchan fanout $((DUR + 120)) fanout --sockets 1000 --rate 0 --duration "$DUR" --pub-connections 4
queues_start "$WPORT"
QUEUES_FILE="$TMP/q.json" waybill fanout_deep $((DUR + 120)) saturate "$DUR" 1000 dispatcher 32
queues_start "$NPORT"
QUEUES_FILE="$TMP/q.json" nchan fanout_deep $((DUR + 120)) fanout --sockets 1000 --rate 0 --duration "$DUR" --pub-connections 32
# The first shape at Nchan's highest rate, offered on a schedule: the p99s of the closed-loop runs
# come at each system's own rate, so this gives the latency of both at one load.
NCHAN_RATE="$(python3 -c '
import json, sys
rates = [d.get("publishes_per_s") for d in map(json.loads, open(sys.argv[1])) if d.get("system") == "nchan" and d.get("row") == "fanout"]
print(int(rates[-1]) if rates and rates[-1] else 0)' "$JSONL")"
if [ "$NCHAN_RATE" -gt 0 ]; then
    waybill fanout_matched $((DUR + 120)) paced "$NCHAN_RATE" "$DUR" 1000 dispatcher
fi
# The first shape again, Nchan first this time (Waybill, Nchan … Nchan, Waybill): the row gives the
# mean of both runs of each system, so a steady drift of the machine's speed over these minutes
# weighs on both alike. Two runs of one build a minute apart differed by up to a third here.
queues_start "$NPORT"
QUEUES_FILE="$TMP/q.json" nchan fanout $((DUR + 120)) fanout --sockets 1000 --rate 0 --duration "$DUR" --pub-connections 4
queues_start "$WPORT"
QUEUES_FILE="$TMP/q.json" waybill fanout $((DUR + 120)) saturate "$DUR" 1000 dispatcher 4

waybill latency $((DUR + 120)) fanout 100 "$DUR"
peer latency $((DUR + 120)) harness --scenario fanout --rate 100 --duration "$DUR" --label peer-fanout-100
nchan latency $((DUR + 120)) fanout --sockets 50 --rate 100 --duration "$DUR" --pub-connections 4

waybill writes $((DUR + 120)) fanout 1000 "$DUR"
waybill writes $((DUR + 120)) fanout 2000 "$DUR"
peer writes $((DUR + 120)) harness --scenario fanout --rate 200 --duration "$DUR" --label peer-fanout-200

# The write rows again with C clients (wrk on a schedule + wsdrain): the harness's one Python process
# cannot offer 2 000 writes/s on two cores (its schedule lag reaches seconds), so those rows measure it.
waybill paced $((DUR + 120)) paced 100 "$DUR"
waybill paced $((DUR + 120)) paced 1000 "$DUR"
waybill paced $((DUR + 120)) paced 2000 "$DUR"
# Nchan's CPU per message at the same rate, each message to one socket (as each Waybill write reaches
# one driver socket): the anchor for "server CPU per write at 1 000/s".
nchan paced $((DUR + 120)) fanout --sockets 1 --rate 1000 --duration "$DUR" --pub-connections 4
log "all runs took $(( $(date +%s) - START )) s"

python3 "$ROOT/scripts/bench_compare_table.py" "$JSONL" --commands "scripts/bench.sh compare$([ $QUICK = 1 ] && echo ' --quick')" \
    --settings "idle $IDLE sockets / ${HOLD} s hold; fan-out and write windows ${DUR} s" | tee "$MD"
log "table: $MD"
