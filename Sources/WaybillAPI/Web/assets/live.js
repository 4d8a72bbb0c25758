// The live link: a WebSocket that only *signals* change (SPEC: an event is a signal, state
// comes from the REST API). It authenticates with a single-use ticket, reconnects with full
// jitter, resumes with the last `cursor` seen (SPEC §5 rule 5), coalesces bursts into one
// refetch, and keeps polling as a safety net. The views never read event payloads beyond the order id.

export const DEFAULT_POLICY = Object.freeze({
  baseMs: 1000, // first retry waits up to 1 s…
  capMs: 30000, // …doubling up to 30 s
  maxAttempts: 20, // ≈ 7 minutes of trying; then "polling only" (each poll still tries once)
});

/**
 * "Full jitter" backoff: a uniform random delay in [0, min(cap, base·2^attempt)).
 * Spreading retries over the whole window stops every panel of a company from reconnecting in
 * the same instant after a server restart.
 */
export function fullJitterDelay(attempt, policy = DEFAULT_POLICY, random = Math.random) {
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * ceiling);
}

/** When reads answered "wait" (429, a 5xx) are tried again: full jitter, 1 s doubling to 30 s. */
export const READ_RETRY_POLICY = Object.freeze({ baseMs: 1000, capMs: 30000 });

/** Close codes after which retrying cannot help (SPEC §4): the user must log in again. */
export const AUTH_CLOSE_CODES = new Set([4001, 4003]);
// Close codes by which the server asks to come back later, not sooner (1013 overloaded, 1011 its
// own failure, 1012 restarting or a history rewind, 1008 this client sent too much): a wake-up
// (online, the tab back) does not cut that backoff short. A ticket answered 429 or 503 counts too.
export const WAIT_CLOSE_CODES = new Set([1008, 1011, 1012, 1013]);

/** A frame's `cursor`, if it is a plausible one (`<event_id>-<check>`); anything else is ignored. */
function cursorOf(frame) {
  return typeof frame.cursor === 'string' && /^\d+-[0-9A-Za-z]{1,64}$/.test(frame.cursor) ? frame.cursor : null;
}

function emptySignal() {
  return { all: false, reset: false, orderIds: new Set(), deletedIds: new Set(), createdIds: new Set(), countsChanged: false };
}

function mergeSignal(into, part) {
  const signal = into ?? emptySignal();
  if (part.all) signal.all = true;
  if (part.reset) signal.reset = true;
  for (const id of part.orderIds ?? []) signal.orderIds.add(id);
  for (const id of part.deletedIds ?? []) signal.deletedIds.add(id);
  for (const id of part.createdIds ?? []) signal.createdIds.add(id);
  if (part.countsChanged) signal.countsChanged = true;
  return signal;
}

/**
 * One live feed per page that needs one (`stream` = null for the company stream, 'fleet' for
 * the fleet board).
 *
 * `onSignal({all, reset, orderIds, deletedIds, createdIds, countsChanged})` is awaited; while it runs new signals accumulate and
 * are delivered together afterwards, so a burst of 50 events costs one list fetch.
 * `onStatus({state, retryAt})`: state is connecting | live | reconnecting | polling | stopped;
 * `retryAt` is a `performance.now()` time.
 * `onAuthFailure(code)`: the socket was refused for good (4001/4003 or a 401/403 ticket).
 */
