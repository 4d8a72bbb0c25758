// The signed-in user. Kept in sessionStorage: it survives a reload, and is never written into a
// URL, a cookie or localStorage. Browsers restore a reopened tab's sessionStorage (and a whole
// session after a restart), so the stored session carries when its tab was last open (`seenAt`,
// stamped every minute and as the page goes away): a tab reopened more than AWAY_LIMIT_MS after
// it was left starts at the login page (docs/DESIGN.md, "The panel's session"). The token itself
// is not revoked (a logout ends every session of the user, SPEC §2); it is forgotten.

const KEY = 'waybill.session';
/** How long a closed tab's session may be restored. */
export const AWAY_LIMIT_MS = 10 * 60 * 1000;
/** How often an open tab stamps its session (a hidden tab's timers run once a minute anyway). */
const STAMP_INTERVAL_MS = 60 * 1000;

/** `{token, user}` or null; null (and forgotten) when its tab was left more than AWAY_LIMIT_MS ago.
 *  A session without a stamp (saved by a panel from before the stamps: its tab may have been
 *  closed for weeks) counts as left long ago, and so does a stamp further ahead than the limit (a
 *  clock corrected back would otherwise stretch the window). A tab the browser discarded to save
 *  memory (Chromium says so: `document.wasDiscarded`) was open all along and is not judged. */
export function loadSession(now = Date.now()) {
  const session = storedSession();
  if (!session) return null;
  const stamp = session.seenAt;
  const fresh = typeof stamp === 'number' && Math.abs(now - stamp) <= AWAY_LIMIT_MS;
  if (!fresh && !document.wasDiscarded) {
    clearSession();
    return null;
  }
  return session;
}

/** The stored session as stored (stamp not judged), or null when there is none or it is unreadable. */
function storedSession() {
  try {
    const session = JSON.parse(sessionStorage.getItem(KEY) ?? 'null');
    return session && typeof session.token === 'string' && session.user ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session, now = Date.now()) {
  sessionStorage.setItem(KEY, JSON.stringify({ token: session.token, user: session.user, seenAt: now }));
}

export function clearSession() {
  sessionStorage.removeItem(KEY);
}

/** Stamps the stored session (if any) now, every minute and when the page goes away (a reload,
 *  a navigation, the tab closing): the stamp a restored tab is judged by. An open tab is never
 *  judged, however long its computer slept: its next stamp simply comes late. A page the browser
 *  brings back from its back/forward cache runs no script again: it is judged then, and
 *  `onExpired` runs when it was left too long ago. */
export function keepSessionStamped(onExpired) {
  const stamp = () => {
    const session = storedSession();
    if (session) saveSession(session);
  };
  setInterval(stamp, STAMP_INTERVAL_MS);
  addEventListener('pagehide', stamp);
  addEventListener('pageshow', (event) => {
    if (!event.persisted) return;
    if (sessionStorage.getItem(KEY) !== null && !loadSession()) onExpired();
    else stamp();
  });
}
