#!/usr/bin/env bash
# Runs one group of the Swift tests several times while busy loops take the CPUs, and reports
# every failure. A race that a loaded 2-core CI runner can lose shows up here in a few runs,
# where a quiet machine passes it every time. Needs a build (`make build`).
#
#   scripts/test-under-load.sh [runs] [busy-loops] [swift test filter arguments...]
#
# Default: 5 runs, 3 busy loops, the in-process group of `make swift-test`.
set -u
cd "$(dirname "$0")/.."
runs=${1:-5}
loops=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
if [ $# -eq 0 ]; then
    set -- --skip 'WaybillClientTests|WaybillPostgresTests|WaybillStoreConformanceTests|WaybillBrokerTests|ClusterTests'
fi
logs=$(mktemp -d)
failed=0
for run in $(seq 1 "$runs"); do
    pids=()
    for _ in $(seq 1 "$loops"); do
        timeout 900 sh -c 'while :; do :; done' &
        pids+=($!)
    done
    swift test --skip-build "$@" >"$logs/run$run.log" 2>&1
    status=$?
    kill "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
    if [ $status -eq 0 ]; then
        echo "run $run: passed"
    else
        failed=$((failed + 1))
        echo "run $run: FAILED (log: $logs/run$run.log)"
        grep -E "✘ Test .* recorded" "$logs/run$run.log" | head -5
    fi
done
echo "$failed of $runs runs failed under $loops busy loops"
[ $failed -eq 0 ]
