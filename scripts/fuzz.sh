#!/usr/bin/env bash
# Fuzzes the parsers that face the network with libFuzzer (docs/HARDENING.md, "Fuzzing").
#   scripts/fuzz.sh                    every target, FUZZ_SECONDS (default 30) each
#   scripts/fuzz.sh router http-wire   only these
#   scripts/fuzz.sh --list             the targets
# Builds Fuzzing/ (its own package) with -sanitize=fuzzer,address into .build-fuzz/, then runs
# one process per target on the committed seeds (Fuzzing/Corpus/<target>, read only) plus a
# working corpus that grows from run to run (.build-fuzz/corpus/<target>). A crash leaves its
# input in .build-fuzz/crashes/ and makes the script exit 1 after the other targets ran.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
BUILD="$ROOT/.build-fuzz"
ALL="chunked-body http-response http-wire api-request router order-list-query if-match json-bodies json-reader ws-handshake ws-client-frame server-frame broker-batch"

if [ "${1:-}" = --list ]; then echo "$ALL" | tr ' ' '\n'; exit 0; fi
TARGETS="${*:-$ALL}"

mkdir -p "$BUILD"
echo "building the fuzz targets (debug, -sanitize=fuzzer,address) ..."
swift build --package-path "$ROOT/Fuzzing" --build-path "$BUILD" \
    -Xswiftc -sanitize=fuzzer,address >"$BUILD/build.log" 2>&1
built=$?
grep -E "error|warning: |Build complete" "$BUILD/build.log" | grep -v "ld.gold: warning"
BIN="$BUILD/debug/WaybillFuzz"
# Never fuzz a stale binary from an earlier build.
[ "$built" -eq 0 ] && [ -x "$BIN" ] || { echo "the fuzz build failed (see $BUILD/build.log)" >&2; exit 1; }

mkdir -p "$BUILD/crashes" "$BUILD/logs"
# Swift's runtime caches look like leaks to LeakSanitizer; the targets check memory safety, not leaks.
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1"
# Swift's own crash backtracer fights ASan for the crash and can take minutes: let libFuzzer report it.
export SWIFT_BACKTRACE="enable=no"
failed=0
summary=""
for target in $TARGETS; do
    [ -d "$ROOT/Fuzzing/Corpus/$target" ] || { echo "no such target: $target" >&2; exit 2; }
    mkdir -p "$BUILD/corpus/$target"
    log="$BUILD/logs/$target.log"
    dict=()
    [ -f "$ROOT/Fuzzing/Dictionaries/$target.dict" ] && dict=(-dict="$ROOT/Fuzzing/Dictionaries/$target.dict")
    echo "fuzzing $target for ${SECONDS_PER_TARGET}s ..."
    # -timeout: one input may take 30 s (the first builds the server fixture); `timeout` is the
    # backstop should libFuzzer itself hang.
    WAYBILL_FUZZ_TARGET="$target" timeout --signal=KILL $((SECONDS_PER_TARGET + 120)) \
        "$BIN" -max_total_time="$SECONDS_PER_TARGET" -timeout=30 -rss_limit_mb=4096 -detect_leaks=0 \
        -max_len=8192 -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$target-" "${dict[@]}" \
        "$BUILD/corpus/$target" "$ROOT/Fuzzing/Corpus/$target" >"$log" 2>&1
    status=$?
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    runs="${runs:-$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' | tail -1)}"
    if [ "$status" -eq 0 ]; then
        line="$(printf '%-18s %10s inputs in %ss, no crash' "$target" "${runs:-?}" "$SECONDS_PER_TARGET")"
    else
        failed=1
        line="$(printf '%-18s %10s inputs, FAILED (exit %s): see %s' "$target" "${runs:-?}" "$status" "$log")"
        grep -E "fuzz invariant|Fatal error|ERROR: (AddressSanitizer|libFuzzer)|Test unit written" "$log" | head -5
    fi
    echo "$line"
    summary+="$line"$'\n'
done
echo
echo "== fuzz summary (${SECONDS_PER_TARGET}s per target) =="
printf '%s' "$summary"
exit "$failed"
