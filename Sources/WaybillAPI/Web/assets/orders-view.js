// Orders page: one page of the live table (active orders by default; the history, paged and
// searchable), counts per status, the "New order" dialog and, at #/orders/ID, the open order's
// detail beside (or below) the table. Events refetch only the rows they name, or the page when
// its membership may have changed (see list-page.js).
import { h, options, setOptions, setText, flash, timeElement } from './dom.js';
import { STATUSES, statusLabel, shortTime, longTime, driverName, driverChoices, receiptOf, receiptKey } from './format.js';
import { routeHash, navigate } from './router.js';
import { OrderDetail } from './order-detail.js';
import { OrderForm } from './order-form.js';
import { announce } from './feedback.js';
import { PAGE_SIZE, serverFilters, planRefresh, membershipChanged } from './list-page.js';

export class OrdersView {
  constructor({ api, feed }) {
    this.api = api;
    this.feed = feed; // its onSignal is routed to this.refresh by app.js
    this.drivers = new Map(); // id → driver
    this.rows = new Map(); // order id → { tr, cells, link, version, driverLabel }
    this.orders = [];
    this.rendered = false;
    this.query = {};
    this.page = { before: null, rows: [], hasMore: false, next: null };
    this.cursors = []; // the `before` of each newer page, for "Newer"
    this.generation = 0; // bumps on every page load: an older answer is dropped
    this.pageStale = false; // a refetch failed: the next signal reloads the whole page
    this.loading = null; // the generation of the page load in flight, if any
    this.signalledWhileLoading = false; // a signal came meanwhile: that load's answer may predate it
    this.leaving = false; // Older or Newer loads, and the rows on screen are still the page left
  }

  /** The live stream this page listens to (company events). */
  static stream = null;

