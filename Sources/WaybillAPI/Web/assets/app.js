// Entry point: session, routing, the header, and one live feed for the page that is showing.
import { Api } from './api.js';
import { LiveFeed } from './live.js';
import { loadSession, saveSession, clearSession, keepSessionStamped } from './session.js';
import { parseRoute } from './router.js';
import { ConnectionIndicator } from './indicator.js';
import { clearErrors, showError } from './feedback.js';
import { LoginView } from './login-view.js';
import { OrdersView } from './orders-view.js';
import { FleetView } from './fleet-view.js';

const PAGES = {
  orders: { View: OrdersView, title: 'Orders' },
  fleet: { View: FleetView, title: 'Fleet board' },
};

let session = loadSession();
// A page restored from the back/forward cache after its session was left too long: start over
// (the load finds no session and shows the login page).
keepSessionStamped(() => location.reload());
let current = null; // { name, view, feed }
let loginNotice = '';
let returnTo = null; // the page asked for before login (kept in memory only)

let loggingOut = false; // a 401 meanwhile is the logout's own doing: the logout says so itself
const api = new Api({
  getToken: () => session?.token ?? null,
  onUnauthorized: () => {
    if (!loggingOut) endSession('Your session has ended. Please log in again.');
  },
  // A read answered "wait" (429, a 5xx) is retried by the page's feed after a backoff.
  onUnavailable: () => current?.feed?.retryReads(),
});
const indicator = new ConnectionIndicator();
const main = document.getElementById('main');
const topbar = document.getElementById('topbar');

/** Forgets the user everywhere (token, cached bodies, the socket) and shows the login page. */
function endSession(notice) {
  const wasLoggedIn = session !== null;
  // A question left open (cancel or delete an order) must not stay over the login page: it
  // blocked the form, and on a shared dispatch computer showed the next person the order's number
  // and title (found by a review, 2026-12-07). Closed, it answers "no".
  const dialog = document.getElementById('confirm-dialog');
  if (dialog?.open) dialog.close('cancel');
  teardown();
  session = null;
  clearSession();
  api.clearCache();
  if (wasLoggedIn) loginNotice = notice;
  if (location.hash !== '#/login') location.hash = '#/login';
  else route();
}

function teardown() {
  current?.feed?.stop();
  current?.view?.unmount();
  current = null;
}

function route() {
  const target = parseRoute();
  if (!session && target.name !== 'login') {
    if (target.name !== 'not-found' && location.hash.startsWith('#/')) returnTo = location.hash;
    location.replace('#/login');
    return;
  }
  if (session && (target.name === 'login' || target.name === 'not-found')) {
    location.replace('#/orders');
    return;
  }
  updateHeader(target.name);
  if (current?.name === target.name) {
    current.view.update(target);
    return;
  }
  teardown();
  clearErrors();
  if (target.name === 'login') {
    document.title = 'Log in · Waybill';
    const view = new LoginView({
      api,
      notice: loginNotice,
      onLoggedIn: (newSession) => {
        session = newSession;
        saveSession(session);
        loginNotice = '';
        location.hash = returnTo || '#/orders';
        returnTo = null;
      },
    });
    current = { name: 'login', view };
    view.mount(main);
    return;
  }

  const page = PAGES[target.name];
  document.title = `${page.title} · Waybill`;
  let view = null;
  const feed = new LiveFeed({
    api,
    stream: page.View.stream,
    onSignal: (signal) => view.refresh(signal),
    onStatus: (status) => indicator.show(status),
    onAuthFailure: () => endSession('The live connection was refused. Please log in again.'),
  });
  view = new page.View({ api, feed });
  indicator.onRetry = () => feed.reconnectNow();
  current = { name: target.name, view, feed };
  view.mount(main, target);
  feed.start();
  feed.refresh(); // load at once; the socket's own refetch follows when it connects
}

function updateHeader(name) {
  topbar.hidden = name === 'login';
  document.getElementById('account-name').textContent = session?.user?.name || session?.user?.email || '';
  for (const link of topbar.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

const logoutButton = document.getElementById('logout');
logoutButton.addEventListener('click', async () => {
  // Revoke the token on the server first: a bearer token that only the tab forgot would stay
  // valid. Logging out locally must not depend on the server being reachable, though.
  logoutButton.disabled = true;
  loggingOut = true;
  // The server closes this user's sockets with 4001 as it revokes the token, often before the
  // logout's own answer arrives: the live link is stopped first, or that close would end the
  // session as "The live connection was refused" instead of "You have logged out."
  current?.feed?.stop();
  // Logout revokes every token of the user (SPEC: logout everywhere). Only a 204, or a 401 (the
  // token was already revoked), says that happened; an unreachable or failing server revoked
  // nothing, and a user logging out to end a session on a lost laptop must hear that (found by a
  // review, 2026-12-05). The local logout goes ahead either way.
  let revoked = true;
  try {
    await api.logout();
  } catch (error) {
    revoked = error.status === 401;
  } finally {
    logoutButton.disabled = false;
  }
  endSession(revoked ? 'You have logged out.'
    : 'You have logged out on this device, but the server did not confirm it: your other sessions '
      + 'may still be open. Log in and log out again when the server is reachable.');
  loggingOut = false;
});
window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (event) => {
  // Anything that slipped through is still said in words rather than failing silently.
  showError(event.reason?.message || 'Something went wrong. Reload the page if it persists.');
});

route();
