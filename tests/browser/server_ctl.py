"""Seeds, starts and stops the `waybill` server under test.

One implementation for both callers: scripts/browser-tests.sh (seed, start before pytest,
stop after) and the reconnect test (stop and start again on the same port and data dir).
Everything about the running server lives in a small JSON state file.

    python server_ctl.py init STATE_FILE --bin WAYBILL_BIN --dir TMPDIR   # pick a port, seed
    python server_ctl.py start STATE_FILE
    python server_ctl.py stop STATE_FILE
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    """A free port below Linux's range for outgoing connections (32768 and up): a test that stops
    the server and starts it again on the same port found it taken by one of the browser's own
    reconnects, which the kernel had given that port as its local one (a review, 2026-12-07)."""
    import random
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


def load(state_file):
    with open(state_file) as f:
        return json.load(f)


def save(state_file, state):
    with open(state_file, "w") as f:
        json.dump(state, f, indent=1)


def init(state_file, binary, workdir, drivers=3, orders_per_driver=2):
    data_dir = os.path.join(workdir, "data")
    fixtures = os.path.join(workdir, "fixtures.json")
    os.makedirs(data_dir, exist_ok=True)
    # The tests log in some twenty times: a cheaper password hash (stored with its iteration count)
    # keeps that fast. Only these throwaway test users get it; the server's default is unchanged.
    env = {**os.environ, "WAYBILL_PASSWORD_ITERATIONS": os.environ.get("WAYBILL_PASSWORD_ITERATIONS", "20000")}
    subprocess.run([binary, "seed", "--data-dir", data_dir, "--drivers", str(drivers),
                    "--orders-per-driver", str(orders_per_driver), "--out", fixtures],
                   check=True, stdout=subprocess.DEVNULL, timeout=120, env=env)
    state = {"bin": binary, "host": "127.0.0.1", "port": free_port(), "data_dir": data_dir,
             "fixtures": fixtures, "log": os.path.join(workdir, "server.log"), "pid": None}
    save(state_file, state)
    return state


def base_url(state):
    return f"http://{state['host']}:{state['port']}"


def healthy(state):
    try:
        with urllib.request.urlopen(base_url(state) + "/healthz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def start(state_file, timeout=30):
    state = load(state_file)
    with open(state["log"], "ab") as log:
        process = subprocess.Popen(
            [state["bin"], "serve", "--host", state["host"], "--port", str(state["port"]),
             "--data-dir", state["data_dir"]],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # our own process group: Ctrl-C on the runner does not race us
    state["pid"] = process.pid
    save(state_file, state)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"waybill serve exited with {process.returncode}; see {state['log']}")
        if healthy(state):
            return state
        time.sleep(0.1)
    raise RuntimeError(f"waybill serve did not answer /healthz within {timeout} s; see {state['log']}")


def stop(state_file, timeout=15):
    """SIGTERM (the server closes sockets with 1001), then SIGKILL if it does not exit in time."""
    state = load(state_file)
    pid = state.get("pid")
    if not pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.05)
    state["pid"] = None
    save(state_file, state)


def alive(pid):
    try:
        # Reap it if it is our child (the reconnect test starts it from pytest).
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        # An exited orphan that no init reaps (containers) still answers kill(pid, 0).
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["init", "start", "stop"])
    parser.add_argument("state_file")
    parser.add_argument("--bin")
    parser.add_argument("--dir")
    args = parser.parse_args()
    if args.command == "init":
        init(args.state_file, args.bin, args.dir)
    elif args.command == "start":
        state = start(args.state_file)
        print(f"waybill serve is up at {base_url(state)} (pid {state['pid']})")
    else:
        stop(args.state_file)


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, subprocess.SubprocessError) as error:
        print(f"server_ctl: {error}", file=sys.stderr)
        sys.exit(1)
