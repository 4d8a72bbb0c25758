// Orders page: the live table with filters, the "New order" dialog and, at #/orders/ID, the
// open order's detail beside (or below) the table.
import { h, options, setOptions, setText, flash, timeElement } from './dom.js';
import { STATUSES, statusLabel, shortTime, longTime, driverName, driverChoices } from './format.js';
import { routeHash, navigate } from './router.js';
import { OrderDetail } from './order-detail.js';
import { OrderForm } from './order-form.js';
import { announce } from './feedback.js';

export class OrdersView {
  constructor({ api, feed }) {
    this.api = api;
    this.feed = feed; // its onSignal is routed to this.refresh by app.js
    this.drivers = new Map(); // id → driver
    this.rows = new Map(); // order id → { tr, cells, link, version, driverLabel }
    this.orders = [];
    this.rendered = false;
    this.query = {};
  }

  /** The live stream this page listens to (company events). */
  static stream = null;

  mount(main, route) {
    this.statusFilter = h('select', { id: 'filter-status', name: 'status', onchange: () => this.filtersChanged() },
      options([['', 'All statuses'], ...STATUSES.map((s) => [s, statusLabel(s)])]));
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
        h('col', { class: 'col-driver' }), h('col', { class: 'col-updated' })),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Number'), h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Status'),
        h('th', { scope: 'col' }, 'Driver'), h('th', { scope: 'col' }, 'Updated'))),
      this.tbody);

    this.layout = h('div', { class: 'orders-page' },
      h('section', { class: 'list-pane', 'aria-labelledby': 'orders-heading' },
        h('div', { class: 'toolbar' },
          h('h1', { id: 'orders-heading' }, 'Orders'),
          h('button', { type: 'button', class: 'primary', id: 'new-order', onclick: () => this.form.open(this.drivers) },
            'New order')),
        h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter orders', onsubmit: (e) => e.preventDefault() },
          h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Status'), this.statusFilter),
          h('div', { class: 'field' }, h('label', { for: 'filter-driver' }, 'Driver'), this.driverFilter)),
        this.listError,
        h('div', { class: 'table-scroll' }, table),
        this.empty,
        this.count),
      this.detailRoot);
    main.replaceChildren(this.layout, this.form.element);
    this.update(route);
  }

  unmount() {
    this.detail?.close();
  }

  /** A new route for this page (filters changed, an order opened or closed). */
  update(route) {
    const previousStatus = this.query.status ?? '';
    this.query = { status: route.query.status ?? '', driver: route.query.driver ?? '' };
    this.statusFilter.value = this.query.status;
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
    if (this.rendered && previousStatus !== this.query.status) this.feed.refresh(); // the server filters status
    else if (this.rendered) this.render();
    this.markSelected();
  }

  filtersChanged() {
    const query = { status: this.statusFilter.value, driver: this.driverFilter.value };
    const path = this.detail.orderId ? `/orders/${this.detail.orderId}` : '/orders';
    history.replaceState(null, '', routeHash(path, query));
    this.update({ orderId: this.detail.orderId, query });
  }

  /** Called (coalesced) by the live feed: `{all, orderIds, deletedIds}`. */
  async refresh(signal) {
    // Drivers first: the table and the detail show their names.
    if (signal.all || this.drivers.size === 0) await this.loadDrivers();
    const tasks = [this.loadList()];
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

  async loadList() {
    try {
      const { data } = await this.api.orders(this.query.status);
      this.orders = data;
      this.listError.textContent = '';
      this.render();
    } catch (error) {
      // 401 ends the session elsewhere; "unreachable" is what the connection indicator shows.
      // Either way the table keeps what it had instead of jumping down under a message.
      if (error.status === 401 || (error.status === 0 && this.rendered)) return;
      this.listError.textContent = `Could not refresh the orders: ${error.message}`;
    }
  }

  fillDriverFilter() {
    setOptions(this.driverFilter, driverChoices(this.drivers, ['', 'All drivers'], ['none', 'Unassigned']), this.query.driver);
  }

  visibleOrders() {
    const driver = this.query.driver;
    return this.orders
      .filter((o) => !this.query.status || o.status === this.query.status)
      .filter((o) => !driver || (driver === 'none' ? o.driver_id == null : String(o.driver_id) === driver))
      .sort((a, b) => b.id - a.id);
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
      if (this.tbody.children[index] !== row.tr) this.tbody.insertBefore(row.tr, this.tbody.children[index] ?? null);
      if ((changed && this.rendered) || this.highlightId === order.id) flash(row.tr);
    });
    this.highlightId = null;
    this.rendered = true;
    this.empty.hidden = visible.length > 0;
    setText(this.count, `${visible.length} of ${this.orders.length} order${this.orders.length === 1 ? '' : 's'} shown`);
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
    };
    const tr = h('tr', { dataset: { orderId: String(order.id) } },
      cells.number, cells.title, cells.status, cells.driver, cells.updated);
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
