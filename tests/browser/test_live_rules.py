"""The rules of live.js, run on plain values in the real browser: backoff, coalescing, resume."""
import json


def run_module(page, script):
    """Runs `script` (an async function body with `live` = the live.js module) in the page."""
    return page.evaluate(f"async () => {{ const live = await import('/assets/live.js'); {script} }}")


def test_full_jitter_stays_inside_the_doubling_window_up_to_the_cap(page, server):
    page.goto("/")
    result = run_module(page, """
      const p = live.DEFAULT_POLICY;
      const top = (a) => live.fullJitterDelay(a, p, () => 0.999999);
      const bottom = (a) => live.fullJitterDelay(a, p, () => 0);
      return { tops: [0,1,2,3,4,5,6,10,30].map(top), bottoms: [0,5,30].map(bottom), base: p.baseMs, cap: p.capMs };
    """)
    assert result["base"] == 1000 and result["cap"] == 30000
    assert result["tops"] == [999, 1999, 3999, 7999, 15999, 29999, 29999, 29999, 29999]
    assert result["bottoms"] == [0, 0, 0]


FAKE_SOCKET = """
  class FakeSocket {
    static last = null; static urls = [];
    constructor(url) { this.url = url; FakeSocket.last = this; FakeSocket.urls.push(url); this.sent = []; }
    send(text) { this.sent.push(text); }
    close() {}
    frame(obj) { this.onmessage({ data: JSON.stringify(obj) }); }
    drop(code) { this.onclose({ code }); }
  }
  let tickets = 0;
  const api = { wsTicket: async () => ({ ticket: 't' + (++tickets), expires_in: 60 }) };
  const signals = [], statuses = [], resets = [];
  const feed = new live.LiveFeed({
    api, WebSocketImpl: FakeSocket, random: () => 0, coalesceMs: 100,
    onSignal: async (s) => { if (s.reset) resets.push(signals.length); signals.push({ all: s.all, ids: [...s.orderIds].sort((a, b) => a - b), deleted: [...s.deletedIds] });
                             await new Promise((r) => setTimeout(r, 50)); },
    onStatus: (s) => statuses.push(s.state), onAuthFailure: (code) => statuses.push('auth-' + code),
  });
  const tick = (ms) => new Promise((r) => setTimeout(r, ms));
  // Starts the feed, says `connected` (event 10) on its socket and waits out the connect refetch.
  const goLive = async () => {
    feed.start();
    await tick(20);
    const socket = FakeSocket.last;
    socket.frame({ type: 'connected', user_id: 1, groups: ['company_1'], event_id: 10 });
    await tick(300);
    return socket;
  };
"""


