#!/usr/bin/env python3
"""Where a fan-out's backlog sits: samples the kernel's TCP queues of one local port until stopped.

    scripts/socket_queues.py PORT [--interval 0.5] [--seconds N]

Every interval it reads `ss` (iproute2) for the established connections of 127.0.0.1:PORT and sums
  - the server's Send-Q (bytes written by the server that the peer's window has not taken yet) and
  - the clients' Recv-Q (bytes the kernel delivered to the sink that it has not read yet).
On SIGTERM/SIGINT (or after --seconds) it prints one JSON line with the mean, p50 and max of both
over the samples in which anything was queued (idle seconds before and after the load say nothing).

Why: at the fan-out row's highest rates the latency the sink reports can be its own reading backlog
rather than the server's; the Recv-Q sum says how many bytes were waiting for the sink at the time.
Black-box tool for the benchmarks (not part of the product or its tests).
"""
import argparse
import json
import signal
import subprocess
import sys
import time


def queue_sum(port, side):
    """Sums (Recv-Q, Send-Q) over established connections with `side` (sport/dport) = port."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( {side} = :{port} )"],
                         capture_output=True, text=True, check=False).stdout
    recv = send = count = 0
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            recv += int(fields[0]); send += int(fields[1]); count += 1
    return recv, send, count


def summary(values):
    if not values:
        return None
    ordered = sorted(values)
    return {"mean": round(sum(ordered) / len(ordered)), "p50": ordered[len(ordered) // 2], "max": ordered[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: at SIGTERM/SIGINT)")
    a = ap.parse_args()
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    sink, server, sockets, samples = [], [], [], 0
    deadline = time.monotonic() + a.seconds if a.seconds > 0 else None
    while not stop and (deadline is None or time.monotonic() < deadline):
        server_recv, server_send, _ = queue_sum(a.port, "sport")
        client_recv, _, clients = queue_sum(a.port, "dport")
        samples += 1
        if server_send + client_recv > 0:
            sink.append(client_recv); server.append(server_send); sockets.append(clients)
        time.sleep(a.interval)
    print(json.dumps({"port": a.port, "interval_s": a.interval, "samples": samples, "queued_samples": len(sink),
                      "sink_recv_queue_bytes": summary(sink), "server_send_queue_bytes": summary(server),
                      "client_sockets": summary(sockets)}, separators=(",", ":")))


if __name__ == "__main__":
    sys.exit(main())
