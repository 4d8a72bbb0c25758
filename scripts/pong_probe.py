#!/usr/bin/env python3
"""One extra socket that sends an app ping every INTERVAL and times each pong: the server's answer
time while a load runs, measured from a process of its own.

Why: in `scripts/bench.sh connections N`, one Python process holds all N sockets and times their
pongs; at 10 000-15 000 sockets its own event loop adds tens to hundreds of ms to the tail
(docs/BENCHMARKS.md). This probe holds one socket, so its tail is the server's (and the loopback's).

Black-box tool, standard library only. Prints one JSON line on stdout:
{"tool": "pong_probe", "pings": n, "pongs": n, "rtt_ms": {"p50":…, "p99":…, "max":…}, …}.
Every wait has a deadline; it stops after DURATION seconds whatever happens.
"""
import argparse
import base64
import json
import os
import socket
import time


def mask(opcode, payload):
    """A client frame (FIN set), masked as RFC 6455 requires."""
    key = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126, n >> 8, n & 0xFF]))
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


class Frames:
    """Server frames from a blocking socket (never masked)."""
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buf += chunk

    def next(self):
        self._need(2)
        n = self.buf[1] & 0x7F
        at = 2
        if n == 126:
            self._need(4)
            n, at = int.from_bytes(self.buf[2:4], "big"), 4
        elif n == 127:
            self._need(10)
            n, at = int.from_bytes(self.buf[2:10], "big"), 10
        self._need(at + n)
        opcode, payload = self.buf[0] & 0x0F, self.buf[at:at + n]
        self.buf = self.buf[at + n:]
        return opcode, payload

    def message(self):
        """The `type` of the next text message (None for other data frames); protocol pings are
        answered on the way, a close frame raises ConnectionError."""
        while True:
            opcode, payload = self.next()
            if opcode == 0x9:
                self.sock.sendall(mask(0xA, payload))
            elif opcode == 0x8:
                raise ConnectionError("closed by the server")
            else:
                return json.loads(payload).get("type") if opcode == 0x1 else None


def percentile(values, q):
    return round(values[min(len(values) - 1, int(len(values) * q))], 3) if values else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True, help="a user's API token (?token= on the socket)")
    p.add_argument("--duration", type=float, default=30, help="seconds of pinging")
    p.add_argument("--interval", type=float, default=0.02, help="seconds between pings")
    p.add_argument("--timeout", type=float, default=5, help="a pong later than this counts as missing")
    a = p.parse_args()

    sock = socket.create_connection((a.host, a.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET /ws/orders/?token={a.token} HTTP/1.1\r\nHost: {a.host}:{a.port}\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("pong_probe: closed during the upgrade")
        head += chunk
    if b" 101 " not in head.split(b"\r\n", 1)[0]:
        raise SystemExit("pong_probe: upgrade refused: " + head.split(b"\r\n", 1)[0].decode(errors="replace"))
    frames = Frames(sock)
    frames.buf = head.partition(b"\r\n\r\n")[2]

    # The server reads app messages once the socket is authenticated: wait for `connected` first.
    sock.settimeout(a.timeout)
    try:
        while frames.message() != "connected":
            pass
    except ConnectionError:
        raise SystemExit("pong_probe: closed before `connected`")

    ping = mask(0x1, b'{"type":"ping"}')
    rtts, pings, missing, other, error = [], 0, 0, 0, None
    # Pongs carry no id: after a timeout the late pong would be taken for the next ping's, and every
    # later one would look instant. Pongs still owed are skipped before the next ping is timed.
    owed = 0
    end = time.monotonic() + a.duration
    try:
        while time.monotonic() < end:
            sent = None
            sock.settimeout(a.timeout)
            try:
                while True:  # skip other frames (`connected`, protocol pings, owed pongs) until the pong
                    if sent is None and owed == 0:
                        sent = time.perf_counter()
                        sock.sendall(ping)
                        pings += 1
                    if frames.message() == "pong":
                        if owed:
                            owed -= 1
                            continue
                        rtts.append((time.perf_counter() - sent) * 1000)
                        break
                    else:
                        other += 1
            except socket.timeout:
                if sent is None:  # still waiting for owed pongs: give up on them
                    owed = 0
                else:
                    missing += 1
                    owed += 1
                    sent = None
            time.sleep(max(0.0, a.interval - (time.perf_counter() - (sent or time.perf_counter()))))
    except (OSError, ConnectionError, ValueError) as e:
        error = str(e)
    sock.close()
    rtts.sort()
    print(json.dumps({"tool": "pong_probe", "pings": pings, "pongs": len(rtts), "missing": missing,
                      "other_frames": other, "interval_s": a.interval, "error": error,
                      "rtt_ms": {"n": len(rtts), "p50": percentile(rtts, 0.50), "p90": percentile(rtts, 0.90),
                                 "p99": percentile(rtts, 0.99), "max": round(rtts[-1], 3) if rtts else None}}))


if __name__ == "__main__":
    main()
