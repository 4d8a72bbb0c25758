#!/usr/bin/env python3
"""Login flood against a running `waybill demo` (used by scripts/bench-login-flood.sh).

While FLOOD concurrent clients send bogus logins for FLOOD_SECONDS (unknown emails) run from a set of loopback source addresses, it
measures: /healthz latency (polled every 10 ms), live event delivery (an order PATCHed every
25 ms by the dispatcher, time from sending the PATCH until the panel's WebSocket frame arrives),
and how long a real user's login takes from another address (retrying 503s after Retry-After).
Standard library only. Prints one JSON object.
"""
import base64, json, multiprocessing, os, socket, sys, threading, time

HOST = "127.0.0.1"
PORT = int(os.environ.get("PORT", "8080"))
FLOOD = int(os.environ.get("FLOOD", "500"))
ADDRESSES = int(os.environ.get("FLOOD_ADDRESSES", "50"))
# Each of the FLOOD workers keeps sending bogus logins for this long (0 = one login each).
SECONDS = float(os.environ.get("FLOOD_SECONDS", "10"))
NICE = int(os.environ.get("FLOOD_NICE", "0"))
# The flood runs in this many processes, so the measuring threads do not wait for its GIL.
PROCESSES = int(os.environ.get("FLOOD_PROCESSES", "4"))
DISPATCHER = ("dispatcher@demo.example.com", "demo-dispatcher")


def request(method, path, body=None, token=None, source=None, timeout=30):
    """One HTTP/1.1 request on a fresh connection; returns (status, headers, body, seconds)."""
    started = time.monotonic()
    s = socket.socket()
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect((HOST, PORT))
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\nConnection: close\r\n"
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    chunks = []
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    s.close()
    raw = b"".join(chunks)
    header, _, payload = raw.partition(b"\r\n\r\n")
    lines = header.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers, payload, time.monotonic() - started


def cpu_seconds():
    """User + system CPU time of the server (SERVER_PID), or None."""
    try:
        fields = open(f"/proc/{os.environ['SERVER_PID']}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (KeyError, OSError, ValueError, IndexError):
        return None


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Panel:
    """A minimal WebSocket client for the dispatcher's panel stream (text frames only)."""

    def __init__(self, ticket):
        self.sock = socket.create_connection((HOST, PORT), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws/orders/?ticket={ticket} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n"
                           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        self.buffer = self.buffer.split(b"\r\n\r\n", 1)[1]

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def frame(self):
        b0, b1 = self._read(2)
        length = b1 & 0x7F
        if length == 126:
            length = int.from_bytes(self._read(2), "big")
        elif length == 127:
            length = int.from_bytes(self._read(8), "big")
        payload = self._read(length)
        return b0 & 0x0F, payload


def flood_process(first, count, results):
    """`count` flood clients (threads) in one process: the measuring process keeps its own GIL."""
    # FLOOD_NICE > 0 lowers the generator's CPU priority, so that on a machine where it must share the
    # server's cores it takes their idle time rather than the server's (as a generator elsewhere would).
    if NICE:
        os.nice(NICE)
    answers = {}
    lock = threading.Lock()

    def bogus(i):
        source = f"127.0.1.{1 + i % ADDRESSES}"
        until = time.monotonic() + SECONDS
        n = 0
        while True:
            n += 1
            try:
                status = request("POST", "/api/auth/login", {"email": f"bot{i}-{n}@nowhere.example", "password": "guess"},
                                 source=source, timeout=60)[0]
            except OSError:
                status = 0
            with lock:
                answers[status] = answers.get(status, 0) + 1
            if time.monotonic() >= until:
                return

    workers = [threading.Thread(target=bogus, args=(first + k,)) for k in range(count)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put(answers)


def main():
    status, _, body, _ = request("POST", "/api/auth/login", {"email": DISPATCHER[0], "password": DISPATCHER[1]}, source="127.0.0.2")
    token = json.loads(body)["token"]
    orders = json.loads(request("GET", "/api/orders/", token=token)[2])
    order_id = orders[0]["id"]
    ticket = json.loads(request("POST", "/api/ws-ticket", token=token)[2])["ticket"]
    panel = Panel(ticket)
    panel.frame()  # connected

    stop = threading.Event()
    health, delivery = [], []
    sent = {}

    def poll_health():
        while not stop.is_set():
            try:
                health.append(request("GET", "/healthz", source="127.0.0.3", timeout=10)[3])
            except OSError:
                health.append(10.0)
            time.sleep(0.01)

    def read_panel():
        while not stop.is_set():
            try:
                opcode, payload = panel.frame()
            except (OSError, EOFError):
                return
            if opcode != 1:
                continue
            frame = json.loads(payload)
            if frame.get("type") == "order_updated" and frame.get("order_id") == order_id and sent.get("at"):
                delivery.append(time.monotonic() - sent.pop("at"))

    def write_events():
        n = 0
        while not stop.is_set():
            n += 1
            sent["at"] = time.monotonic()
            request("PATCH", f"/api/orders/{order_id}/", {"notes": f"flood {n}"}, token=token, source="127.0.0.2")
            deadline = time.monotonic() + 2
            while "at" in sent and time.monotonic() < deadline:
                time.sleep(0.002)
            sent.pop("at", None)
            time.sleep(0.025)

    threads = [threading.Thread(target=f, daemon=True) for f in (poll_health, read_panel, write_events)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    baseline_health = list(health)
    health.clear()
    delivery.clear()
    started = time.monotonic()
    server_cpu = cpu_seconds()
    results = multiprocessing.Queue()
    per = (FLOOD + PROCESSES - 1) // PROCESSES
    floods = [multiprocessing.Process(target=flood_process, args=(p * per, min(per, FLOOD - p * per), results))
              for p in range(PROCESSES) if p * per < FLOOD]
    for f in floods:
        f.start()
    time.sleep(0.3)  # the flood is in full swing
    login_started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        status, headers, _, _ = request("POST", "/api/auth/login", {"email": "driver1@demo.example.com", "password": "demo-driver"},
                                        source="127.0.0.4", timeout=60)
        if status != 503 or time.monotonic() - login_started > 30:
            break
        time.sleep(float(headers.get("retry-after", "1")))
    real_login = time.monotonic() - login_started
    answers = {}
    for _ in floods:
        for code, n in results.get().items():
            answers[code] = answers.get(code, 0) + n
    for f in floods:
        f.join()
    flood_seconds = time.monotonic() - started
    server_cpu = cpu_seconds() - server_cpu if server_cpu is not None else None
    stop.set()
    ms = lambda v: None if v is None else round(v * 1000, 1)
    print(json.dumps({
        "flood": FLOOD, "flood_nice": NICE, "flood_seconds_target": SECONDS, "flood_requests": sum(answers.values()), "flood_addresses": ADDRESSES, "flood_seconds": round(flood_seconds, 2),
        "flood_answers": answers,
        "healthz_p50_ms": ms(percentile(health, 50)), "healthz_p99_ms": ms(percentile(health, 99)),
        "healthz_max_ms": ms(max(health) if health else None), "healthz_samples": len(health),
        "healthz_idle_p99_ms": ms(percentile(baseline_health, 99)),
        "delivery_p50_ms": ms(percentile(delivery, 50)), "delivery_p99_ms": ms(percentile(delivery, 99)),
        "delivery_samples": len(delivery),
        "server_cpu_seconds": None if server_cpu is None else round(server_cpu, 2),
        "load_average": os.getloadavg()[0],
        "real_login_status": status, "real_login_ms": ms(real_login), "real_login_attempts": attempts,
    }))


if __name__ == "__main__":
    sys.exit(main())