export class LiveFeed {
  constructor({
    api, stream = null, onSignal, onStatus = () => {}, onAuthFailure = () => {},
    policy = DEFAULT_POLICY, coalesceMs = 250, pollMs = 120_000, fallbackPollMs = 15_000,
    pingMs = 25_000, staleMs = 60_000, stableMs = 10_000, random = Math.random,
    WebSocketImpl = globalThis.WebSocket, location = globalThis.location,
  }) {
    Object.assign(this, {
      api, stream, onSignal, onStatus, onAuthFailure, policy, coalesceMs, pollMs, fallbackPollMs,
      pingMs, staleMs, stableMs, random, WebSocketImpl, location,
    });
    this.state = 'stopped';
    this.retryAt = null;
    this.attempt = 0;
    this.lastEventId = null; // the resume point: newest event id applied…
    this.lastCursor = null; // …and its cursor ("<id>-<check>"), null if its frame had none
    this.connectedEventId = null;
    this.connectedCursor = null;
    this.everConnected = false;
    this.socket = null;
    this.generation = 0; // bumps on every connect/stop so late async results are ignored
    this.pending = null;
    this.pendingImmediate = false; // an immediate signal (a refresh, the poll) came during a refetch
    this.readRetries = 0; // refetches in a row with a read answered "wait" (`retryReads`)
    this.unavailableInFlush = false; // a read of the running refetch was answered "wait"
    this.flushing = false;
    this.serverAskedToWait = false; // the backoff under way follows a `WAIT_CLOSE_CODES` close
    this.timers = {};
    this.onOnline = () => { if (this.state !== 'live') this.reconnectNow({ wakeUp: true }); };
    this.onVisible = () => {
      if (document.visibilityState === 'visible' && (this.state === 'reconnecting' || this.state === 'polling')) {
        this.reconnectNow({ wakeUp: true });
      }
    };
  }

  start() {
    this.stopped = false;
    globalThis.addEventListener?.('online', this.onOnline);
    globalThis.document?.addEventListener('visibilitychange', this.onVisible);
    this.setStatus('connecting');
    this.connect();
    this.schedulePoll();
  }

  stop() {
    this.stopped = true;
    this.generation += 1;
    globalThis.removeEventListener?.('online', this.onOnline);
    globalThis.document?.removeEventListener('visibilitychange', this.onVisible);
    for (const name of Object.keys(this.timers)) this.clearTimer(name);
    this.dropSocket(1000);
    this.pending = null;
    this.setStatus('stopped');
  }

  /**
   * A read was answered "wait" (429 past the user's request rate, a 5xx in a store outage): refetch
   * everything after a backoff, once however many reads failed. Without it the change the read was
   * for stayed out until the next event or the 120 s poll while the socket was live.
   */
  retryReads() {
    this.unavailableInFlush = true;
    if (this.stopped || this.timers.readRetry) return;
    const delay = fullJitterDelay(this.readRetries, READ_RETRY_POLICY, this.random);
    this.readRetries += 1;
    this.timers.readRetry = setTimeout(() => {
      this.timers.readRetry = null;
      this.refresh();
    }, delay);
  }

  /** Refetch now (after the user changed something), without waiting for the event. */
  refresh() {
    this.queue({ all: true }, { immediate: true });
  }

  /**
   * Try the socket again at once (the "Reconnect now" button, the browser going online, the tab
   * coming back) and refetch meanwhile: whoever asked wants current data, link or not.
   */
  reconnectNow({ wakeUp = false } = {}) {
    if (this.stopped) return;
    // A wake-up during a backoff keeps its count: a network that comes and goes, or a tab switched
    // often, brought the panel back at the first delay each time against a server closing sockets
    // with 1013 (found by a review, 2026-12-05). The button, and a wake-up after polling only,
    // start over; a socket that stays up (`stableMs`) does too.
    // A backoff the server asked for (`WAIT_CLOSE_CODES`) is kept: the wake-up says the browser's
    // network is back, not the server, and every open tab came back at its own wake-ups (a review
    // of the driver client, 2026-12-05). The data is still refetched.
    if (wakeUp && this.state === 'reconnecting' && this.serverAskedToWait) {
      this.refresh();
      return;
    }
    if (!(wakeUp && this.state === 'reconnecting')) this.attempt = 0;
    this.clearTimer('retry');
    this.setStatus(this.everConnected ? 'reconnecting' : 'connecting');
    this.connect();
    this.refresh();
  }

  // --- connection