def test_a_burst_of_events_costs_one_refetch_and_reconnects_resume_with_since(page, server):
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      const first = await goLive();
      for (let i = 1; i <= 50; i++) first.frame({ type: 'order_updated', id: i % 5 + 1, order_id: i % 5 + 1, event_id: 10 + i });
      first.frame({ type: 'order_deleted', id: 3, order_id: 3, event_id: 61 });
      first.frame({ type: 'pong' });
      first.frame('not json at all');
      await tick(400);
      const afterBurst = signals.length;
      first.drop(1001);                      // server going away → reconnect (random()=0 → at once)
      await tick(50);
      const second = FakeSocket.last;
      second.frame({ type: 'connected', user_id: 1, groups: ['company_1'], event_id: 70 });
      await tick(300);
      second.drop(4001);                     // refused: stop for good
      await tick(50);
      const socketsAfterStop = FakeSocket.urls.length;
      await tick(300);
      return { signals, afterBurst, urls: FakeSocket.urls, statuses, socketsAfterStop, nowSockets: FakeSocket.urls.length };
    """)
    signals = result["signals"]
    # connect → one refetch of everything; 51 events → one refetch naming the 5 orders.
    assert result["afterBurst"] == 2, json.dumps(signals)
    assert signals[0]["all"] is True
    assert signals[1] == {"all": False, "ids": [1, 2, 3, 4, 5], "deleted": [3]}
    # The reconnect resumed after the newest event seen and refetched everything.
    assert "since=" not in result["urls"][0]
    assert "since=61" in result["urls"][1] and "ticket=t2" in result["urls"][1]
    assert signals[2]["all"] is True
    assert result["statuses"][-2:] == ["stopped", "auth-4001"]
    assert "reconnecting" in result["statuses"] and "live" in result["statuses"]
    assert result["socketsAfterStop"] == result["nowSockets"] == 2


def test_a_socket_refused_before_connected_is_tried_once_more_with_a_fresh_ticket(page, server):
    """A ticket that expired or was used on its way in (a slow link, a laptop asleep between the
    ticket and the upgrade) is refused with 4001 like a bad token: one more try with a fresh ticket
    tells them apart. It logged the user out though the token was valid."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.start();
      await tick(20);
      FakeSocket.last.drop(4001);            // refused before `connected`: maybe the ticket
      await tick(50);
      const retried = FakeSocket.urls.length;
      FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: ['company_1'], event_id: 10 });
      await tick(300);
      const wentLive = statuses.includes('live') && !statuses.some((s) => s.startsWith('auth-'));
      FakeSocket.last.drop(1006);            // a plain drop later
      await tick(50);
      FakeSocket.last.drop(4001);            // refused before `connected` again: tried once more
      await tick(50);
      FakeSocket.last.drop(4001);            // and again, in a row: refused for good
      await tick(300);
      return { retried, live: wentLive, statuses, sockets: FakeSocket.urls.length, tickets: FakeSocket.urls.map((u) => new URL(u).searchParams.get('ticket')) };
    """)
    assert result["retried"] == 2, result
    assert result["live"], result
    assert result["statuses"][-1] == "auth-4001", result
    assert result["sockets"] == 4, result
    assert len(set(result["tickets"])) == len(result["tickets"]), "a fresh ticket each time"


def test_another_close_between_two_refusals_gives_the_retry_back(page, server):
    """"In a row": a 1006 (a bad link) between two sockets refused before `connected` (two
    expired tickets) must not log the user out."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.start();
      await tick(20);
      FakeSocket.last.drop(4001);            // refused before `connected`: tried once more
      await tick(50);
      FakeSocket.last.drop(1006);            // the retry's link failed
      await tick(50);
      FakeSocket.last.drop(4001);            // refused again, but not in a row: tried once more
      await tick(50);
      return { statuses, sockets: FakeSocket.urls.length };
    """)
    assert not any(s.startswith("auth-") for s in result["statuses"]), result
    assert result["sockets"] == 4, result


def test_a_wake_up_during_a_backoff_keeps_its_count_and_the_button_starts_over(page, server):
    """The browser going online or the tab coming back reconnects at once but keeps the backoff's
    count (a flapping network brought the panel back at the first delay each time); the
    "Reconnect now" button starts over."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      const socket = await goLive();
      socket.drop(1006);
      await tick(20);
      FakeSocket.last.drop(1006);            // a second failure: attempt 2
      await tick(20);
      const before = feed.attempt;
      feed.onOnline();                       // the network came back
      await tick(20);
      const afterWakeUp = feed.attempt;
      feed.reconnectNow();                   // the button
      await tick(20);
      return { before, afterWakeUp, afterButton: feed.attempt };
    """)
    assert result["before"] >= 2, result
    assert result["afterWakeUp"] == result["before"], result
    assert result["afterButton"] == 0, result


def test_a_wake_up_keeps_a_backoff_the_server_asked_for(page, server):
    """After a close by which the server asks to wait (1013, 1011, 1012, 1008) or a ticket answered
    429/503, the browser going online or the tab coming back does not reconnect before the backoff
    ends (every open tab came back at its own wake-ups); after a drop (1006) it does at once."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      const waits = {};
      for (const code of [1013, 1011, 1012, 1008, 1006, 'ticket-429', 'ticket-503']) {
        let failTicket = 0;
        const slowApi = { wsTicket: async () => {
          if (failTicket) { const status = failTicket; failTicket = 0; throw Object.assign(new Error('x'), { status }); }
          return { ticket: 't', expires_in: 60 };
        } };
        const refetches = [];
        const slow = new live.LiveFeed({
          api: slowApi, WebSocketImpl: FakeSocket, random: () => 0.99, coalesceMs: 100,
          onSignal: async (s) => { if (s.all) refetches.push(performance.now()); }, onStatus: () => {}, onAuthFailure: () => {},
        });
        slow.start();
        await tick(20);
        FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: ['company_1'], event_id: 10 });
        await tick(50);
        if (typeof code === 'string') {
          failTicket = Number(code.slice(7));
          FakeSocket.last.drop(1006);            // a drop: reconnects at once (attempt 0 → ~1 s)...
          slow.onOnline();                       // ...asks a ticket now, which is answered 429/503
          await tick(20);
        } else {
          FakeSocket.last.drop(code);
          await tick(20);
        }
        const ticketRefused = failTicket === 0;  // the refused ticket was asked for before the wake-up below
        await tick(150);                         // the refetches so far are done
        const before = FakeSocket.urls.length, refetchesBefore = refetches.length;
        slow.onOnline();                         // the network came back
        await tick(150);
        waits[code] = {
          reconnected: FakeSocket.urls.length > before, state: slow.state, ticketRefused,
          refetched: refetches.length > refetchesBefore,
        };
        slow.stop();
      }
      return waits;
    """)
    for code in ["1013", "1011", "1012", "1008", "ticket-429", "ticket-503"]:
        # No socket before the backoff ends, but the data is refetched now.
        assert result[code] == {"reconnected": False, "state": "reconnecting", "ticketRefused": True, "refetched": True}, (code, result)
    assert result["1006"]["reconnected"] is True, result


def test_a_steady_stream_of_events_refetches_once_per_window_not_back_to_back(page, server):
    """Events that arrive while a refetch runs wait for a window of their own: on a busy company
    the tab used to refetch back to back (27 requests a second at 200 writes/s, measured), each one
    server work and the user's request budget. An immediate refresh still goes right after."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      const socket = await goLive();
      const before = signals.length;
      const began = performance.now();
      for (let i = 1; i <= 80; i++) {        // one event every 10 ms for 800 ms
        socket.frame({ type: 'order_updated', id: i, order_id: i, event_id: 10 + i });
        await tick(10);
      }
      const streamMs = performance.now() - began;
      await tick(400);
      const stream = signals.slice(before);
      const seen = new Set(stream.flatMap((s) => s.ids));
      // An immediate refresh asked for during a refetch runs as soon as it ends, not a window later.
      socket.frame({ type: 'order_updated', id: 200, order_id: 200, event_id: 200 });
      await tick(120);                       // its window (100 ms) ended: its refetch (50 ms) runs
      const asked = performance.now();
      feed.refresh();
      let refreshedAt = null;
      while (refreshedAt === null && performance.now() - asked < 1000) {
        if (signals.length > 0 && signals[signals.length - 1].all) refreshedAt = performance.now();
        await tick(5);
      }
      feed.stop();
      return { refetches: stream.length, streamMs, missing: [...Array(80).keys()].map((i) => i + 1).filter((i) => !seen.has(i)),
               refreshWaited: refreshedAt === null ? null : refreshedAt - asked };
    """)
    # A 100 ms window and a 50 ms refetch: about one refetch per 150 ms of the stream, plus the
    # last one after it (back to back it was one per 50 ms). Every order was refetched.
    assert 2 <= result["refetches"] <= result["streamMs"] / 120 + 2, result
    assert result["missing"] == [], result
    # It waits for the running refetch only (50 ms at most), not for a window (100 ms) after it.
    assert result["refreshWaited"] is not None and result["refreshWaited"] < 100, result


def test_reads_answered_wait_are_retried_once_after_a_backoff(page, server):
    """`retryReads` (a read answered 429 or a 5xx) refetches everything once after a full-jitter
    backoff, however many reads failed. The backoff grows while refetches still meet a "wait" (even
    if their other reads are answered) and starts over after one that meets none."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      await goLive();
      const before = signals.length;
      const seen = [];                                           // the backoff step each refetch starts at
      const refetch = feed.onSignal;
      feed.onSignal = (s) => { seen.push(feed.readRetries); return refetch(s); };
      feed.retryReads(); feed.retryReads(); feed.retryReads();   // three reads failed at once: one retry
      await tick(20);                                            // its refetch is running (50 ms)
      feed.retryReads();                                         // one of its reads is answered "wait" too
      await tick(200);                                           // the next retry's refetch met none
      feed.refresh();
      await tick(100);
      feed.stop();
      return { after: signals.slice(before).map((s) => s.all), seen,
               delays: [0, 1, 5, 9].map((n) => live.fullJitterDelay(n, live.READ_RETRY_POLICY, () => 0.999999)) };
    """)
    assert result["after"] == [True, True, True], result
    # 1 after the first "wait"; 2: the refetch that met another did not start it over; 0 after one that met none.
    assert result["seen"] == [1, 2, 0], result
    assert result["delays"] == [999, 1999, 29999, 29999], result


def test_the_api_reports_reads_answered_wait(page, server):
    page.goto("/")
    result = page.evaluate("""async () => {
      const { Api } = await import('/assets/api.js');
      const calls = [];
      const answer = (status) => async () => new Response(status === 200 ? '[]' : '{"error":"x","message":"m"}',
        { status, headers: { 'Content-Type': 'application/json' } });
      const run = async (method, status) => {
        const api = new Api({ getToken: () => 't', fetchImpl: answer(status),
          onUnavailable: () => calls.push(method + ' ' + status + ' wait') });
        try { await api.request(method, '/api/orders/'); } catch (e) {}
      };
      for (const [m, s] of [['GET', 503], ['GET', 429], ['GET', 502], ['GET', 404], ['POST', 503], ['GET', 200]]) await run(m, s);
      return calls;
    }""")
    assert result == ["GET 503 wait", "GET 429 wait", "GET 502 wait"], result


def test_reset_starts_over_and_gives_up_into_polling(page, server):
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.policy = { baseMs: 1, capMs: 1, maxAttempts: 2 };
      feed.start();
      await tick(20);
      FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: [], event_id: 500 });
      feed.lastEventId = 3;                  // pretend we resumed from far behind
      FakeSocket.last.frame({ type: 'reset' });
      await tick(300);
      const cursorAfterReset = feed.lastEventId;
      for (let i = 0; i < 3; i++) { FakeSocket.last.drop(1006); await tick(30); }
      const state = feed.state;
      feed.stop();
      return { cursorAfterReset, state, signals: signals.length };
    """)
    assert result["cursorAfterReset"] == 500
    assert result["state"] == "polling"


