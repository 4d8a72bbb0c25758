#!/usr/bin/env python3
"""The side-by-side table of `scripts/bench.sh compare` from its tagged JSON lines.

  scripts/bench_compare_table.py bench-results/compare-<time>.jsonl [--commands TEXT] [--settings TEXT]

Each input line carries "system" (waybill, peer, nchan) and "row" (idle, fanout, latency, writes, paced).
The anchor of a row is the system the issue compares Waybill with there: Nchan for idle sockets and
fan-out, the Django Channels peer (the original stack) for delivery latency and write throughput.
Ratios are Waybill / anchor. Standard library only.
"""
import argparse, json, os, time


def load(path):
    runs = {}
    for line in open(path):
        d = json.loads(line)
        runs.setdefault((d["system"], d["row"]), []).append(d)
    return runs


def fmt(x, nd=1):
    if x is None:
        return "—"
    if isinstance(x, float) and nd == 0:
        x = round(x)
    if isinstance(x, int) or (isinstance(x, float) and nd == 0):
        return f"{x:,}".replace(",", " ")
    return f"{x:.{nd}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.2f}×" if r >= 0.1 else f"{r:.2g}×"


def machine_busy(d):
    """Share of both cores busy during the measured window (other processes included), if recorded."""
    if not d:
        return None
    if "cpu_during_hold" in d:
        return d["cpu_during_hold"]["machine"]["busy_util"]
    if "cpu_hold" in d:
        return d["cpu_hold"].get("machine")
    cpu = d.get("cpu") or {}
    if "machine_busy" in cpu:
        return cpu["machine_busy"]
    m = cpu.get("machine")
    return m.get("busy_util") if isinstance(m, dict) else m


def busy_note(d):
    b = machine_busy(d)
    note = f"; machine {round(b * 100)} % busy" if b is not None else ""
    steal = (d or {}).get("machine_steal")
    if steal is not None:  # the hypervisor ran someone else on our cores: latency spikes we cannot fix
        note += f", {steal * 100:.1f} % stolen"
    return note


def idle(runs, system):
    lines = runs.get((system, "idle"), [])
    d = next((x for x in lines if x.get("scenario") != "pong_probe"), None)
    probe = next((x for x in lines if x.get("scenario") == "pong_probe"), None)
    if not d:
        return None
    if system == "nchan":
        cpu = d["cpu_hold"].get("nginx")
        return {"sockets": d["connected"], "cpu": cpu, "us_per_msg": None, "rtt_p99": None,
                "rss": d.get("rss_per_socket_kb"), "note": "no app pings: Nchan has none", "busy": busy_note(d)}
    hold = d["cpu_during_hold"]
    # app pings during the hold window: every socket pings once per interval
    msgs = d["connected"] * hold["wall_s"] / d["ping_interval_s"]
    cpu = hold["server"]["cpu_util"]
    return {"sockets": d["connected"], "cpu": cpu,
            "us_per_msg": round(hold["server"]["cpu_s"] * 1e6 / msgs) if msgs else None,
            "rtt_p99": d["pong_rtt_ms"]["p99"], "rss": d["rss_kb_per_connection"]["server"],
            "pongs": f'{d["pongs_received"]}/{d["pings_sent"]}', "busy": busy_note(d),
            "probe": probe}


def latency_or_none(stats, key):
    """wsdrain reports -1 when no frame carried a timestamp."""
    value = stats.get(key)
    return None if value is None or value < 0 else value


def sink_backlog(d, frames_per_s):
    """Bytes waiting in the kernel's TCP queues during the run (scripts/socket_queues.py, mean over
    the samples with anything queued): unread in the clients' receive queues (the sink's, plus the
    writers' near-empty ones) and not yet sent by the server. `ms`: how long the sink takes to read
    that much at the run's rate — the mean time a frame waits behind the sink's reading."""
    queues = d.get("socket_queues") or {}
    unread, notsent = queues.get("sink_recv_queue_bytes"), queues.get("server_notsent_bytes") or {}
    w = d.get("wsdrain") or {}
    if not unread or not frames_per_s or not w.get("text_frames"):
        return None
    bytes_per_s = frames_per_s * w["bytes"] / w["text_frames"]
    held = notsent.get("mean") or 0
    return {"unread": unread["mean"], "held": held, "ms": round((unread["mean"] + held) / bytes_per_s * 1000, 1)}