  async connect() {
    if (this.stopped) return;
    const generation = ++this.generation;
    this.clearTimer('retry');
    this.dropSocket(1000);
    let ticket;
    try {
      ticket = (await this.api.wsTicket()).ticket;
    } catch (error) {
      if (generation !== this.generation || this.stopped) return;
      if (error.status === 401) return this.authFailed(4001);
      if (error.status === 403) return this.authFailed(4003);
      // A server without tickets or WebSockets: polling is all we can do.
      if (error.status === 404 || error.status === 405 || error.status === 501) return this.pollOnly();
      return this.retryLater({ serverAskedToWait: error.status === 429 || error.status === 503 });
    }
    if (generation !== this.generation || this.stopped) return;
    let socket;
    try {
      socket = new this.WebSocketImpl(this.socketURL(ticket));
    } catch {
      return this.retryLater();
    }
    this.socket = socket;
    this.socketConnected = false;
    this.lastMessageAt = performance.now();
    socket.onmessage = (event) => { if (socket === this.socket) this.received(event.data); };
    socket.onclose = (event) => this.closed(socket, event.code);
    socket.onerror = () => {}; // a close event always follows; it decides what to do
  }

  /**
   * `ws(s)://host/ws/orders/?ticket=…&cursor=…&since=…&stream=…` — a ticket, never the API token.
   * The cursor lets the server notice a rewound history (restored backup, failover) and answer
   * `reset`; `since` goes along for servers that predate cursors.
   */
  socketURL(ticket) {
    const url = new URL('/ws/orders/', this.location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('ticket', ticket);
    if (this.lastCursor !== null) url.searchParams.set('cursor', this.lastCursor);
    if (this.lastEventId !== null) url.searchParams.set('since', String(this.lastEventId));
    if (this.stream) url.searchParams.set('stream', this.stream);
    return url.toString();
  }

  received(text) {
    this.lastMessageAt = performance.now();
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return; // malformed frames carry no signal
    }
    if (!frame || typeof frame !== 'object') return;
    if (frame.type === 'connected') {
      // The retry count starts over only once the socket has stayed up for `stableMs`: a server at
      // capacity says `connected` and then closes (1013), and starting over at every `connected`
      // would bring every open panel back at the first delay, again and again.
      const socket = this.socket;
      this.clearTimer('stable');
      this.timers.stable = setTimeout(() => { if (this.socket === socket) this.attempt = 0; }, this.stableMs);
      this.everConnected = true;
      this.socketConnected = true;
      this.refusalRetried = false;
      this.connectedEventId = Number.isInteger(frame.event_id) ? frame.event_id : null;
      this.connectedCursor = cursorOf(frame);
      if (this.lastEventId === null) {
        this.lastEventId = this.connectedEventId;
        this.lastCursor = this.connectedCursor;
      }
      this.setStatus('live');
      this.startPing();
      // After every (re)connect refetch at once: whatever happened while we were away is in
      // the API. Replayed events arriving right behind this frame join the same fetch.
      this.queue({ all: true });
    } else if (frame.type === 'reset') {
      // The server cannot replay from our cursor: start over from what it knows now (SPEC §5
      // rule 6). Keeping the old id would drop every live event below it — after a restored
      // database, all of them until the ids catch up.
      this.lastEventId = this.connectedEventId;
      this.lastCursor = this.connectedCursor;
      // After a restore or failover the same version (and ETag) can name other content: refetch
      // without If-None-Match, or a 304 would keep what no longer exists (docs/PROTOCOL.md).
      this.api?.clearCache?.();
      // `reset`: what is shown may be of the other history: views take the refetch as it comes,
      // even a lower version, and redraw rows whose version did not change.
      this.queue({ all: true, reset: true });
    } else if (typeof frame.type === 'string' && frame.type.startsWith('order_')) {
      if (Number.isInteger(frame.event_id) && frame.event_id > (this.lastEventId ?? 0)) {
        this.lastEventId = frame.event_id;
        this.lastCursor = cursorOf(frame); // null: the next resume falls back to `since`
      }
      const id = frame.order_id ?? frame.id;
      this.queue({
        orderIds: [id],
        deletedIds: frame.type === 'order_deleted' ? [id] : [],
        createdIds: frame.type === 'order_created' ? [id] : [],
        // Every event but an edit (title, notes, stages, documents) or a receipt (order_seen: the
        // driver's device showed a version) moves an order between statuses.
        countsChanged: frame.type !== 'order_updated' && frame.type !== 'order_seen',
      });
    }
    // 'pong' and unknown types: nothing to do beyond noting the link is alive.
  }