def test_pongs_keep_a_socket_however_far_apart_the_timers_fire_and_silence_drops_it(page, server):
    """App pings find a half-open socket: a ping left unanswered, with the link silent past
    `staleMs`, drops it (4000) and the feed reconnects. A hidden tab's timers may fire less often
    than `staleMs` (browsers run them as rarely as once a minute): a socket that answers each ping
    stays, however far apart the pings go out (it was dropped and reopened at every tick)."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.pingMs = 400; feed.staleMs = 300;   // ticks further apart than staleMs, as in a hidden tab
      const socket = await goLive();
      let answer = true;
      socket.send = (text) => {
        socket.sent.push(text);
        if (answer && JSON.parse(text).type === 'ping') setTimeout(() => socket.frame({ type: 'pong' }), 5);
      };
      await tick(1750);                        // four pings, each answered
      const answered = { sockets: FakeSocket.urls.length, pings: socket.sent.length, statuses: [...statuses] };
      answer = false;                          // half-open: nothing comes back any more
      await tick(1000);
      feed.stop();
      return { answered, sockets: FakeSocket.urls.length, statuses };
    """)
    answered = result["answered"]
    assert answered["sockets"] == 1, json.dumps(result)
    assert answered["pings"] >= 3, json.dumps(result)
    assert "reconnecting" not in answered["statuses"], json.dumps(result)
    assert result["sockets"] == 2, json.dumps(result)
    assert "reconnecting" in result["statuses"], json.dumps(result)