def fanout_run(d, system):
    """One closed-loop fan-out run (`fanout` or `fanout_deep`) of `system`, or None."""
    if not d:
        return None
    if system == "nchan":
        return {"frames": d["deliveries_per_s"], "p50": latency_or_none(d["latency_ms"], "p50"),
                "p99": latency_or_none(d["latency_ms"], "p99"), "lost": d["lost"], "cpu": d["cpu"]["nginx"],
                "writes": d["publishes_per_s"], "sink_cpu": d["cpu"].get("wsdrain"), "busy": busy_note(d),
                "backlog": sink_backlog(d, d["deliveries_per_s"]), "in_flight": d.get("pub_connections")}
    w = d["wsdrain"]
    return {"frames": d["event_frames_per_s_write_window"], "p50": latency_or_none(w["latency_ms"], "p50"),
            "p99": latency_or_none(w["latency_ms"], "p99"), "lost": d.get("lost"), "cpu": d["cpu"]["server"],
            "writes": d.get("patch_per_s"), "sink_cpu": d["cpu"].get("wsdrain"), "busy": busy_note(d),
            "backlog": sink_backlog(d, d["event_frames_per_s_write_window"]), "in_flight": d.get("write_connections")}


def fanout(runs, system):
    """The fan-out row: the runs with as many writes in flight as Nchan's publisher has connections,
    plus (`deep`) the run with 32 in flight on both, and Waybill's run at Nchan's rate (`matched`).

    The first shape runs twice on both systems, in the order Waybill, Nchan … Nchan, Waybill (the
    second pair after the other fan-out runs), and the row gives the mean of each system's runs:
    two runs of one build a minute apart differed by up to a third on this VM, and a drift of the
    machine's speed then decided the ratio (docs/BENCHMARKS.md). Each run is listed too."""
    first = lambda row: (runs.get((system, row)) or [None])[0]
    each = [r for r in (fanout_run(d, system) for d in runs.get((system, "fanout"), [])) if r]
    if not each:
        return None
    result = dict(each[0])
    if len(each) > 1:
        def mean(key):
            values = [r[key] for r in each if r.get(key) is not None]
            return sum(values) / len(values) if values else None
        for key in ("frames", "p50", "p99", "cpu", "writes", "sink_cpu"):
            result[key] = mean(key)
        lost = [r["lost"] for r in each]
        result["lost"] = None if any(x is None for x in lost) else sum(lost)
        result["busy"] = "".join(r.get("busy", "") for r in each)
        result["each"] = each
    deep = fanout_run(first("fanout_deep"), system)
    if deep:
        result["deep"] = deep
    m = first("fanout_matched")
    if m and m.get("scenario") == "paced":
        result["matched"] = paced_row(m)
    return result


def harness_fanout(d):
    cpu = d["cpu"]["server"]
    return {"rate": d["target_rate_per_s"], "achieved": d["throughput_writes_per_s"],
            "p50": d["delivery_latency_ms"]["p50"], "p99": d["delivery_latency_ms"]["p99"],
            "lost": d["events_lost"] + d["events_late"], "dup": d["events_duplicate"],
            "not_increasing": d.get("event_id_not_increasing"), "leaked": d["events_leaked"],
            "cpu": cpu["cpu_util"], "us_per_write": round(cpu["cpu_s"] * 1e6 / d["writes_ok"]) if d["writes_ok"] else None,
            "busy": busy_note(d)}


def latency(runs, system):
    (d,) = runs.get((system, "latency"), [None])[:1] or [None]
    if not d:
        return None
    if system == "nchan":
        return {"p50": latency_or_none(d["latency_ms"], "p50"), "p99": latency_or_none(d["latency_ms"], "p99"),
                "lost": d["lost"], "cpu": d["cpu"]["nginx"],
                "note": "wsdrain, ms resolution", "busy": busy_note(d)}
    return harness_fanout(d)


def writes(runs, system):
    rows = [harness_fanout(d) for key in ((system, "latency"), (system, "writes")) for d in runs.get(key, [])
            if d.get("scenario") == "fanout"]
    return sorted(rows, key=lambda r: r["rate"])


def paced(runs, system):
    """`scripts/bench.sh paced` runs: wrk on a fixed schedule + wsdrain (Waybill only)."""
    rows = [paced_row(d) for d in runs.get((system, "paced"), []) if d.get("scenario") == "paced"]
    return sorted(rows, key=lambda r: r["rate"])


