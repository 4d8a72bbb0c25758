#!/usr/bin/env python3
"""Holds N idle clients on a server: kept-alive HTTP connections (`--kind http`: each asks
`GET /healthz` once, reads the answer, then sends nothing, as a driver's app holds its connection
between two refetches) or WebSockets (`--kind ws`: each upgrades `/ws/orders/?token=…` with one of
the given tokens, in turn, then only answers the server's protocol pings, as a phone whose driver
has no new order does).

Why: to measure whether what a request or a write costs depends on how many connections or
sockets are open beside it (docs/BENCHMARKS.md, 2026-12-06 15:17–). `scripts/bench.sh` runs it
with WAYBILL_BENCH_IDLE_HTTP=N (raising the server's keep-alive, so they stay) and
WAYBILL_BENCH_IDLE_WS=N (on tokens of drivers the run writes nothing for, so they get no event).

Black-box tool, standard library only. Writes "open N" to stderr (and to --ready FILE) once every
client is connected, then holds them until DURATION seconds have passed or it is killed.
"""
import argparse
import asyncio
import base64
import os
import sys
import time


def masked(opcode, payload):
    """A client frame (FIN set), masked as RFC 6455 requires; payloads here are under 126 bytes."""
    key = os.urandom(4)
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


async def ask(reader, writer, request):
    """Sends `request` and reads the answer's head: (status line, bytes after the head), or None
    if the connection closed first."""
    writer.write(request)
    await writer.drain()
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = await asyncio.wait_for(reader.read(4096), 20)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], rest


async def hold_http(port, token, opened, stop):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if not await ask(reader, writer, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"):
            return
        opened.append(1)
        await stop.wait()
    finally:
        writer.close()


async def hold_ws(port, token, opened, stop):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        answer = await ask(reader, writer, (
            f"GET /ws/orders/?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        if not answer or b" 101 " not in answer[0]:
            return
        buf = answer[1]
        opened.append(1)
        reading = asyncio.ensure_future(reader.read(65536))
        stopping = asyncio.ensure_future(stop.wait())
        while True:
            done, _ = await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stopping in done:
                reading.cancel()
                return
            chunk = reading.result()
            if not chunk:
                stopping.cancel()
                return
            buf += chunk
            while len(buf) >= 2:  # server frames: never masked
                n, at = buf[1] & 0x7F, 2
                if n == 126:
                    if len(buf) < 4:
                        break
                    n, at = int.from_bytes(buf[2:4], "big"), 4
                elif n == 127:
                    if len(buf) < 10:
                        break
                    n, at = int.from_bytes(buf[2:10], "big"), 10
                if len(buf) < at + n:
                    break
                opcode, payload, buf = buf[0] & 0x0F, buf[at:at + n], buf[at + n:]
                if opcode == 0x9:
                    writer.write(masked(0xA, payload))
            reading = asyncio.ensure_future(reader.read(65536))
    except (OSError, asyncio.TimeoutError):
        return
    finally:
        writer.close()


async def main(args):
    tokens = [t for t in open(args.tokens).read().split() if t] if args.tokens else [""]
    hold = hold_ws if args.kind == "ws" else hold_http
    stop = asyncio.Event()
    opened = []
    tasks = []
    for i in range(args.count):
        tasks.append(asyncio.create_task(hold(args.port, tokens[i % len(tokens)], opened, stop)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)  # not one burst at the listener (and the authenticator)
    deadline = time.monotonic() + 120
    while len(opened) < args.count and time.monotonic() < deadline:
        if all(t.done() for t in tasks):
            break
        await asyncio.sleep(0.05)
    print(f"open {len(opened)}", file=sys.stderr, flush=True)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write(f"{len(opened)}\n")
    await asyncio.sleep(args.duration)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["http", "ws"], required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--tokens", help="ws: a file of API tokens, whitespace-separated")
    p.add_argument("--duration", type=float, default=600, help="seconds to hold them (default 600)")
    p.add_argument("--ready", help="file to write the count of open clients to, once open")
    a = p.parse_args()
    if a.kind == "ws" and not a.tokens:
        p.error("--kind ws needs --tokens")
    asyncio.run(main(a))