def test_a_socket_found_silent_after_a_sleep_is_checked_again_before_the_next_tick(page, server):
    """A laptop that wakes up finds its socket silent for longer than `staleMs`, but its last ping
    (before the sleep) answered: the tick sends a ping and checks it again after a short wait, so a
    socket that died in the sleep is dropped and reopened then, not a whole tick later (a minute in a
    hidden tab)."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.pingMs = 2000; feed.staleMs = 300;
      const socket = await goLive();
      socket.send = (text) => { socket.sent.push(text); };   // died during the sleep: no answers
      feed.lastMessageAt = performance.now() - 5000;           // nothing heard for 5 s
      await tick(2600);                                        // the first tick (~2 s), then its check
      const early = FakeSocket.urls.length;
      feed.stop();
      return { early, pings: socket.sent.length, statuses };
    """)
    assert result["pings"] >= 1, json.dumps(result)
    assert result["early"] == 2, json.dumps(result)
    assert "reconnecting" in result["statuses"], json.dumps(result)


def test_a_clock_set_back_does_not_hide_a_dead_socket(page, server):
    """The computer's clock is set back an hour while the socket is live, and the socket then dies
    without a close: it is still found silent and reopened. Silence was measured with `Date.now()`,
    which then ran an hour behind the last message, and the dead socket looked live for that hour."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.pingMs = 200; feed.staleMs = 300;
      const socket = await goLive();
      socket.send = (text) => { socket.sent.push(text); };   // dead: no answers from here on
      const wallNow = Date.now;
      Date.now = () => wallNow() - 3_600_000;                  // the clock is set back an hour
      try {
        await tick(1500);
      } finally {
        Date.now = wallNow;
      }
      const sockets = FakeSocket.urls.length;
      feed.stop();
      return { sockets, pings: socket.sent.length, statuses };
    """)
    assert result["pings"] >= 1, json.dumps(result)
    assert result["sockets"] == 2, json.dumps(result)
    assert "reconnecting" in result["statuses"], json.dumps(result)