def paced_row(d):
    """One `scripts/bench.sh paced` line (the paced rows, and the fan-out row's run at Nchan's rate)."""
    lat = d["delivery_latency_ms"]
    return {"rate": d["offered_writes_per_s"], "achieved": d["writes_per_s"], "lost": d["lost"],
            "errors": d["write_errors"], "late": d["late_slots"], "p50": latency_or_none(lat, "p50"),
            "p99": latency_or_none(lat, "p99"), "answer_p99": (d.get("answer_ms") or {}).get("p99"),
            "frames": d.get("event_frames_per_s"), "cpu": d["cpu"]["server"], "sink_cpu": d["cpu"].get("wsdrain"),
            "us_per_write": d["server_cpu_us_per_write"], "busy": busy_note(d)}


def nchan_paced(runs):
    """Nchan at 1 000 messages/s to one socket: its CPU per message, the anchor for CPU per write."""
    (d,) = runs.get(("nchan", "paced"), [None])[:1] or [None]
    if not d or not d.get("publishes_per_s"):
        return None
    return {"rate": d["publishes_per_s"], "sockets": d["sockets"], "lost": d["lost"], "cpu": d["cpu"]["nginx"],
            "us_per_msg": d["cpu"]["nginx"] * 1e6 / d["publishes_per_s"],
            "p50": latency_or_none(d["latency_ms"], "p50"), "p99": latency_or_none(d["latency_ms"], "p99"),
            "busy": busy_note(d)}


def paced_cell(rows):
    if not rows:
        return "no result"
    return "<br>".join(
        f'{fmt(r["rate"], 0)}/s offered: {fmt(r["achieved"])}/s achieved (late slots {r["late"]}), lost {r["lost"]}, '
        f'errors {r["errors"]}, delivery p50 {fmt(r["p50"])} / **p99 {fmt(r["p99"])} ms**, answer p99 '
        f'{fmt(r["answer_p99"], 2)} ms, CPU {fmt(r["cpu"] * 100)} % = **{fmt(r["us_per_write"], 0)} µs/write**{r["busy"]}'
        for r in rows)


def idle_cell(x):
    s = f'{fmt(x["sockets"], 0)} sockets: CPU {fmt(x["cpu"] * 100)} % of a core'
    if x.get("us_per_msg") is not None:
        s += f', {fmt(x["us_per_msg"], 0)} µs/ping, pong p99 {fmt(x["rtt_p99"], 2)} ms ({x["pongs"]})'
    if x.get("probe"):
        p = x["probe"]
        s += (f'; one more socket pinging every {fmt(p["interval_s"] * 1000, 0)} ms from its own process: '
              f'pong p50 {fmt(p["rtt_ms"]["p50"], 2)} / **p99 {fmt(p["rtt_ms"]["p99"], 2)} ms** '
              f'({p["pongs"]}/{p["pings"]})')
    if x.get("rss") is not None:
        s += f', RSS {fmt(x["rss"])} KiB/socket'
    return s + (f' ({x["note"]})' if x.get("note") else "") + x.get("busy", "")


def in_flight(x):
    return f'{x["in_flight"]} writes in flight' if x.get("in_flight") else "more writes in flight"


def fanout_cell(x, deep=False):
    s = f'<br>with {in_flight(x)}: ' if deep else ''
    if x.get("in_flight") and not deep:
        s += f'{in_flight(x)}: '
    s += (f'**{fmt(x["frames"], 0)} frames/s** ({fmt(x["writes"])} writes/s), p50 {fmt(x["p50"])} / '
          f'p99 {fmt(x["p99"])} ms, lost {fmt(x["lost"], 0)}, CPU {fmt(x["cpu"] * 100)} %')
    if x.get("each"):
        s += (f' (mean of {len(x["each"])} runs: '
              + " and ".join(f'{fmt(r["frames"], 0)} frames/s, p99 {fmt(r["p99"])} ms' for r in x["each"]) + ')')
    if x.get("sink_cpu") is not None:
        s += f', wsdrain (the sink) {fmt(x["sink_cpu"] * 100)} %'
    if x.get("backlog"):
        b = x["backlog"]
        s += f'; waiting for the sink (mean): {fmt(b["unread"] / 1e6, 2)} MB unread'
        if b["held"]:
            s += f' + {fmt(b["held"] / 1e6, 2)} MB not yet sent'
        s += f' ≈ **{fmt(b["ms"])} ms** of its reading at this rate'
    s += x.get("busy", "")
    if x.get("matched"):
        m = x["matched"]
        s += (f'<br>at Nchan\'s rate, on a schedule ({fmt(m["rate"], 0)} writes/s offered, {fmt(m["achieved"])} achieved, '
              f'late slots {m["late"]}): {fmt(m["frames"], 0)} frames/s, p50 {fmt(m["p50"])} / **p99 {fmt(m["p99"])} ms**, '
              f'lost {fmt(m["lost"], 0)}, CPU {fmt(m["cpu"] * 100)} %, wsdrain {fmt(m["sink_cpu"] * 100)} %{m["busy"]}')
    if x.get("deep"):
        s += fanout_cell(x["deep"], deep=True)
    return s


