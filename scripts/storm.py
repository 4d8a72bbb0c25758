#!/usr/bin/env python3
"""Reconnect storm: N driver sockets on one server, the server restarted, every socket back.

A black-box load tool (HTTP and WebSocket only, plus /proc for the server's CPU), standard
library only. It owns the server process: starts it, stops it with SIGTERM (the sockets get
1001), starts it again on the same data directory and port.

Each socket replays WaybillClient's reconnect policy (ReconnectPolicy.standard: attempt n waits
a uniformly random time in [0, min(60 s, 1 s * 2^n)], n counted since the socket was last live),
fetches a ticket (POST /api/ws-ticket) for every connect as DriverSession does, and resumes with
?cursor= from the last event it saw. A writer creates orders assigned to random drivers the whole
time; at the end every socket must have received the order_created event of every order created
for its driver exactly once.

Roles: `coordinator` (default) runs the server, the writer and the measurements, and starts
`--processes` `clients` children, each driving a share of the sockets (one asyncio loop per
process; sockets are cheap, Python's CPU is not). Children talk JSON lines: progress on stdout,
commands on stdin. Every wait has a deadline.
"""
import argparse
import asyncio
import base64
import json
import os
import random
import signal
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


# --- HTTP and WebSocket over asyncio streams ------------------------------------------------------

async def http(host, port, method, path, token=None, body=None, timeout=10.0):
    """One request on its own connection (Connection: close): (status, body bytes)."""
    async def exchange():
        reader, writer = await asyncio.open_connection(host, port)
        try:
            data = json.dumps(body).encode() if body is not None else b""
            head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
            if token:
                head += f"Authorization: Bearer {token}\r\n"
            if body is not None:
                head += "Content-Type: application/json\r\n"
            head += f"Content-Length: {len(data)}\r\n\r\n"
            writer.write(head.encode() + data)
            answer = await reader.read(-1)
        finally:
            writer.close()
        line, _, rest = answer.partition(b"\r\n")
        status = int(line.split()[1]) if len(line.split()) > 1 else 0
        return status, rest.partition(b"\r\n\r\n")[2]
    return await asyncio.wait_for(exchange(), timeout)


def mask(opcode, payload):
    """A client frame (FIN set), masked as RFC 6455 requires."""
    key = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126, n >> 8, n & 0xFF]))
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