def test_sockets_closed_right_after_connected_keep_backing_off(page, server):
    """A server at capacity says `connected`, then closes with 1013: the retry count must keep
    growing (not start over at every `connected`); a socket that stays up for `stableMs` resets it."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.stableMs = 150;
      feed.start();
      await tick(20);
      const attempts = [];
      for (let i = 0; i < 3; i++) {
        FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: [], event_id: 10 });
        FakeSocket.last.drop(1013);
        attempts.push(feed.attempt);
        await tick(40);                      // random()=0: the retry goes out at once
      }
      FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: [], event_id: 10 });
      await tick(300);                       // stayed up past stableMs
      FakeSocket.last.drop(1013);
      attempts.push(feed.attempt);
      feed.stop();
      return { attempts };
    """)
    assert result["attempts"] == [1, 2, 3, 1]


def test_failing_reconnects_do_not_postpone_the_fallback_poll(page, server):
    """While the socket keeps failing to open (a proxy that blocks WebSockets), the fallback poll
    still runs on time: each failed attempt started its 15 s over, and a tab went a minute or more
    without a refetch (found by a review, 2026-12-07)."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.fallbackPollMs = 300;
      feed.start();
      await tick(20);
      for (let i = 0; i < 12; i++) {         // a failed attempt every 100 ms for 1.2 s
        FakeSocket.last.drop(1006);
        await tick(100);
      }
      const full = signals.filter((s) => s.all).length;
      feed.stop();
      return { full, attempts: FakeSocket.urls.length };
    """)
    assert result["attempts"] >= 10, result
    assert result["full"] >= 3, result


