#!/usr/bin/env python3
"""Where a fan-out's backlog sits: samples the kernel's TCP queues of one local port until stopped.

    scripts/socket_queues.py PORT [--interval 0.5] [--seconds N]

Every interval it reads `ss` (iproute2) for the established connections of 127.0.0.1:PORT and sums
  - the clients' Recv-Q: bytes the kernel has delivered to the clients (the sink, and the writers,
    whose HTTP answers are read at once) that they have not read yet, and
  - the server's `notsent` (`ss -i`): bytes the server has written that TCP has not sent yet (the
    peer's receive window is full, or congestion control holds them back).
Both are exact and disjoint (Send-Q is not used: it also counts bytes sent but not yet acknowledged,
which may already sit in a client's Recv-Q). On SIGTERM/SIGINT, or after --seconds, it prints one
JSON line with the mean, p50 and max of both over the samples in which anything was queued (idle
seconds before and after the load say nothing).

Why: at the fan-out row's highest rates the latency the sink reports can be its own reading backlog
rather than the server's; these bytes say how much was waiting for the sink at the time.
Black-box tool for the benchmarks (not part of the product or its tests).
"""
import argparse
import json
import re
import signal
import subprocess
import sys
import time


def client_unread(port):
    """Sums Recv-Q over the clients' established connections to `port`: (bytes, sockets)."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=False).stdout
    total = count = 0
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit():
            total += int(fields[0]); count += 1
    return total, count


NOTSENT = re.compile(r"\bnotsent:(\d+)")


def server_notsent(port):
    """Sums `notsent` (printed by `ss -i` only when not zero) over the server's connections on `port`."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=False).stdout
    return sum(int(m.group(1)) for m in NOTSENT.finditer(out))


def summary(values):
    if not values:
        return None
    ordered = sorted(values)
    return {"mean": round(sum(ordered) / len(ordered)), "p50": ordered[len(ordered) // 2], "max": ordered[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--seconds", type=float, default=0,
                    help="stop after this long at the latest (0: only at SIGTERM/SIGINT)")
    a = ap.parse_args()
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    sink, server, sockets, samples = [], [], [], 0
    deadline = time.monotonic() + a.seconds if a.seconds > 0 else None
    while not stop and (deadline is None or time.monotonic() < deadline):
        unread, clients = client_unread(a.port)
        notsent = server_notsent(a.port)
        samples += 1
        if unread + notsent > 0:
            sink.append(unread); server.append(notsent); sockets.append(clients)
        time.sleep(a.interval)
    print(json.dumps({"port": a.port, "interval_s": a.interval, "samples": samples, "queued_samples": len(sink),
                      "sink_recv_queue_bytes": summary(sink), "server_notsent_bytes": summary(server),
                      "client_sockets": summary(sockets)}, separators=(",", ":")))


if __name__ == "__main__":
    sys.exit(main())