def latency_cell(x):
    s = f'p50 {fmt(x["p50"], 2)} / **p99 {fmt(x["p99"], 2)} ms**, lost {fmt(x["lost"], 0)}'
    if "us_per_write" in x:
        s += f', dup {x["dup"]}, CPU {fmt(x["cpu"] * 100)} % ({fmt(x["us_per_write"], 0)} µs/write)'
    else:
        s += f', CPU {fmt(x["cpu"] * 100)} %'
    return s + (f' ({x["note"]})' if x.get("note") else "") + x.get("busy", "")


def scenario_row(runs, label, measure, cell, anchor, compare):
    """The table row of one scenario measured on all three systems: `label`, then each system's
    `measure(runs, system)` rendered by `cell` ("no result" where there is none), then
    `compare(waybill, anchor)` when both have a result ("—" when not)."""
    results = {system: measure(runs, system) for system in ("waybill", "peer", "nchan")}
    cells = [cell(x) if x else "no result" for x in results.values()]
    w, a = results["waybill"], results[anchor]
    return "| " + " | ".join([label, *cells, compare(w, a) if w and a else "—"]) + " |"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--commands", default="scripts/bench.sh compare")
    ap.add_argument("--settings", default="")
    a = ap.parse_args()
    runs = load(a.jsonl)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(a.jsonl)))
    out = [f"### `{a.commands}` — {when}", ""]
    if a.settings:
        out += [f"Settings: {a.settings}. Raw lines: `{os.path.basename(a.jsonl)}`.", ""]
    out += ["| scenario | Waybill | Django Channels peer | Nchan (1 worker) | Waybill ÷ anchor |", "|---|---|---|---|---|"]

    out.append(scenario_row(
        runs, "idle sockets, app ping every 10 s", idle, idle_cell, "nchan",
        lambda w, n: f'CPU {fmt(w["cpu"] * 100)} % vs {fmt(n["cpu"] * 100)} % (anchor: Nchan, no pings)'))
    out.append(scenario_row(
        runs, "fan-out, 1 000 sockets get every event, max rate", fanout, fanout_cell, "nchan",
        lambda w, n: f'frames/s **{ratio(w["frames"], n["frames"])}** (target ≥ 0.90×), '
                     f'p99 **{ratio(w["p99"], n["p99"])}** (target ≤ 2×)'
                     + (f'; at Nchan\'s rate p99 **{ratio(w["matched"]["p99"], n["p99"])}**' if w.get("matched") else "")
                     + (f'; with {in_flight(w["deep"])} on both: frames/s {ratio(w["deep"]["frames"], n["deep"]["frames"])}, '
                        f'p99 {ratio(w["deep"]["p99"], n["deep"]["p99"])}' if w.get("deep") and n.get("deep") else "")))
    out.append(scenario_row(
        runs, "delivery at 100 writes/s, 50 driver sockets", latency, latency_cell, "peer",
        lambda w, p: f'p99 {ratio(w["p99"], p["p99"])} of the peer\'s (target p99 ≤ 2 ms)'))

    ww, wp = writes(runs, "waybill"), writes(runs, "peer")
    def best(rows):
        ok = [r for r in rows if r["lost"] == 0 and r["dup"] == 0]
        return max(ok, key=lambda r: r["achieved"]) if ok else None
    def writes_cell(rows):
        if not rows:
            return "no result"
        parts = [f'{fmt(r["rate"], 0)}/s offered: {fmt(r["achieved"])}/s achieved, lost {r["lost"]}, p99 {fmt(r["p99"], 1)} ms, '
                 f'CPU {fmt(r["cpu"] * 100)} % = **{fmt(r["us_per_write"], 0)} µs/write**{r["busy"]}' for r in rows]
        return "<br>".join(parts)
    bw, bp = best(ww), best(wp)
    r_w = "—"
    if bw and wp and not bp:
        r_w = f'highest rate with 0 lost: {fmt(bw["achieved"])}/s; the peer lost events in every run'
    if bw and bp:
        r_w = f'highest rate with 0 lost: {fmt(bw["achieved"])} vs {fmt(bp["achieved"])}/s = **{ratio(bw["achieved"], bp["achieved"])}**'
    out.append(f"| writes/s with 0 lost (open loop, 50 driver sockets) | {writes_cell(ww)} | {writes_cell(wp)} | — (no writes) | {r_w} |")

    # The same write rows with C clients: the harness (one Python process) cannot offer 2 000/s here.
    pw, nl, npc = paced(runs, "waybill"), latency(runs, "nchan"), nchan_paced(runs)
    nchan_cell = (f'100/s to 50 sockets (the delivery row\'s run, wsdrain): p50 {fmt(nl["p50"])} / **p99 {fmt(nl["p99"])} ms**'
                  if nl else "no result")
    if npc:
        nchan_cell += (f'<br>{fmt(npc["rate"], 0)}/s to {npc["sockets"]} socket: p50 {fmt(npc["p50"])} / p99 {fmt(npc["p99"])} ms, '
                       f'lost {npc["lost"]}, CPU {fmt(npc["cpu"] * 100)} % = **{fmt(npc["us_per_msg"], 0)} µs/message**{npc["busy"]}')
    by_rate = {r["rate"]: r for r in pw}
    verdicts = []
    if 100 in by_rate and nl and nl.get("p99") is not None:
        verdicts.append(f'p99 at 100/s {fmt(by_rate[100]["p99"])} vs Nchan {fmt(nl["p99"])} ms = **{ratio(by_rate[100]["p99"], nl["p99"])}** (target ≤ 2 ms)')
    if 2000 in by_rate:
        r = by_rate[2000]
        verdicts.append(f'2 000/s: {fmt(r["achieved"])}/s, lost {r["lost"]}, p99 **{fmt(r["p99"])} ms** (target ≤ 20 ms)')
    if 1000 in by_rate:
        v = f'CPU per write at 1 000/s: **{fmt(by_rate[1000]["us_per_write"], 0)} µs** (target ≤ 150)'
        if npc:
            v += f', Nchan {fmt(npc["us_per_msg"], 0)} µs per message = **{ratio(by_rate[1000]["us_per_write"], npc["us_per_msg"])}**'
        verdicts.append(v)
    out.append(f"| writes by C clients (`scripts/bench.sh paced`: wrk on a fixed schedule + wsdrain on the 50 driver sockets; "
               f"latency from the event's `changed_at`, ms resolution) | {paced_cell(pw)} | — (loses events at 37/s) | "
               f"{nchan_cell} | {'; '.join(verdicts) or '—'} |")

    checks = []
    for system in ("waybill", "peer"):
        rows = [harness_fanout(d) for (s, _), ds in runs.items() if s == system for d in ds if d.get("scenario") == "fanout"]
        if rows:
            checks.append(f'{system}: {len(rows)} harness runs, lost {sum(r["lost"] for r in rows)}, duplicate '
                          f'{sum(r["dup"] for r in rows)}, leaked {sum(r["leaked"] for r in rows)}, ids not increasing '
                          f'{sum(r["not_increasing"] or 0 for r in rows)}')
    out += ["", "Correctness: " + "; ".join(checks) + ".",
            "", "CPU is a share of one core (server process; Nchan: master + worker). \"machine … busy\" is the share of "
            "both cores busy during the window, other processes included: near 100 % the systems competed for CPU "
            "(with each other's clients and with anything else running), and their latencies and rates show it. "
            "\"stolen\" is the share of both cores' time the hypervisor gave to other machines during the run "
            "(/proc/stat): a vCPU taken away for milliseconds shows as latency spikes in whatever ran on it."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
