#!/usr/bin/env bash
# Release-build smoke test (part of `make test`): the Swift tests run a debug build, and a crash
# that only the optimizer produced went unseen that way (an order write with an Idempotency-Key
# crashed the release server in swift_task_localValuePush; docs/BENCHMARKS.md, 2026-12-03).
# Starts the release binary on a free loopback port in a temp folder, seeds it, sends order writes
# with and without an Idempotency-Key (one replayed), checks every answer and that the server is
# still up, and stops it.
set -euo pipefail
BIN="${1:?usage: release-smoke.sh PATH-TO-RELEASE-waybill}"
DATA="$(mktemp -d /tmp/waybill-smoke.XXXXXX)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cleanup() {
    [ -n "${PID:-}" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    rm -rf "$DATA"
}
trap cleanup EXIT
fail() { echo "release-smoke: $*" >&2; tail -40 "$DATA/server.log" >&2 || true; exit 1; }

# The release build carries the Swift runtime and Foundation inside it (scripts/build-release.sh:
# measured cheaper per write). A build that loads them as shared libraries serves just as well,
# only slower, so nothing else would notice it.
if [ "$(uname -s)" = Linux ]; then
    command -v ldd >/dev/null || { echo "release-smoke: ldd is missing (Debian's libc-bin)" >&2; exit 1; }
    libraries="$(ldd "$BIN")" || { echo "release-smoke: ldd failed on $BIN" >&2; exit 1; }
    if grep -q 'libswiftCore\.so' <<<"$libraries"; then
        echo "release-smoke: $BIN loads the Swift runtime as a shared library: build it with scripts/build-release.sh" >&2
        exit 1
    fi
fi

# The concurrent writes below are 320 from one user in well under a second: past the per-user
# request rate (429), which is not what this checks.
"$BIN" serve --host 127.0.0.1 --port "$PORT" --data-dir "$DATA" --user-requests-per-second 0 2>"$DATA/server.log" &
PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
"$BIN" seed --data-dir "$DATA" --drivers 2 --orders-per-driver 2 --out "$DATA/seed.json" >/dev/null 2>&1 || fail "seed failed"
TOKEN="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['dispatcher_token'])" "$DATA/seed.json")"
ORDER="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['drivers'][0]['order_ids'][0])" "$DATA/seed.json")"

patch() {  # KEY (or -) NOTES -> "status replayed"
    local key=() headers="$DATA/headers"
    [ "$1" != - ] && key=(-H "Idempotency-Key: $1")
    local status
    status="$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' --max-time 10 -X PATCH \
        "http://127.0.0.1:$PORT/api/orders/$ORDER/" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' "${key[@]}" -d "{\"notes\":\"$2\"}")" || true
    echo "$status $(grep -ci '^idempotent-replayed: true' "$headers" || true)"
}
[ "$(patch - plain)" = "200 0" ] || fail "a write without a key was not answered 200"
[ "$(patch smoke-1 keyed)" = "200 0" ] || fail "a write with a key was not answered 200"
[ "$(patch smoke-1 keyed)" = "200 1" ] || fail "the same key was not replayed"
[ "$(patch smoke-2 other)" = "200 0" ] || fail "a second key was not answered 200"
# Concurrent keyed writes over keep-alive connections (the paths where a write runs on the service
# thread or the store's writer thread, both under a task-local claim): 8 connections × 40 writes,
# each key sent twice in a row on its connection. Every first send must be 200, every second a
# replay of it.
python3 - "$PORT" "$TOKEN" "$ORDER" <<'PY' || fail "concurrent keyed writes"
import http.client, json, sys, threading
port, token, order = int(sys.argv[1]), sys.argv[2], sys.argv[3]
problems = []
def worker(n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(20):
        for attempt in (0, 1):
            c.request("PATCH", f"/api/orders/{order}/", body=json.dumps({"notes": f"c{n}-{i}"}),
                      headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                               "Idempotency-Key": f"smoke-c{n}-{i}"})
            r = c.getresponse(); r.read()
            replayed = (r.getheader("Idempotent-Replayed") or "").lower() == "true"
            if r.status != 200 or replayed != (attempt == 1):
                problems.append((n, i, attempt, r.status, replayed))
threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
for t in threads: t.start()
for t in threads: t.join()
if problems:
    sys.exit(f"{len(problems)} unexpected answers, e.g. {problems[:3]}")
PY
kill -0 "$PID" 2>/dev/null || fail "the server is gone"
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || fail "the server stopped answering"
echo "release-smoke: ok (4 order writes, one replayed, then 8 connections x 20 keyed writes each sent twice, on the release build)"
