// The signed-in user. Kept in sessionStorage: it survives a reload, and is never written into a
// URL, a cookie or localStorage. Not a guarantee that it ends with the tab: browsers restore a
// reopened tab's sessionStorage (and copy it to a duplicated one), so on a shared computer the
// dispatcher logs out (docs/HARDENING.md).

const KEY = 'waybill.session';

/** `{token, user}` or null. */
export function loadSession() {
  try {
    const session = JSON.parse(sessionStorage.getItem(KEY) ?? 'null');
    return session && typeof session.token === 'string' && session.user ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session) {
  sessionStorage.setItem(KEY, JSON.stringify({ token: session.token, user: session.user }));
}

export function clearSession() {
  sessionStorage.removeItem(KEY);
}