def test_a_reset_drops_the_cached_etags_and_small_refetches_do_not_postpone_the_safety_poll(page, server):
    """After `reset` the same version can name other content: the API's ETag cache is dropped.
    A refetch of a few rows does not restart the 120 s countdown: steady events must not keep the
    full safety poll from ever running."""
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      let cleared = 0;
      api.clearCache = () => { cleared += 1; };
      feed.pollMs = 400;
      feed.start();
      await tick(20);
      FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: [], event_id: 10 });
      FakeSocket.last.frame({ type: 'reset' });
      await tick(300);                       // the reset's full refetch
      const fullBefore = signals.filter((s) => s.all).length;
      for (let i = 1; i <= 9; i++) {         // a row changes every 100 ms for 900 ms
        FakeSocket.last.frame({ type: 'order_updated', id: 7, order_id: 7, event_id: 10 + i });
        await tick(100);
      }
      const fullAfter = signals.filter((s) => s.all).length;
      feed.stop();
      return { cleared, fullBefore, fullAfter, resets };
    """)
    assert result["cleared"] == 1
    # The views are told: they take the refetch even at a lower or equal version (test_panel_reset.py).
    assert len(result["resets"]) == 1, result
    assert result["fullAfter"] > result["fullBefore"], result


def test_a_request_that_hangs_is_given_up_as_a_network_error(page, server):
    page.goto("/")
    result = page.evaluate("""async () => {
      const { Api } = await import('/assets/api.js');
      const hanging = (path, init) => new Promise((resolve, reject) => {
        init.signal?.addEventListener('abort', () => reject(new DOMException('timed out', 'TimeoutError')));
      });
      const api = new Api({ getToken: () => 't', fetchImpl: hanging, timeoutMs: 200 });
      const started = Date.now();
      try { await api.orders(); return { status: 'resolved' }; }
      catch (e) { return { status: e.status, code: e.code, ms: Date.now() - started }; }
    }""")
    assert result["status"] == 0 and result["code"] == "network_error", result
    assert result["ms"] < 2000, result


def test_resume_by_cursor_and_after_a_reset_continue_from_the_connected_frame(page, server):
    page.goto("/")
    result = run_module(page, FAKE_SOCKET + """
      feed.start();
      await tick(20);
      FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: [], event_id: 10, cursor: '10-aaaa' });
      FakeSocket.last.frame({ type: 'order_updated', id: 1, order_id: 1, event_id: 11, cursor: '11-bbbb' });
      FakeSocket.last.frame({ type: 'order_updated', id: 2, order_id: 2, event_id: 12, cursor: '12-cccc' });
      FakeSocket.last.drop(1012);
      await tick(50);
      const resumed = FakeSocket.urls[1];
      // A restored database: the server knows only up to 5, with another history.
      FakeSocket.last.frame({ type: 'connected', user_id: 1, groups: [], event_id: 5, cursor: '5-dddd' });
      FakeSocket.last.frame({ type: 'reset' });
      const afterReset = [feed.lastEventId, feed.lastCursor];
      await tick(300);
      const before = signals.length;
      FakeSocket.last.frame({ type: 'order_updated', id: 7, order_id: 7, event_id: 6, cursor: '6-eeee' });
      await tick(300);
      const lowerIdApplied = signals.slice(before).some((s) => s.ids.includes(7));
      // An event from a server without cursors: the next resume falls back to `since` alone.
      FakeSocket.last.frame({ type: 'order_updated', id: 8, order_id: 8, event_id: 7 });
      FakeSocket.last.drop(1001);
      await tick(50);
      const fallback = FakeSocket.urls[2];
      feed.stop();
      return { resumed, afterReset, lowerIdApplied, fallback, cursor: feed.lastCursor };
    """)
    assert "cursor=12-cccc" in result["resumed"] and "since=12" in result["resumed"]
    assert result["afterReset"] == [5, "5-dddd"]
    assert result["lowerIdApplied"] is True
    assert "cursor=" not in result["fallback"] and "since=7" in result["fallback"]