  closed(socket, code) {
    if (socket !== this.socket) return;
    this.socket = null;
    this.clearTimer('ping');
    this.clearTimer('pingCheck');
    this.clearTimer('stable');
    if (this.stopped) return;
    const refusedBeforeConnected = code === 4001 && !this.socketConnected;
    if (!refusedBeforeConnected) this.refusalRetried = false; // "in a row": any other close gives it back
    if (refusedBeforeConnected && !this.refusalRetried) {
      // Refused before `connected`: a ticket that expired or was used on its way in (a slow link,
      // a laptop that slept between the ticket and the upgrade) is refused like a bad token. One
      // more try, with a fresh ticket, tells them apart: its request answers 401 if the token is
      // gone. It logged a user with a valid token out (found by a review, 2026-12-05).
      this.refusalRetried = true;
      return this.retryLater();
    }
    if (AUTH_CLOSE_CODES.has(code)) return this.authFailed(code);
    this.retryLater({ serverAskedToWait: WAIT_CLOSE_CODES.has(code) }); // 1001, 1006, 1012, 4008…: resume with `since`
  }

  retryLater({ serverAskedToWait = false } = {}) {
    if (this.stopped) return;
    this.serverAskedToWait = serverAskedToWait;
    if (this.state === 'polling') return; // in polling mode each poll tick tries once
    if (this.attempt >= this.policy.maxAttempts) return this.pollOnly();
    const delay = fullJitterDelay(this.attempt, this.policy, this.random);
    this.attempt += 1;
    this.setStatus('reconnecting', performance.now() + delay);
    this.timers.retry = setTimeout(() => this.connect(), delay);
    this.schedulePoll();
  }

  pollOnly() {
    this.setStatus('polling');
    this.schedulePoll();
  }

  authFailed(code) {
    this.stop();
    this.onAuthFailure(code);
  }

  dropSocket(code) {
    const socket = this.socket;
    if (!socket) return;
    this.socket = null;
    this.clearTimer('ping'); // a new socket starts its own at `connected`
    this.clearTimer('pingCheck');
    socket.onclose = null;
    socket.onmessage = null;
    try {
      socket.close(code);
    } catch {
      // already closing
    }
  }

  /**
   * App-level pings: a half-open connection (laptop lid, lost Wi-Fi) may never fire `close`,
   * so a ping left unanswered, with the link silent for longer than `staleMs`, counts as a drop.
   *
   * Judged against the last ping, not the clock alone: a browser runs a hidden tab's timers as
   * rarely as once a minute, and then the time since the last pong (which came right after the
   * previous tick's ping) is itself about a minute, so a live socket was dropped and reopened every
   * minute while the tab stayed hidden (found by a review, 2026-12-05). A tick that finds the link
   * already silent past `staleMs` (a laptop that woke up, a throttled tick) checks its own ping
   * again after a short wait rather than at the next tick, which may be a minute away.
   */
  startPing() {
    // Times here are `performance.now()`: a clock set back (by hand, or by the OS correcting it)
    // made `Date.now()` run behind the last message, and a dead socket never looked silent (found
    // by a review, 2026-12-05). `retryAt` for the indicator is on the same clock.
    this.clearTimer('ping');
    this.clearTimer('pingCheck');
    this.pingSentAt = null;
    const socket = this.socket;
    const stale = () => {
      this.dropSocket(4000);
      this.retryLater();
    };
    this.timers.ping = setInterval(() => {
      if (!this.socket || this.socket !== socket) return;
      const now = performance.now();
      const unanswered = this.pingSentAt !== null && this.lastMessageAt < this.pingSentAt;
      const silent = now - this.lastMessageAt > this.staleMs;
      if (unanswered && silent) return stale();
      try {
        this.socket.send(JSON.stringify({ type: 'ping' }));
        if (!unanswered) this.pingSentAt = now; // the first unanswered ping dates the silence
      } catch {
        return; // the close event handles it
      }
      if (silent && !this.timers.pingCheck) {
        const sentAt = this.pingSentAt;
        this.timers.pingCheck = setTimeout(() => {
          delete this.timers.pingCheck;
          if (this.socket === socket && this.lastMessageAt < sentAt) stale();
        }, Math.min(this.staleMs, 10_000));
      }
    }, this.pingMs);
  }