async def read_frame(reader):
    """(fin, opcode, payload) of one server frame (never masked)."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(await reader.readexactly(2), "big")
    elif n == 127:
        n = int.from_bytes(await reader.readexactly(8), "big")
    return b0 & 0x80, b0 & 0x0F, await reader.readexactly(n)


# --- the clients role ---------------------------------------------------------------------------

class Driver:
    def __init__(self, account):
        self.id = account["id"]
        self.token = account["token"]
        self.cursor = None
        self.live = False
        self.live_since = []     # wall times at which a connect was answered with `connected`
        self.events = []         # (order_id, event_id) of every order event received
        self.resets = 0
        self.attempts = 0        # failed connects (ticket or socket)
        self.closes = {}         # close code -> count
        self.state = "new"       # backoff, ticket, connecting, upgraded (no `connected` yet), live
        self.errors = {}         # failure kind -> count


class Clients:
    def __init__(self, args, accounts):
        self.args = args
        self.host, self.port = args.host, args.port
        self.drivers = [Driver(a) for a in accounts]
        self.stopping = False
        self.rng = random.Random(args.seed)

    def live_count(self):
        return sum(1 for d in self.drivers if d.live)

    async def run_driver(self, d):
        attempt = 0
        while not self.stopping:
            try:
                await self.session(d)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as error:
                if not d.live:
                    d.attempts += 1
                    kind = f"{d.state}: {type(error).__name__}"
                    d.errors[kind] = d.errors.get(kind, 0) + 1
                if self.args.verbose:
                    log(f"driver {d.id}: {error!r}")
            if d.live:  # the policy counts attempts since the socket was last live
                attempt = 0
            d.live = False
            if self.stopping:
                break
            # ReconnectPolicy.standard: full jitter over min(cap, base * 2^attempt).
            ceiling = min(60.0, 1.0 * 2 ** min(attempt, 16))
            attempt += 1
            d.state = "backoff"
            await asyncio.sleep(self.rng.uniform(0, ceiling))

    async def session(self, d):
        d.state = "ticket"
        if self.args.auth == "ticket":
            status, body = await http(self.host, self.port, "POST", "/api/ws-ticket", token=d.token)
            if status != 200:
                raise ValueError(f"ticket: {status}")
            query = "ticket=" + json.loads(body)["ticket"]
        else:
            query = "token=" + d.token
        if d.cursor:
            query += "&cursor=" + d.cursor
        d.state = "connecting"
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 10)
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write((f"GET /ws/orders/?{query} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                          "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if b" 101 " not in head.split(b"\r\n", 1)[0]:
                raise ValueError("upgrade refused: " + head.split(b"\r\n", 1)[0].decode(errors="replace"))
            d.state = "upgraded"
            message = b""
            while True:
                # Until `connected`, a silent server is a failed attempt (30 s); then wait for frames.
                fin, opcode, payload = await (read_frame(reader) if d.live else
                                              asyncio.wait_for(read_frame(reader), 30))
                if opcode == 0x9:
                    writer.write(mask(0xA, payload))
                elif opcode == 0x8:
                    code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                    d.closes[code] = d.closes.get(code, 0) + 1
                    writer.write(mask(0x8, payload[:2]))
                    return
                elif opcode in (0x1, 0x0):
                    message += payload
                    if fin:
                        self.frame(d, json.loads(message))
                        message = b""
        finally:
            writer.close()

    def frame(self, d, frame):
        kind = frame.get("type", "")
        if kind == "connected":
            d.live = True
            d.state = "live"
            d.live_since.append(time.time())
            if d.cursor is None:
                d.cursor = frame.get("cursor")
        elif kind == "reset":
            d.resets += 1
        elif kind.startswith("order_"):
            d.events.append((frame.get("order_id") or frame.get("id"), frame.get("event_id")))
            if frame.get("cursor"):
                d.cursor = frame["cursor"]

    async def report_progress(self):
        last = None
        while not self.stopping:
            live = self.live_count()
            states = {}
            for d in self.drivers:
                states[d.state] = states.get(d.state, 0) + 1
            if live != last or int(time.time() * 10) % 50 == 0:
                print(json.dumps({"live": live, "t": time.time(), "states": states}), flush=True)
                last = live
            await asyncio.sleep(0.1)

    async def main(self):
        tasks = []
        for d in self.drivers:  # spread the first connects over a second
            tasks.append(asyncio.create_task(self.run_driver(d)))
            await asyncio.sleep(1.0 / max(1, len(self.drivers)))
        progress = asyncio.create_task(self.report_progress())
        loop = asyncio.get_running_loop()
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:  # the coordinator is gone
            os._exit(1)
        command = json.loads(line)
        expect = {int(k): set(v) for k, v in command["expect"].items()}
        deadline = time.time() + command.get("timeout", 30)
        while time.time() < deadline:  # until every expected event is in (or the deadline)
            if all(expect.get(d.id, set()) <= {o for o, _ in d.events} for d in self.drivers):
                break
            await asyncio.sleep(0.2)
        self.stopping = True
        for t in tasks + [progress]:
            t.cancel()
        await asyncio.gather(*tasks, progress, return_exceptions=True)
        print(json.dumps({"done": self.report(expect)}), flush=True)

    def report(self, expect):
        lost = duplicates = unexpected = received = 0
        for d in self.drivers:
            orders = [o for o, _ in d.events]
            ids = [e for _, e in d.events]
            received += len(d.events)
            duplicates += len(ids) - len(set(ids)) + len(orders) - len(set(orders))
            wanted = expect.get(d.id, set())
            lost += len(wanted - set(orders))
            unexpected += len(set(orders) - wanted)
        closes, errors = {}, {}
        for d in self.drivers:
            for code, n in d.closes.items():
                closes[str(code)] = closes.get(str(code), 0) + n
            for kind, n in d.errors.items():
                errors[kind] = errors.get(kind, 0) + n
        return {
            "sockets": len(self.drivers), "received": received, "lost": lost, "duplicates": duplicates,
            "unexpected": unexpected, "resets": sum(d.resets for d in self.drivers),
            "failed_attempts": sum(d.attempts for d in self.drivers),
            "connects": sum(len(d.live_since) for d in self.drivers), "closes": closes, "errors": errors,
            "live_since": {str(d.id): d.live_since for d in self.drivers},
        }


def clients_role(args):
    accounts = json.load(open(args.seed_file))["drivers"][args.first:args.first + args.count]
    asyncio.run(Clients(args, accounts).main())


# --- the coordinator role ------------------------------------------------------------------------

class Server:
    def __init__(self, args):
        self.args = args
        self.proc = None
        self.log = open(os.path.join(args.data_dir, "server.log"), "ab")

    def start(self):
        a = self.args
        self.proc = subprocess.Popen(
            [a.bin, "serve", "--port", str(a.port), "--data-dir", a.data_dir, "--password-iterations", "1000",
             "--user-requests-per-second", "0"],  # its writer sends --write-rate writes a second with one token
            stdout=self.log, stderr=self.log)

    async def wait_healthy(self, deadline):
        while time.time() < deadline:
            try:
                if (await http(self.args.host, self.args.port, "GET", "/healthz", timeout=2))[0] == 200:
                    return True
            except (OSError, asyncio.TimeoutError, ValueError):
                pass
            await asyncio.sleep(0.05)
        return False

    def ticks(self):
        try:
            fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            return None


class Coordinator:
    def __init__(self, args):
        self.args = args
        self.server = Server(args)
        seed = json.load(open(args.seed_file))
        self.dispatcher = seed["dispatcher_token"]
        self.driver_ids = [d["id"] for d in seed["drivers"][:args.clients]]
        self.expected = {}            # driver id -> order ids created for it (201)
        self.writes = {"ok": 0, "failed": 0}
        self.children = []
        self.live = []                # per child: latest live count
        self.samples = []             # (wall time, server cpu ticks, store transactions or None)
        self.writing = True

    async def writer(self):
        rng = random.Random(self.args.seed + 1)
        interval = 1.0 / self.args.write_rate
        next_at = time.monotonic()
        n = 0
        while self.writing:
            n += 1
            driver = rng.choice(self.driver_ids)
            try:
                status, body = await http(self.args.host, self.args.port, "POST", "/api/orders/", self.dispatcher,
                                          {"title": f"storm {n}", "driver_id": driver}, timeout=5)
                if status == 201:
                    self.expected.setdefault(driver, []).append(json.loads(body)["id"])
                    self.writes["ok"] += 1
                else:
                    self.writes["failed"] += 1
            except (OSError, asyncio.TimeoutError, ValueError, IndexError):
                self.writes["failed"] += 1
            next_at += interval
            await asyncio.sleep(max(0, next_at - time.monotonic()))

    async def sampler(self):
        """Server CPU (from /proc) and the store transaction counter (from /metrics), every 0.5 s."""
        while True:
            ticks = self.server.ticks()
            transactions = None
            try:
                status, body = await http(self.args.host, self.args.port, "GET", "/metrics", timeout=1)
                lines = [line for line in body.decode().splitlines()
                         if line.startswith("waybill_store_transactions_total{")]
                if status == 200 and lines:  # builds before the counter have no such lines
                    transactions = sum(float(line.rsplit(" ", 1)[1]) for line in lines)
            except (OSError, asyncio.TimeoutError, ValueError):
                pass
            self.samples.append((time.time(), self.server.proc.pid, ticks, transactions))
            await asyncio.sleep(0.5)

    async def read_child(self, index, proc):
        while True:
            line = await proc.stdout.readline()
            if not line:
                return
            message = json.loads(line)
            if "live" in message:
                self.live[index] = message["live"]
                self.states[index] = message.get("states", {})
            elif "done" in message:
                self.results[index] = message["done"]

    def all_live(self):
        return sum(self.live) == self.args.clients

    async def wait_until(self, condition, seconds, what):
        deadline = time.time() + seconds
        next_log = time.time() + 10
        while time.time() < deadline:
            if condition():
                return True
            if time.time() >= next_log:
                next_log += 10
                states = {}
                for child in self.states:
                    for k, v in child.items():
                        states[k] = states.get(k, 0) + v
                log(f"storm: waiting for {what}: {sum(self.live)} live, sockets by state {states}")
            await asyncio.sleep(0.05)
        log(f"storm: gave up waiting for {what} after {seconds} s ({sum(self.live)} of {self.args.clients} live)")
        return False

    async def main(self):
        a = self.args
        self.load_at_start = os.getloadavg()[0]
        self.server.start()
        if not await self.server.wait_healthy(time.time() + 30):
            raise SystemExit("storm: the server did not start")
        per = (a.clients + a.processes - 1) // a.processes
        self.results = [None] * a.processes
        self.live = [0] * a.processes
        self.states = [{} for _ in range(a.processes)]
        readers = []
        for i in range(a.processes):
            first, count = i * per, min(per, a.clients - i * per)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--role", "clients", "--seed-file", a.seed_file, "--host", a.host,
                "--port", str(a.port), "--first", str(first), "--count", str(count), "--auth", a.auth,
                "--seed", str(a.seed + 100 + i), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                limit=1 << 26)  # the final report names every socket's connect times
            self.children.append(proc)
            readers.append(asyncio.create_task(self.read_child(i, proc)))
        log(f"storm: connecting {a.clients} sockets in {a.processes} processes ...")
        t = time.time()
        if not await self.wait_until(self.all_live, 120, "the first connects"):
            raise SystemExit(1)
        log(f"storm: all {a.clients} live after {time.time() - t:.1f} s; writing {a.write_rate}/s")
        sampler = asyncio.create_task(self.sampler())
        writer = asyncio.create_task(self.writer())
        await asyncio.sleep(a.before)

        log("storm: SIGTERM to the server")
        t_stop = time.time()
        self.server.proc.send_signal(signal.SIGTERM)
        while self.server.proc.poll() is None and time.time() - t_stop < a.stop_timeout:
            await asyncio.sleep(0.02)
        self.stop_timed_out = self.server.proc.poll() is None
        if self.stop_timed_out:  # it still holds the port: the new server could not bind
            log(f"storm: the server did not exit within {a.stop_timeout} s of SIGTERM; SIGKILL")
            self.server.proc.kill()
            self.server.proc.wait()
        t_exited = self.t_exited = time.time()
        await self.wait_until(lambda: sum(self.live) == 0, 10, "every socket to notice")
        await asyncio.sleep(a.down)
        t_start = time.time()
        self.server.start()
        await self.server.wait_healthy(time.time() + 30)
        if self.server.proc.poll() is not None:
            raise SystemExit("storm: the restarted server exited (see its log)")
        t_healthy = time.time()
        log(f"storm: stopped in {t_exited - t_stop:.2f} s, down {t_start - t_exited:.2f} s, healthy again "
            f"{t_healthy - t_start:.2f} s after start; waiting for {a.clients} sockets ...")
        back = await self.wait_until(self.all_live, a.recover_timeout, "every socket to come back")
        t_back = time.time()
        log(f"storm: {sum(self.live)} of {a.clients} back {t_back - t_start:.1f} s after the restart")
        await asyncio.sleep(a.after)
        self.writing = False
        await writer
        sampler.cancel()

        log(f"storm: {self.writes['ok']} orders written ({self.writes['failed']} refused while down); checking ...")
        for child in self.children:
            child.stdin.write((json.dumps({"expect": self.expected, "timeout": 30}) + "\n").encode())
            await child.stdin.drain()
        for child in self.children:
            await asyncio.wait_for(child.wait(), 60)
        await asyncio.gather(*readers)
        self.server.proc.send_signal(signal.SIGTERM)
        try:
            self.server.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.server.proc.kill()
        return self.summary(t_stop, t_start, t_back if back else None)

    def summary(self, t_stop, t_start, t_back):
        totals = {}
        for r in self.results:
            for key in ("sockets", "received", "lost", "duplicates", "unexpected", "resets", "failed_attempts",
                        "connects"):
                totals[key] = totals.get(key, 0) + (r or {}).get(key, 0)
        back_times = sorted(min((t for t in since if t > t_stop), default=float("inf")) - t_start
                            for r in self.results if r for since in r["live_since"].values())
        closes, errors = {}, {}
        for r in self.results:
            for code, n in (r or {}).get("closes", {}).items():
                closes[code] = closes.get(code, 0) + n
            for kind, n in (r or {}).get("errors", {}).items():
                errors[kind] = errors.get(kind, 0) + n
        # Server CPU and store transactions per second over each sampling interval after the restart
        # (until all were back, plus the --after window).
        cpu, tps = [], []
        storm = [s for s in self.samples if s[0] >= t_start]
        for (t0, p0, c0, s0), (t1, p1, c1, s1) in zip(storm, storm[1:]):
            if p0 == p1 and c0 is not None and c1 is not None:
                cpu.append((c1 - c0) / CLK_TCK / (t1 - t0) * 100)
            if s0 is not None and s1 is not None:
                tps.append((s1 - s0) / (t1 - t0))
        storm_end = (t_back or time.time())
        during = [s for s in storm if s[0] <= storm_end + 0.5 and s[3] is not None]

        def pct(values, p):
            return values[min(len(values) - 1, int(len(values) * p))] if values else None

        first_back = [t for t in back_times if t != float("inf")]
        result = {
            "scenario": "storm", "clients": self.args.clients, "processes": self.args.processes,
            "auth": self.args.auth, "write_rate": self.args.write_rate,
            "all_back_s": round(t_back - t_start, 2) if t_back else None,
            "all_back_after_sigterm_s": round(t_back - t_stop, 2) if t_back else None,
            "back_p50_s": round(pct(first_back, 0.5), 2) if first_back else None,
            "back_p99_s": round(pct(first_back, 0.99), 2) if first_back else None,
            "peak_server_cpu_percent": round(max(cpu), 1) if cpu else None,
            "peak_store_tx_per_s": round(max(tps), 1) if tps else None,
            "store_tx_during_storm": (during[-1][3] - during[0][3]) if len(during) > 1 else None,
            "writes_ok": self.writes["ok"], "writes_refused": self.writes["failed"],
            "stop_s": round(self.t_exited - t_stop, 2), "stop_timed_out": self.stop_timed_out,
            "closes": closes, "failures": errors, **totals,
            # The machine is shared while developing: say how busy it was (1-minute load average).
            "load_at_start": self.load_at_start, "load_at_end": os.getloadavg()[0],
        }
        if result["store_tx_during_storm"] is not None and t_back:
            result["store_tx_per_s_during_storm"] = round(result["store_tx_during_storm"] / max(0.5, t_back - t_start), 1)
        return result


def coordinator_role(args):
    coordinator = Coordinator(args)
    try:
        result = asyncio.run(coordinator.main())
    finally:  # whatever happened: no server or client process outlives the run
        for proc in [coordinator.server.proc] + [c for c in coordinator.children]:
            if proc is not None and proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
        if coordinator.server.proc is not None:
            coordinator.server.proc.wait()
    log(json.dumps(result, indent=1))
    print(json.dumps(result), flush=True)
    ok = result["lost"] == 0 and result["duplicates"] == 0 and result["all_back_s"] is not None
    sys.exit(0 if ok else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", choices=["coordinator", "clients"], default="coordinator")
    p.add_argument("--seed-file", required=True, help="`waybill seed --out` JSON (drivers with tokens)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8091)
    p.add_argument("--auth", choices=["ticket", "token"], default="ticket",
                   help="ticket: POST /api/ws-ticket before every connect (as DriverSession); token: ?token=")
    p.add_argument("--seed", type=int, default=1, help="random seed (jitter, writer)")
    p.add_argument("--verbose", action="store_true")
    # coordinator
    p.add_argument("--bin", help="the waybill binary")
    p.add_argument("--data-dir", help="the server's data directory (already seeded)")
    p.add_argument("--clients", type=int, default=2000)
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--write-rate", type=float, default=20.0, help="orders created per second")
    p.add_argument("--before", type=float, default=5.0, help="seconds of writing before the restart")
    p.add_argument("--down", type=float, default=0.0, help="seconds between the old server's exit and the new start")
    p.add_argument("--after", type=float, default=5.0, help="seconds of writing after every socket is back")
    p.add_argument("--recover-timeout", type=float, default=180.0)
    p.add_argument("--stop-timeout", type=float, default=60.0, help="SIGKILL the server if SIGTERM takes longer")
    # clients
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=0)
    args = p.parse_args()
    if args.role == "clients":
        clients_role(args)
    else:
        coordinator_role(args)


if __name__ == "__main__":
    main()
