// The REST client: one fetch wrapper that adds the bearer token, keeps an ETag cache for GETs
// and turns every failure into an ApiError whose message can be shown to a person as is.
// The token only ever travels in the Authorization header, never in a URL.

/** An API failure. `message` is plain words for the user; `code` is the server's error code. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status; // 0 = the server could not be reached
    this.code = code;
  }
}

// Used when the server sent no readable `message` (a proxy error page, an empty body…).
const FALLBACK_MESSAGES = {
  0: 'The server cannot be reached. Check the connection; the panel keeps trying.',
  400: 'The server could not read that request.',
  401: 'Your session has ended. Please log in again.',
  403: 'You are not allowed to do this.',
  404: 'This order no longer exists.',
  409: 'That change conflicts with the order’s current state. The view has been refreshed.',
  412: 'This order was changed meanwhile. The current version is shown now: check it and try again.',
  413: 'That is too much text for one order.',
  422: 'Some fields are not valid.',
  429: 'Too many requests. Wait a moment and try again.',
};

// No answer to a write or a login: nothing retries it for the user (only loads are retried, by the
// live link and the poll), and a write may or may not have been applied (found by a review: the
// panel said it "keeps trying" after a failed save).
const UNREACHABLE_WRITE = 'The server cannot be reached, so this change is not confirmed. Check the order, then try again.';
const UNREACHABLE_LOGIN = 'The server cannot be reached. Check the connection and try again.';

function unreachableMessage(method, path) {
  if (method === 'GET') return fallbackMessage(0);
  return path === '/api/auth/login' ? UNREACHABLE_LOGIN : UNREACHABLE_WRITE;
}

function fallbackMessage(status) {
  if (FALLBACK_MESSAGES[status]) return FALLBACK_MESSAGES[status];
  if (status >= 500) return 'The server had a problem. Try again in a moment.';
  return `The request failed (HTTP ${status}).`;
}

/**
 * Talks to the Waybill API of the page's own origin.
 * `getToken()` supplies the bearer token; `onUnauthorized()` runs on any 401 except the login
 * call itself (a wrong password is an error to show, not a session that ended).
 * `onUnavailable()` runs when a read is answered "wait" (429 past the user's request rate, a 5xx)
 * or gets no answer at all:
 * the live feed retries the reads after a backoff.
 */
/** How many answers the ETag cache keeps (each a page of at most 50 rows, or one order). */
export const MAX_CACHED = 200;

export class Api {
  constructor({
    getToken, onUnauthorized, onUnavailable = null, fetchImpl = (...args) => fetch(...args),
    timeoutMs = 20_000,
  }) {
    this.getToken = getToken;
    this.onUnauthorized = onUnauthorized;
    this.onUnavailable = onUnavailable;
    this.fetchImpl = fetchImpl;
    // A request on a half-open connection (a killed node, a Wi-Fi change) could otherwise hang
    // for the TCP timeout, minutes, and every refetch waits behind the one in flight.
    this.timeoutMs = timeoutMs;
    this.etags = new Map(); // path → { etag, data }
  }

  /** Forgets cached bodies (on logout: the next user must not see them). */
  clearCache() {
    this.etags.clear();
  }

  /**
   * `ifMatch`: the ETag of the order version the user is looking at. The server refuses the write
   * with 412 if the order has changed since (SPEC §2, lost-update protection), so an edit made on
   * stale data never silently overwrites someone else's.
   * Resolves `{ data, changed, etag }`.
   */
  async request(method, path, {
    body, auth = true, expect401 = false, ifMatch = null, cache = true, idempotencyKey = null,
  } = {}) {
    const headers = { Accept: 'application/json' };
    if (ifMatch) headers['If-Match'] = ifMatch;
    // The same key on a retry of the same write: the server applies it once (SPEC §2).
    if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const token = auth ? this.getToken() : null;
    // No session (it ended while a view's chain of loads was on its way): nothing is sent. Sent
    // without a token, its 401 counted as the session's own and put up a fresh login page over
    // what the next person was typing (found by a review, 2026-12-07).
    if (auth && !token) throw new ApiError(401, 'no_session', 'Log in first.');
    if (token) headers.Authorization = `Bearer ${token}`;
    const cached = method === 'GET' && cache ? this.etags.get(path) : undefined;
    if (cached) headers['If-None-Match'] = cached.etag;

    let response;
    try {
      response = await this.fetchImpl(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        // We revalidate ourselves with If-None-Match; the browser cache must not answer for us.
        cache: 'no-store',
        credentials: 'omit',
        signal: timeoutSignal(this.timeoutMs),
      });
    } catch {
      const error = new ApiError(0, 'network_error', unreachableMessage(method, path));
      // A read with no answer (a dropped connection, a half-open proxy, the 20 s timeout) while
      // the socket may well be live: retried like one answered "wait", or the change it was for
      // stayed out until the next event or the poll (found by a review).
      if (method === 'GET') this.onUnavailable?.(error);
      throw error;
    }