  mount(main, route) {
    this.statusFilter = h('select', { id: 'filter-status', name: 'status', onchange: () => this.filtersChanged() },
      options([['', 'Active orders'], ['all', 'All orders (history)'], ...STATUSES.map((s) => [s, statusLabel(s)])]));
    // maxlength: the server refuses a `q` over 100 characters (400); the box stops at that length.
    this.search = h('input', { id: 'filter-q', name: 'q', type: 'search', placeholder: 'Number or title',
      autocomplete: 'off', maxlength: '100', oninput: () => this.searchTyped() });
    this.newer = h('button', { type: 'button', id: 'page-newer', onclick: () => this.showNewer() }, 'Newer');
    this.older = h('button', { type: 'button', id: 'page-older', onclick: () => this.showOlder() }, 'Older');
    this.counts = h('ul', { class: 'status-counts', id: 'status-counts', 'aria-label': 'Orders per status' });
    this.driverFilter = h('select', { id: 'filter-driver', name: 'driver', onchange: () => this.filtersChanged() });
    this.tbody = h('tbody');
    this.count = h('p', { class: 'list-count', id: 'orders-count' });
    this.listError = h('p', { class: 'inline-error', id: 'orders-error', role: 'alert' });
    this.empty = h('p', { class: 'empty', hidden: true }, 'No orders match these filters.');
    this.detailRoot = h('section', { class: 'detail-pane', id: 'order-detail', 'aria-label': 'Order detail', hidden: true });

    this.form = new OrderForm({
      api: this.api,
      onCreated: (order) => {
        announce(`Order ${order.number} created.`);
        this.highlightId = order.id;
        this.feed.refresh();
      },
    });
    this.detail = new OrderDetail({
      api: this.api,
      root: this.detailRoot,
      drivers: () => this.drivers,
      onChanged: () => this.feed.refresh(),
      onClose: () => navigate('/orders', this.query),
    });

    const table = h('table', { class: 'orders-table', id: 'orders-table' },
      h('caption', {}, 'Orders', h('span', { class: 'visually-hidden' }, ', newest first; updated live')),
      h('colgroup', {},
        h('col', { class: 'col-number' }), h('col', { class: 'col-title' }), h('col', { class: 'col-status' }),
        h('col', { class: 'col-driver' }), h('col', { class: 'col-updated' }), h('col', { class: 'col-seen' })),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Number'), h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Status'),
        h('th', { scope: 'col' }, 'Driver'), h('th', { scope: 'col' }, 'Updated'), h('th', { scope: 'col' }, 'Driver’s device'))),
      this.tbody);

    this.layout = h('div', { class: 'orders-page' },
      h('section', { class: 'list-pane', 'aria-labelledby': 'orders-heading' },
        h('div', { class: 'toolbar' },
          h('h1', { id: 'orders-heading' }, 'Orders'),
          h('button', { type: 'button', class: 'primary', id: 'new-order', onclick: () => this.form.open(this.drivers) },
            'New order')),
        this.counts,
        h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter orders',
          onsubmit: (e) => { e.preventDefault(); this.filtersChanged(); } },
        h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Show'), this.statusFilter),
        h('div', { class: 'field' }, h('label', { for: 'filter-driver' }, 'Driver'), this.driverFilter),
        h('div', { class: 'field' }, h('label', { for: 'filter-q' }, 'Search'), this.search)),
        this.listError,
        h('div', { class: 'table-scroll' }, table),
        this.empty,
        h('nav', { class: 'pager', 'aria-label': 'Pages' }, this.newer, this.count, this.older)),
      this.detailRoot);
    main.replaceChildren(this.layout, this.form.element);
    this.update(route);
  }

  unmount() {
    this.detail?.close();
    // A search typed just before leaving must not rewrite the next page's address (found by a review).
    clearTimeout(this.searchTimer);
  }

  /** A new route for this page (filters changed, an order opened or closed). */
  update(route) {
    const previous = JSON.stringify(this.query);
    const driver = /^\d+$/.test(route.query.driver ?? '') ? route.query.driver : '';
    this.query = { status: route.query.status ?? '', driver, q: route.query.q ?? '' };
    this.statusFilter.value = this.query.status;
    if (document.activeElement !== this.search) this.search.value = this.query.q;
    this.fillDriverFilter();
    const opened = route.orderId;
    this.layout.classList.toggle('has-detail', opened !== null);
    this.detailRoot.hidden = opened === null;
    const closing = opened === null ? this.detail.orderId : null;
    if (opened === null) this.detail.close();
    else if (this.detail.orderId !== opened) this.detail.show(opened);
    // Keyboard users land back on the row they came from, not at the top of the page.
    const focus = document.activeElement;
    if (closing !== null && (focus === document.body || this.detailRoot.contains(focus))) {
      (this.rows.get(closing)?.link ?? document.getElementById('orders-heading')).focus();
    }
    if (this.rendered && previous !== JSON.stringify(this.query)) this.firstPage(); // the server filters
    else if (this.rendered) this.render();
    this.markSelected();
  }

  filtersChanged() {
    clearTimeout(this.searchTimer);
    const query = { status: this.statusFilter.value, driver: this.driverFilter.value, q: this.search.value.trim() };
    const path = this.detail.orderId ? `/orders/${this.detail.orderId}` : '/orders';
    history.replaceState(null, '', routeHash(path, query));
    this.update({ orderId: this.detail.orderId, query });
  }

  /** Search as one types, once typing pauses (Enter searches at once). */
  searchTyped() {
    clearTimeout(this.searchTimer);
    this.searchTimer = setTimeout(() => this.filtersChanged(), 300);
  }

  /**
   * Called (coalesced) by the live feed: `{all, orderIds, deletedIds, createdIds, countsChanged}`.
   * Counts are refetched when an event may have moved an order between statuses (they cost the
   * server a count over the company's history); rows by the rule of `planRefresh`.
   */
  async refresh(signal) {
    // After a `reset` the same version can name other content: every row is drawn again.
    if (signal.reset) for (const row of this.rows.values()) row.version = null;
    // Drivers first: the table and the detail show their names.
    if (signal.all || this.drivers.size === 0) await this.loadDrivers();
    const tasks = [this.refreshList(signal)];
    if (signal.all || signal.countsChanged || this.counts.childElementCount === 0) tasks.push(this.loadCounts());
    if (this.detail.orderId !== null) tasks.push(this.detail.refresh(signal));
    await Promise.all(tasks);
  }

  async loadDrivers() {
    try {
      const { data, changed } = await this.api.drivers();
      if (!changed) return;
      this.drivers = new Map(data.map((d) => [d.id, d]));
      this.fillDriverFilter();
      this.detail.redraw();
    } catch (error) {
      // The list still works without names ("Driver #7"); its own fetch reports the problem.
    }
  }

  async refreshList(signal) {
    // A failed refetch used up its signal: the next one reloads the page, or the rows it named
    // would stay old until the safety poll (found by a review, 2026-12-04).
    const plan = this.pageStale ? { page: true } : planRefresh(signal, this.page);
    if (plan.page) return this.loadPage();
    if (this.loading !== null && (plan.ids.length > 0 || (this.leaving && this.mayBeOnTheNextPage(signal)))) {
      // A page load (the user paged or searched) is in flight and its answer may be older than
      // this change: rows fetched now would be drawn over by it. It loads once more when it ends
      // (found by a review, 2026-12-04: a cancelled order showed as assigned until the poll).
      // While Older or Newer loads, the page on screen is the one being left: its bounds say
      // nothing of the page coming, so any order below the new cursor counts (found by a
      // review, 2026-12-05: an order changed during an Older click stayed stale on it). Only
      // until the new page is drawn: its own reload judges by its own bounds (counting every
      // order below the cursor then chained reloads on a busy company; a review again).
      this.signalledWhileLoading = true;
      return undefined;
    }
    if (plan.ids.length === 0) return undefined;
    const generation = this.generation;
    try {
      const { data } = await this.api.ordersByIds(plan.ids);
      if (generation !== this.generation) return undefined; // a page load started meanwhile
      if (membershipChanged(plan.ids, data, this.page, this.query)) return this.loadPage();
      const fresh = new Map(data.map((order) => [order.id, order]));
      this.orders = this.orders.map((order) => fresh.get(order.id) ?? order);
      this.page.rows = this.orders;
      this.listError.textContent = '';
      this.render();
    } catch (error) {
      if (generation === this.generation) this.pageStale = true;
      this.listFailed(error);
    }
    return undefined;
  }

  /** Whether a signal names an order that may be on the page a move is loading (below its cursor). */
  mayBeOnTheNextPage(signal) {
    const before = this.page.before;
    const named = [...(signal.orderIds ?? []), ...(signal.deletedIds ?? []), ...(signal.createdIds ?? [])];
    return named.some((id) => before === null || before === undefined || id < before);
  }

  /** Back to the newest page (the filters changed). */
  firstPage() {
    this.cursors = [];
    this.page = { before: null, rows: [], hasMore: false, next: null };
    return this.loadPage();
  }

  showOlder() {
    if (this.page.next === null || this.moving) return undefined;
    const fallback = this.pageState();
    this.cursors.push(this.page.before);
    // `next: null` until the page is in: a second click meanwhile (a double click) must not push
    // the same cursor again (found by a review: "Page 3" over page 2's rows).
    this.page = { ...this.page, before: this.page.next, next: null };
    return this.move(fallback);
  }

  showNewer() {
    if (this.cursors.length === 0 || this.moving) return undefined;
    const fallback = this.pageState();
    this.page = { ...this.page, before: this.cursors.pop() };
    return this.move(fallback);
  }

  /**
   * Loads the page Older or Newer chose. Another click on either before it is in is ignored: a
   * double click on Newer skipped a page, and Newer then Older labelled page 4 "Page 3" (found by
   * a review).
   */
  async move(fallback) {
    this.moving = true;
    this.leaving = true;
    try {
      return await this.loadPage({ fallback });
    } finally {
      this.moving = false;
      this.leaving = false;
    }
  }

  /** Where the user is, to go back to if moving to another page fails. */
  pageState() {
    return { page: this.page, cursors: [...this.cursors], stale: this.pageStale };
  }

  /**
   * Fetches the page on screen (its `before` cursor, the filters) and renders it. `fallback`: the
   * page the user was on, restored if this load fails (Older or Newer did not happen).
   */
  async loadPage({ fallback = null } = {}) {
    const generation = ++this.generation;
    const before = this.page.before;
    this.loading = generation;
    this.signalledWhileLoading = false;
    try {
      const { data, next } = await this.api.orders({ ...serverFilters(this.query), before, limit: PAGE_SIZE });
      if (generation !== this.generation) return;
      this.loading = null;
      this.pageStale = false;
      // An empty page that has a `next` is a search window with no match: Older goes on past it
      // (going back would keep every match beyond it out of reach; found by a review).
      if (data.length === 0 && next === null && this.cursors.length > 0) {
        // Everything on this older page went away: show the one before it.
        this.page = { ...this.page, before: this.cursors.pop() };
        await this.loadPage();
        return;
      }
      this.page = { before, rows: data, hasMore: next !== null, next };
      this.leaving = false;
      this.orders = data;
      this.listError.textContent = '';
      this.render();
      if (this.signalledWhileLoading) await this.loadPage();
    } catch (error) {
      if (generation === this.generation) {
        this.loading = null;
        if (fallback) {
          // Older or Newer failed: the user stays where they were, with the rows still on screen
          // (not moved to the asked-for page by the next event; found by a review, 2026-12-05).
          this.page = fallback.page;
          this.cursors = fallback.cursors;
          this.pageStale = fallback.stale || this.signalledWhileLoading;
          this.render();
        } else {
          // The page on screen is not the one asked for (a created or deleted order): the next
          // signal reloads it, not just the rows it names (found by a review, 2026-12-05: an
          // event's page reload answered 429 or 503 left a new order out until the poll).
          this.pageStale = true;
        }
      }
      this.listFailed(error);
    }
  }

  async loadCounts() {
    try {
      const { data, changed } = await this.api.orderCounts();
      if (changed || this.counts.childElementCount === 0) this.renderCounts(data ?? {});
    } catch (error) {
      // The list reports the problem; the counters keep their last values.
    }
  }

  renderCounts(counts) {
    const active = STATUSES.filter((s) => s !== 'completed' && s !== 'cancelled')
      .reduce((sum, s) => sum + (Number(counts[s]) || 0), 0);
    const items = [['active', 'Active', active], ...STATUSES.map((s) => [s, statusLabel(s), Number(counts[s]) || 0])];
    this.counts.replaceChildren(...items.map(([key, label, value]) =>
      h('li', { dataset: { status: key } }, h('span', { class: 'count-label' }, label), ' ',
        h('strong', { class: 'count-value' }, String(value)))));
  }

  listFailed(error) {
    // 401 ends the session elsewhere; "unreachable" is what the connection indicator shows.
    // Either way the table keeps what it had instead of jumping down under a message.
    if (error.status === 401 || (error.status === 0 && this.rendered)) return;
    this.listError.textContent = `Could not refresh the orders: ${error.message}`;
  }

  fillDriverFilter() {
    // "Unassigned" is the status New (assigning moves an order on, unassigning moves it back).
    setOptions(this.driverFilter, driverChoices(this.drivers, ['', 'All drivers']), this.query.driver);
  }

  /** The page as the server sent it: filtered, newest first, at most `PAGE_SIZE` rows. */
  visibleOrders() {
    return this.orders;
  }

  /**
   * Updates the table in place: rows are keyed by order id, unchanged rows are not touched and
   * a changed row keeps its size and only flashes, so nothing under the pointer moves.
   */
  render() {
    const visible = this.visibleOrders();
    const keep = new Set(visible.map((o) => o.id));
    for (const [id, row] of this.rows) {
      if (!keep.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
      }
    }
    visible.forEach((order, index) => {
      let row = this.rows.get(order.id);
      const isNew = !row;
      if (isNew) {
        row = this.createRow(order);
        this.rows.set(order.id, row);
      }
      const changed = isNew || row.version !== order.version || row.driverLabel !== driverName(this.drivers, order.driver_id);
      if (changed) this.fillRow(row, order);
      // A receipt is not a change of the order: the cell updates without the row flashing.
      if (changed || row.receipt !== receiptKey(order)) this.fillReceipt(row, order);
      if (this.tbody.children[index] !== row.tr) this.tbody.insertBefore(row.tr, this.tbody.children[index] ?? null);
      if ((changed && this.rendered) || this.highlightId === order.id) flash(row.tr);
    });
    this.highlightId = null;
    this.rendered = true;
    this.empty.hidden = visible.length > 0;
    setText(this.empty, this.page.next === null
      ? 'No orders match these filters.'
      : 'No matches among these orders: Older searches further back.');
    const pageNumber = this.cursors.length + 1;
    setText(this.count, `Page ${pageNumber}: ${visible.length} order${visible.length === 1 ? '' : 's'}`);
    this.newer.disabled = this.cursors.length === 0;
    this.older.disabled = this.page.next === null;
    this.markSelected();
  }

  createRow(order) {
    const link = h('a', { href: '#' });
    const cells = {
      number: h('th', { scope: 'row' }, link),
      title: h('td', { class: 'cell-title' }),
      status: h('td', {}, h('span', { class: 'badge' })),
      driver: h('td'),
      updated: h('td', {}, timeElement('', '')),
      seen: h('td', { class: 'cell-seen' }, timeElement('', '')),
    };
    const tr = h('tr', { dataset: { orderId: String(order.id) } },
      cells.number, cells.title, cells.status, cells.driver, cells.updated, cells.seen);
    // The number is the keyboard way in; a click anywhere on the row is the mouse shortcut.
    tr.addEventListener('click', (event) => {
      if (event.target.closest('a')) return;
      location.hash = link.getAttribute('href');
    });
    return { tr, cells, link, version: null };
  }

  fillRow(row, order) {
    row.version = order.version;
    row.driverLabel = driverName(this.drivers, order.driver_id);
    row.link.setAttribute('href', routeHash(`/orders/${order.id}`, this.query));
    setText(row.link, order.number);
    setText(row.cells.title, order.title);
    row.cells.title.title = order.title; // full text on hover when the cell truncates it
    const badge = row.cells.status.firstChild;
    badge.className = `badge status-${order.status}`;
    setText(badge, statusLabel(order.status));
    setText(row.cells.driver, row.driverLabel);
    const time = row.cells.updated.firstChild;
    time.setAttribute('datetime', order.updated_at ?? '');
    time.title = longTime(order.updated_at);
    setText(time, shortTime(order.updated_at));
    row.tr.dataset.status = order.status;
  }

  /** "Seen 10:15:03" or "Not seen yet — changed 10:14:50" (nothing without a driver). */
  fillReceipt(row, order) {
    const receipt = receiptOf(order);
    row.receipt = receiptKey(order);
    const time = row.cells.seen.firstChild;
    time.setAttribute('datetime', receipt?.iso ?? '');
    time.title = receipt?.title ?? '';
    setText(time, receipt?.text ?? '');
    row.cells.seen.dataset.seen = receipt === null ? 'none' : String(receipt.seen);
  }

  markSelected() {
    for (const [id, row] of this.rows) {
      const selected = id === this.detail.orderId;
      row.tr.classList.toggle('selected', selected);
      if (selected) row.link.setAttribute('aria-current', 'true');
      else row.link.removeAttribute('aria-current');
      // Links keep the filters, so closing the detail returns to the same view.
      const href = routeHash(`/orders/${id}`, this.query);
      if (row.link.getAttribute('href') !== href) row.link.setAttribute('href', href);
    }
  }
}
