#!/usr/bin/env bash
# `scripts/bench.sh ab ROUNDS BIN_A BIN_B [RATE [SECONDS]]`: CPU per write of two builds, measured at
# the same time. Each round runs `scripts/bench.sh paced RATE SECONDS` (default 1 000/s, 20 s) against
# both builds at once, each on its own server, port, data folder, wrk and wsdrain; the ports swap
# every round. Prints one line a round (A's and B's server_cpu_us_per_write, B − A, lost frames) and
# the mean and spread of B − A at the end.
#
# Why at the same time: this VM's speed drifts by ±10 % within minutes, so one build after the other
# (`WAYBILL_BENCH_BIN=… scripts/bench.sh paced` in turns) could not show a change of a few µs per
# write. Run side by side, both servers meet the same drift, and B − A held within about 1 µs between
# rounds (docs/BENCHMARKS.md, "2026-12-06 (04:55– UTC)"). The two runs compete for the two cores
# (the machine is about 60 % busy), so the absolute figures are higher than a solo run's: compare
# only B − A. Raw lines go to bench-results/ab-<UTC time>-{a,b}.jsonl.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROUNDS="${1:?rounds}" A="${2:?build A}" B="${3:?build B}" RATE="${4:-1000}" DUR="${5:-20}"
for bin in "$A" "$B"; do [ -x "$bin" ] || { echo "ab: $bin is not an executable" >&2; exit 2; }; done
STAMP="$(date -u +%Y%m%d-%H%M%S)"
OUT_A="$ROOT/bench-results/ab-$STAMP-a.jsonl" OUT_B="$ROOT/bench-results/ab-$STAMP-b.jsonl"
mkdir -p "$ROOT/bench-results"
PORT_1="${WAYBILL_BENCH_PORT:-8090}" PORT_2=$(( ${WAYBILL_BENCH_PORT:-8090} + 1 ))
# A state folder for each side: the shared tools keep files there (`drain.sh` writes the sockets'
# tokens to drain-tokens.txt before wsdrain reads them). In one folder the two runs raced for that
# file, and a side whose wsdrain read the other's tokens got no frame at all: its sockets connected
# to its own server with the other server's tokens (seen twice in 30 rounds, as "lost frames").
STATE_ROOT="${WAYBILL_BENCH_STATE:-${XDG_STATE_HOME:-$HOME/.local/state}/waybill-bench}"
STATE_A="$STATE_ROOT/ab-a" STATE_B="$STATE_ROOT/ab-b"

field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get(sys.argv[2]))' "$1" "$2"; }
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

diffs=()
for round in $(seq 1 "$ROUNDS"); do
    if (( round % 2 )); then port_a=$PORT_1 port_b=$PORT_2; else port_a=$PORT_2 port_b=$PORT_1; fi
    # A server of the round before may still be stopping: never start one on its port.
    for _ in $(seq 1 50); do port_free "$port_a" && port_free "$port_b" && break; sleep 0.2; done
    WAYBILL_BENCH_PORT=$port_a WAYBILL_BENCH_OUT="$OUT_A" WAYBILL_BENCH_BIN="$A" WAYBILL_BENCH_STATE="$STATE_A" \
        "$ROOT/scripts/bench.sh" paced "$RATE" "$DUR" >/dev/null 2>&1 &
    run_a=$!
    WAYBILL_BENCH_PORT=$port_b WAYBILL_BENCH_OUT="$OUT_B" WAYBILL_BENCH_BIN="$B" WAYBILL_BENCH_STATE="$STATE_B" \
        "$ROOT/scripts/bench.sh" paced "$RATE" "$DUR" >/dev/null 2>&1 &
    run_b=$!
    wait "$run_a" || { echo "ab: round $round: the run of A failed" >&2; exit 1; }
    wait "$run_b" || { echo "ab: round $round: the run of B failed" >&2; exit 1; }
    cpu_a=$(field "$OUT_A" server_cpu_us_per_write) cpu_b=$(field "$OUT_B" server_cpu_us_per_write)
    lost_a=$(field "$OUT_A" lost) lost_b=$(field "$OUT_B" lost)
    if [ "$lost_a" != 0 ] || [ "$lost_b" != 0 ]; then
        echo "round $round: lost frames (A $lost_a, B $lost_b): left out of the mean"
        continue
    fi
    diff=$(python3 -c "print(round($cpu_b - $cpu_a, 1))")
    diffs+=("$diff")
    echo "round $round: A $cpu_a µs/write, B $cpu_b µs/write, B − A $diff µs"
done
python3 - "${diffs[@]}" <<'PY'
import statistics, sys
d = [float(x) for x in sys.argv[1:]]
if d:
    spread = f", standard deviation {statistics.stdev(d):.1f}" if len(d) > 1 else ""
    print(f"B − A over {len(d)} rounds: mean {statistics.mean(d):+.1f} µs per write{spread}")
PY
