#!/usr/bin/env python3
"""Where a write's CPU goes, by phase of the request and by library, from a `perf` profile.

    perf record -F 1999 --call-graph dwarf -p SERVER_PID -o perf.data -- sleep 8   # during `scripts/bench.sh paced 1000 20`
    perf script -i perf.data -F tid,ip,sym,dso > perf.txt
    scripts/perf_phases.py perf.txt [--tid TID] [--writes-per-second 1000 --seconds 8 --frequency 1999]

Each sample goes to the innermost phase found on its stack (Waybill's own frames first; lws,
libev and `epoll_wait` only when no Waybill frame names a phase), and its leaf frame says which
library the time was spent in. By default only the busiest thread (the service thread, which
runs nearly every write start to answer) is counted. Symbols are matched in their mangled form,
so a renamed function drops out of its phase into "other": check that column after a rename.
"""
import argparse
import collections
import re
import sys

# (phase, substrings of mangled symbols); the first match from the leaf up wins.
PHASES = [
    ("commit observer, feed, hub", ["14CommitObserverC", "7HubFeedC", "3HubC"]),
    ("transaction body: rules and statements", ["OrderStorePAAE5write15appendingEvents"]),
    ("BEGIN and COMMIT (WAL, locks)", ["0B11GroupCommitV", "12WALGathering"]),
    ("store.write around the transaction", ["0B10OrderStoreC5write", "8WriteJobV"]),
    ("event frames to their sockets", ["flushDeferredWrites", "writeQueued"]),
    ("the answer to its socket", ["answerDeferred", "answerNow", "10ServerCoreC6answer"]),
    ("request head and body", ["httpRequestStarted", "LwsRequestReader", "httpBodyReceived"]),
    ("access log", ["6LoggerC", "9LogWriterC"]),
    ("metrics", ["7MetricsC"]),
    ("handler (route, token, body, rules' callers, answer's JSON)",
     ["12APIResponderV", "6RoutesO", "12OrderServiceV", "15IdempotentWrite", "16IdempotencyGuard",
      "13AuthenticatorC", "10JSONCodingO"]),
    # Leaf first: a task switch inside a store or feed `await` lands here too, not in its caller.
    ("task runtime and executor (the handler's task, and task switches anywhere)",
     ["8dispatch", "7runHere", "swift_task", "swift_job"]),
    ("service loop's inbox", ["drainInbox", "5woken", "beforeWaiting"]),
]
GENERIC = [("epoll_wait (sleeping and waking)", ["epoll_wait"]),
           ("lws (parsing, its loop)", ["lws_", "libwebsockets"]),
           ("libev", ["ev_run", "ev_invoke"])]
LIBRARIES = ["Swift", "libc", "SQLite", "kernel", "lws/libev", "other"]
# The binary (the Swift runtime is linked in; pass its name with --binary) and Swift's own libraries.
SWIFT_LIBRARIES = ("libswift", "libFoundation", "libdispatch", "libBlocksRuntime")


def samples(path):
    current = None
    for line in open(path, errors="replace"):
        if not line.strip():
            continue
        if not line.startswith("\t"):  # a sample's first line: its thread id (padded with spaces)
            if current:
                yield current
            current = (line.split()[0], [])
            continue
        parts = line.strip().split(None, 1)
        rest = parts[1] if len(parts) > 1 else ""
        match = re.match(r"(.*) \((.*)\)$", rest)
        current[1].append((match.group(1), match.group(2)) if match else (rest, ""))
    if current:
        yield current


def library(frames, binary):
    """The library of a sample's leaf: the first frame that is not inlined (perf prints an
    inlined frame as `sym (inlined)`, and the code it names lives in the frame below it)."""
    dso = next((d for _, d in frames if d != "inlined"), "")
    name = dso.rsplit("/", 1)[-1]
    if "kernel" in dso or name == "[vdso]":
        return "kernel"
    if "sqlite" in name:
        return "SQLite"
    if "websockets" in name or name.startswith("libev"):
        return "lws/libev"
    if name.startswith(("libc.so", "libc-", "libm.so", "libm-")):
        return "libc"
    if name == binary or name.startswith(SWIFT_LIBRARIES):
        return "Swift"
    return "other"  # libcrypto, libpq, the loader, [unknown]


def phase(frames):
    for table in (PHASES, GENERIC):
        for symbol, dso in frames:
            for name, needles in table:
                if any(n in symbol or n in dso for n in needles):
                    return name
    return "other"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("perf_script")
    parser.add_argument("--tid", help="thread to count (default: the busiest); 'all' for every thread")
    parser.add_argument("--writes-per-second", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--frequency", type=float, default=1999)
    parser.add_argument("--binary", help="the server's file name (default: the commonest leaf that is not a library)")
    args = parser.parse_args()
    every = list(samples(args.perf_script))
    # A sample without a call chain (perf then prints its symbol on the first line) says nothing
    # about the phase: left out, and counted.
    skipped = sum(1 for _, frames in every if not frames)
    every = [(t, frames) for t, frames in every if frames]
    if not every:
        sys.exit("no samples")
    tid = args.tid or collections.Counter(t for t, _ in every).most_common(1)[0][0]
    chosen = [frames for t, frames in every if tid == "all" or t == tid]
    binary = args.binary or collections.Counter(
        d.rsplit("/", 1)[-1] for frames in chosen for _, d in frames[:1]
        if d.startswith("/") and ".so" not in d).most_common(1)[0][0]
    table = collections.defaultdict(collections.Counter)
    for frames in chosen:
        table[phase(frames)][library(frames, binary)] += 1
    n = len(chosen)
    # One sample is 1/frequency s of CPU; per write: / (writes per second * seconds).
    per_write = 1e6 / args.frequency / (args.writes_per_second * args.seconds)
    print(f"thread {tid}: {n} of {len(every)} samples ({skipped} without a call chain left out), "
          f"about {n * per_write:.0f} µs per write under perf; binary {binary}\n")
    print("| phase | share | µs/write | " + " | ".join(LIBRARIES) + " |")
    print("|---|---|---|" + "---|" * len(LIBRARIES))
    total = collections.Counter()
    for name, counts in sorted(table.items(), key=lambda item: -sum(item[1].values())):
        total.update(counts)
        cells = " | ".join(f"{counts[lib] / n * 100:.1f} %" for lib in LIBRARIES)
        print(f"| {name} | {sum(counts.values()) / n * 100:.1f} % | {sum(counts.values()) * per_write:.0f} | {cells} |")
    cells = " | ".join(f"{total[lib] / n * 100:.1f} %" for lib in LIBRARIES)
    print(f"| all | 100 % | {n * per_write:.0f} | {cells} |")


if __name__ == "__main__":
    main()
