#!/usr/bin/env python3
"""Holds N kept-alive HTTP connections idle: each asks `GET /healthz` once, reads the answer, and
then sends nothing, as a driver's app holds its connection between two refetches.

Why: the server's cost per request once depended on how many such connections it held (lws's
sorted timer list, docs/BENCHMARKS.md, 2026-12-06 15:17–); `scripts/bench.sh` runs this beside a
benchmark with WAYBILL_BENCH_IDLE_HTTP=N (and the server's keep-alive raised, so they stay).

Black-box tool, standard library only. Writes "open N" to stderr (and to --ready FILE) once every
connection has its answer, then holds them until DURATION seconds have passed or it is killed.
"""
import argparse
import asyncio
import sys
import time


async def hold(port, opened, stop):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await asyncio.wait_for(reader.read(4096), 10)
            if not chunk:
                return
            head += chunk
        opened.append(1)
        await stop.wait()
    finally:
        writer.close()


async def main(args):
    stop = asyncio.Event()
    opened = []
    tasks = []
    for i in range(args.connections):
        tasks.append(asyncio.create_task(hold(args.port, opened, stop)))
        if i % 200 == 199:
            await asyncio.sleep(0.02)  # not one burst at the listener's queue
    deadline = time.monotonic() + 60
    while len(opened) < args.connections and time.monotonic() < deadline:
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
    p.add_argument("--connections", type=int, required=True)
    p.add_argument("--duration", type=float, default=600, help="seconds to hold them (default 600)")
    p.add_argument("--ready", help="file to write the count of open connections to, once open")
    asyncio.run(main(p.parse_args()))
