#!/usr/bin/env bash
# Builds the release `waybill` (what `make run`, the release smoke test, the benchmarks and
# `make cluster` serve), at `swift build -c release --show-bin-path`. Extra arguments go to
# `swift build`.
#
# On Linux the Swift runtime, Foundation and Dispatch are linked into the binary
# (`--static-swift-stdlib`). Why: every `swift_retain`/`swift_release`, allocation and task switch
# is then a direct call instead of one through the PLT into a shared library, and the runtime's
# thread-locals (the current task, its executor) are read without `__tls_get_addr`. Measured: 6.1 µs
# less server CPU per order write at 1 000 writes/s (`scripts/bench.sh ab 5`, sd 1.2, every round
# lower; docs/BENCHMARKS.md, 2026-12-06 (17:44– UTC)). The binary grows to about 85 MB and loads no
# Swift library where it runs (it still reads `Waybill_WaybillAPI.resources` beside it). Foundation's networking part, which the driver client's
# `URLSessionHTTPTransport` brings in, then links libcurl by name (`-lcurl`): the development link
# comes from `scripts/install-deps.sh` (libcurl4-openssl-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
# (No array for the flag: macOS's bash 3.2 takes an empty one for unset under `set -u`.)
if [ "$(uname -s)" = Linux ]; then
    exec "${SWIFT:-swift}" build -c release --product waybill --static-swift-stdlib "$@"
fi
exec "${SWIFT:-swift}" build -c release --product waybill "$@"
