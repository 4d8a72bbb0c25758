// The orders list at any history length: one keyset page on screen, and the rule that decides,
// for a burst of events, what to fetch — the named rows (`ids=`), the page, or nothing.
// Plain functions on plain values, so the browser tests can run them directly.
import { isActive } from './format.js';

/** Rows per page: no view ever renders more. */
export const PAGE_SIZE = 50;
/** The server's limit for `ids=`; a larger burst refetches the page instead. */
export const MAX_IDS = 100;

/**
 * The panel's filters `{ status, driver, q }` as server parameters. `status` '' (the default) is
 * the active orders, 'all' the whole history, anything else one status.
 */
export function serverFilters({ status = '', driver = '', q = '' }) {
  const params = {};
  if (status === '' || status === 'active') params.active = 'true';
  else if (status !== 'all') params.status = status;
  if (driver) params.driver_id = driver;
  if (q.trim()) params.q = q.trim();
  return params;
}

/**
 * Whether `order` passes the filters, as the server decides it. (Text matching lower-cases the
 * way JavaScript does, the server with Unicode's default mapping too. Where they differ (Greek
 * final sigma) either the page is refetched once too often, or a hidden row that now matches on
 * the server is not fetched until the next full refetch (the 120 s poll at the latest): rare.)
 */
export function matchesFilters(order, { status = '', driver = '', q = '' }) {
  if (status === '' || status === 'active') {
    if (!isActive(order.status)) return false;
  } else if (status !== 'all' && order.status !== status) {
    return false;
  }
  if (driver && String(order.driver_id) !== String(driver)) return false;
  const text = q.trim().toLowerCase();
  if (text && !String(order.number).toLowerCase().includes(text) && !String(order.title).toLowerCase().includes(text)) {
    return false;
  }
  return true;
}

/**
 * Whether an order with this id belongs between the page's bounds `{ before, next, rows, hasMore }`:
 * below `before` (the page's cursor; null = the first page) and, unless this is the last page,
 * at or above the next page's cursor (`next`: the last row, or where a text page's scan window
 * ended). Ids only grow, so a new order can only ever join the first page.
 */
export function withinPage(id, page) {
  if (page.before !== null && page.before !== undefined && id >= page.before) return false;
  if (!page.hasMore) return true;
  const floor = page.next ?? page.rows[page.rows.length - 1]?.id;
  return floor === undefined || id >= floor;
}

/**
 * What a coalesced signal `{ all, orderIds, deletedIds, createdIds }` costs for `page`:
 * `{ page: true }` when the page's membership may have changed without asking (a reconnect, a
 * create on the first page, a visible row deleted, more ids than one request takes), else
 * `{ ids }`: the named orders that are on the page or could join it (possibly none).
 */
export function planRefresh(signal, page) {
  if (signal.all) return { page: true };
  const visible = new Set(page.rows.map((row) => row.id));
  const created = signal.createdIds ?? new Set();
  const deleted = signal.deletedIds ?? new Set();
  if ([...created].some((id) => withinPage(id, page))) return { page: true };
  if ([...deleted].some((id) => visible.has(id))) return { page: true };
  const ids = [...signal.orderIds].filter((id) => !deleted.has(id) && (visible.has(id) || withinPage(id, page)));
  if (ids.length > MAX_IDS) return { page: true };
  return { ids };
}

/**
 * After fetching the `asked` ids: did a row leave the page (gone, or no longer matching) or
 * a row join it (now matching, inside its bounds)? Then the page itself must be refetched.
 */
export function membershipChanged(asked, fetched, page, filters) {
  const visible = new Set(page.rows.map((row) => row.id));
  const byId = new Map(fetched.map((order) => [order.id, order]));
  return asked.some((id) => {
    const order = byId.get(id);
    const matches = order !== undefined && matchesFilters(order, filters);
    return visible.has(id) ? !matches : matches && withinPage(id, page);
  });
}