  // --- signals

  queue(part, { immediate = false } = {}) {
    if (this.stopped) return;
    this.pending = mergeSignal(this.pending, part);
    if (this.flushing) {
      // Delivered after the running refetch: at once if it was asked for at once, else after a window.
      if (immediate) this.pendingImmediate = true;
      return;
    }
    if (immediate) {
      this.clearTimer('coalesce');
      this.flush();
    } else if (!this.timers.coalesce) {
      this.timers.coalesce = setTimeout(() => this.flush(), this.coalesceMs);
    }
  }

  async flush() {
    this.clearTimer('coalesce');
    if (this.flushing || !this.pending || this.stopped) return;
    const signal = this.pending;
    this.pending = null;
    this.pendingImmediate = false;
    this.flushing = true;
    this.unavailableInFlush = false;
    try {
      await this.onSignal(signal);
    } catch (error) {
      console.warn('refetch failed', error);
    } finally {
      this.flushing = false;
    }
    // The backoff starts over only after a refetch none of whose reads was answered "wait": one
    // read that keeps failing (or a rate that lets some through) must not keep it at its first step
    // while the others are answered (found by a review: a full refetch twice a second, for good).
    if (!this.unavailableInFlush) this.readRetries = 0;
    if (this.stopped) return;
    // A full refetch restarts the polling countdown (SPEC §5.3); one of a few rows does not, or
    // steady events would postpone the safety net for good (and a failed one would never be made up).
    if (signal.all) this.schedulePoll();
    if (!this.pending) return;
    if (this.pendingImmediate) {
      this.flush();
      return;
    }
    // Events that came in during the refetch wait for a window of their own, as the first ones did.
    // Flushing them at once made a busy company's tab refetch back to back: 27 requests a second per
    // tab at 200 writes/s (measured), each one the server's work and the user's request budget.
    if (!this.timers.coalesce) this.timers.coalesce = setTimeout(() => this.flush(), this.coalesceMs);
  }

  /**
   * The safety net: refetch every 120 s while live, every 15 s (and retry the socket) otherwise.
   * Not live, a poll already due sooner is kept: every failed reconnect attempt lands here, and
   * starting the 15 s over at each one left a tab whose socket kept failing (a proxy that blocks
   * WebSockets) without a refetch for a minute or more (found by a review, 2026-12-07).
   */
  schedulePoll() {
    if (this.stopped) return;
    const interval = this.state === 'live' ? this.pollMs : this.fallbackPollMs;
    const dueAt = performance.now() + interval;
    if (this.state !== 'live' && this.timers.poll && this.pollDueAt <= dueAt) return;
    this.clearTimer('poll');
    this.pollDueAt = dueAt;
    this.timers.poll = setTimeout(() => {
      this.timers.poll = null;
      if (this.state === 'polling') this.connect();
      this.queue({ all: true }, { immediate: true });
      this.schedulePoll();
    }, interval);
  }

  // --- helpers

  setStatus(state, retryAt = null) {
    const changed = state !== this.state || retryAt !== this.retryAt;
    this.state = state;
    this.retryAt = retryAt;
    if (changed) this.onStatus({ state, retryAt });
  }

  clearTimer(name) {
    if (this.timers[name]) {
      clearTimeout(this.timers[name]);
      clearInterval(this.timers[name]);
      this.timers[name] = null;
    }
  }
}
