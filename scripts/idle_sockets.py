#!/usr/bin/env python3
"""Holds N WebSockets open and quiet: each upgrades `/ws/orders/?token=…` with one of the given
tokens (in turn), then only answers the server's protocol pings, as a phone whose driver has no
new order does.

Why: to measure whether what a write costs depends on how many sockets are open beside it
(`WAYBILL_BENCH_IDLE_WS=N scripts/bench.sh paced …`, docs/BENCHMARKS.md). Give it tokens of users
the run writes nothing for, so these sockets get no event.

Black-box tool, standard library only. Writes "open N" to stderr (and to --ready FILE) once every
socket has its `101`, then holds them until DURATION seconds have passed or it is killed.
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


async def hold(port, token, opened, stop):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET /ws/orders/?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                      "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        await writer.drain()
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = await asyncio.wait_for(reader.read(4096), 20)
            if not chunk:
                return
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            return
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
    tokens = [t for t in open(args.tokens).read().split() if t]
    stop = asyncio.Event()
    opened = []
    tasks = []
    for i in range(args.sockets):
        tasks.append(asyncio.create_task(hold(args.port, tokens[i % len(tokens)], opened, stop)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)  # not one burst at the listener and the authenticator
    deadline = time.monotonic() + 120
    while len(opened) < args.sockets and time.monotonic() < deadline:
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
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sockets", type=int, required=True)
    p.add_argument("--tokens", required=True, help="a file of API tokens, whitespace-separated")
    p.add_argument("--duration", type=float, default=600, help="seconds to hold them (default 600)")
    p.add_argument("--ready", help="file to write the count of open sockets to, once open")
    asyncio.run(main(p.parse_args()))