    if (response.status === 304 && cached) {
      return { data: cached.data, changed: false, etag: cached.etag, next: cached.next };
    }
    let data;
    try {
      data = await readJSON(response);
    } catch {
      // The body stopped coming (a timeout or a drop mid-answer): nothing is cached from it.
      const error = new ApiError(0, 'network_error', unreachableMessage(method, path));
      if (method === 'GET') this.onUnavailable?.(error);
      throw error;
    }
    // Whether the answer is for the token in use now: one sent with a token that has since gone
    // (the session ended and the user logged in again while it was on its way) must neither end the
    // new session nor fill its cache (found by a review, 2026-12-07).
    const sameSession = token === (auth ? this.getToken() : null);
    if (!response.ok) {
      // A 412's server text names ETags; a person needs to hear what happened in plain words.
      const serverText = response.status === 412 ? '' : (typeof data?.message === 'string' && data.message.trim());
      const error = new ApiError(response.status, data?.error ?? 'http_error',
        serverText || fallbackMessage(response.status));
      if (response.status === 401 && auth && !expect401 && sameSession) this.onUnauthorized?.(error);
      if (method === 'GET' && (response.status === 429 || response.status >= 500)) this.onUnavailable?.(error);
      throw error;
    }
    const etag = response.headers.get('ETag');
    const next = nextCursor(response.headers.get('Link'));
    if (method === 'GET' && cache && etag && sameSession) {
      // Newest last; at most MAX_CACHED bodies (every typed search and page visited was kept until
      // logout; found by a review, 2026-12-04). A path asked for again moves to the end.
      this.etags.delete(path);
      this.etags.set(path, { etag, data, next });
      while (this.etags.size > MAX_CACHED) this.etags.delete(this.etags.keys().next().value);
    }
    return { data, changed: true, etag, next };
  }

  async get(path) { return this.request('GET', path); }
  async send(method, path, body, ifMatch = null, idempotencyKey = null) {
    return (await this.request(method, path, { body, ifMatch, idempotencyKey })).data;
  }

  // --- the calls the panel makes (SPEC §2)
  /** `role: 'dispatcher'`: the server refuses another role's login (403 `wrong_role`) before it makes a token. */
  login(email, password) {
    const body = { email, password, role: 'dispatcher' };
    return this.request('POST', '/api/auth/login', { body, auth: false }).then((r) => r.data);
  }
  /** Revokes the token on the server (it revokes every token of the user: logout everywhere). */
  logout() { return this.request('POST', '/api/auth/logout', { body: {}, expect401: true }); }
  me() { return this.get('/api/me'); }
  drivers() { return this.get('/api/drivers/'); }
  /**
   * One page of the list (`GET /api/orders/?…`). `params`: `{ active, status, driver_id, q,
   * before, limit, ids }`; empty values are left out. Resolves `{ data, changed, next }` where
   * `next` is the older page's `before` cursor from the `Link: rel="next"` header (null on the last page).
   */
  orders(params = {}) { return this.get(listPath(params)); }
  /** Just these orders (at most 100): the rows an event named. Missing = deleted or not visible. */
  // Not cached: each burst names other ids, and the answer is small.
  ordersByIds(ids) {
    return this.request('GET', listPath({ ids: [...ids].sort((a, b) => a - b).join(',') }), { cache: false });
  }
  /** Orders per status: `{ new: 3, assigned: 10, … }`. */
  orderCounts() { return this.get('/api/orders/counts'); }
  order(id) { return this.get(`/api/orders/${encodeURIComponent(id)}/`); }
  forgetOrder(id) { this.etags.delete(`/api/orders/${encodeURIComponent(id)}/`); }
  /** `key`: the same Idempotency-Key for every retry of one create (see order-form.js). */
  createOrder(order, key = null) { return this.send('POST', '/api/orders/', order, null, key); }
  // Writes to an existing order take the ETag of the version shown (`etag`; null = no precondition).
  updateOrder(id, fields, etag) { return this.send('PATCH', `/api/orders/${encodeURIComponent(id)}/`, fields, etag); }
  changeStatus(id, status, etag) {
    return this.send('POST', `/api/orders/${encodeURIComponent(id)}/status`, { status }, etag);
  }
  assign(id, driverId, etag) {
    return this.send('POST', `/api/orders/${encodeURIComponent(id)}/assign`, { driver_id: driverId }, etag);
  }
  unassign(id, etag) { return this.send('POST', `/api/orders/${encodeURIComponent(id)}/unassign`, {}, etag); }
  deleteOrder(id, etag) { return this.send('DELETE', `/api/orders/${encodeURIComponent(id)}/`, undefined, etag); }
  wsTicket() { return this.send('POST', '/api/ws-ticket', {}); }
}

/** A fresh Idempotency-Key: 128 random bits as 32 hex digits (works outside secure contexts too). */
export function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** `/api/orders/?…` with the non-empty `params`, in a fixed order (one cache key per page). */
export function listPath(params) {
  const search = new URLSearchParams();
  for (const key of ['ids', 'active', 'status', 'driver_id', 'q', 'before', 'limit']) {
    const value = params[key];
    if (value !== undefined && value !== null && value !== '' && value !== false) search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `/api/orders/?${text}` : '/api/orders/';
}

/** The `before` cursor of a `Link: <…>; rel="next"` header (RFC 8288), or null. */
export function nextCursor(header) {
  const match = /<([^>]*)>\s*;\s*rel="?next"?/.exec(header ?? '');
  if (!match) return null;
  try {
    const before = new URL(match[1], 'http://origin.invalid').searchParams.get('before');
    return before && /^\d+$/.test(before) ? Number(before) : null;
  } catch {
    return null;
  }
}

/** An AbortSignal that fires after `ms` (null: none); built by hand where AbortSignal.timeout is missing. */
function timeoutSignal(ms) {
  if (!ms) return undefined;
  if (typeof AbortSignal.timeout === 'function') return AbortSignal.timeout(ms);
  const controller = new AbortController();
  setTimeout(() => controller.abort(), ms);
  return controller.signal;
}

/** The body as JSON (null when empty or not JSON). Throws when the body cannot be read to its end. */
async function readJSON(response) {
  if (response.status === 204) return null;
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
