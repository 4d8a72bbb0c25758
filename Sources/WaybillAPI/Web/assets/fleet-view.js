// Fleet board (stream=fleet): one card per driver with their current orders, plus a card for
// orders nobody has yet. Cards are keyed by driver and rebuilt only when their content changed.
// A burst of events refetches only the orders it names (`ids=`), not the whole active set: the
// set is loaded in full only at start, after a (re)connect or `reset`, by the safety poll, after
// a failed fetch, and when a burst names more orders than one `ids=` request takes.
import { h, replace, setText, flash } from './dom.js';
import { statusLabel, isActive, driverLabel, receiptOf, receiptKey } from './format.js';
import { MAX_IDS } from './list-page.js';

const UNASSIGNED = 'none';
const MAX_PAGES = 10;

export class FleetView {
  /** The live stream this page listens to. */
  static stream = 'fleet';

  constructor({ api }) {
    this.api = api;
    this.cards = new Map(); // driver id (or 'none') → { article, list, count, signature }
    this.rendered = false;
    this.drivers = [];
    this.orders = null; // order id → order, the active ones; null until the first full load
  }

  mount(main) {
    this.grid = h('div', { class: 'fleet-grid', id: 'fleet-grid' });
    this.error = h('p', { class: 'inline-error', id: 'fleet-error', role: 'alert' });
    main.replaceChildren(h('section', { class: 'fleet-page', 'aria-labelledby': 'fleet-heading' },
      h('div', { class: 'toolbar' }, h('h1', { id: 'fleet-heading' }, 'Fleet board')),
      h('p', { class: 'muted' }, 'Each driver with the orders they are working on. Finished and cancelled orders are left out.'),
      this.error,
      this.grid));
  }

  update() {}
  unmount() {}

  /** `signal`: the live feed's coalesced `{ all, orderIds }` (none: load everything). */
  async refresh(signal = { all: true }) {
    // After a `reset` a card whose versions did not change may still show other content.
    if (signal.reset) for (const card of this.cards.values()) card.signature = null;
    try {
      if (signal.all || this.orders === null || signal.orderIds.size > MAX_IDS) {
        await this.loadAll();
      } else if (signal.orderIds.size > 0) {
        await this.loadNamed([...signal.orderIds]);
      }
      this.error.textContent = '';
      this.render(this.drivers, [...this.orders.values()]);
    } catch (error) {
      // What the failed fetch would have changed is unknown: the next signal of any kind loads
      // everything again, instead of leaving those orders wrong until the safety poll.
      this.orders = null;
      if (error.status === 401 || (error.status === 0 && this.rendered)) return; // see OrdersView.loadList
      this.error.textContent = `Could not refresh the fleet: ${error.message}`;
    }
  }

  async loadAll() {
    const [drivers, orders] = await Promise.all([this.api.drivers(), this.activeOrders()]);
    this.drivers = drivers.data;
    this.orders = new Map(orders.map((order) => [order.id, order]));
  }

  /**
   * The named orders only: each one found active is (re)placed on the board, any other leaves it.
   * The drivers are asked again too (a conditional GET: a 304 unless one was added or renamed).
   * Nothing changes unless both answers arrived.
   */
  async loadNamed(ids) {
    const [drivers, { data }] = await Promise.all([this.api.drivers(), this.api.ordersByIds(ids)]);
    const fresh = new Map(data.map((order) => [order.id, order]));
    for (const id of ids) {
      const order = fresh.get(id);
      if (order && isActive(order.status)) this.orders.set(id, order);
      else this.orders.delete(id);
    }
    this.drivers = drivers.data;
  }

  /**
   * The active orders only (finished history never reaches the board), page after page up to
   * `MAX_PAGES` of 500: a fleet with more current orders than that shows the newest ones.
   */
  async activeOrders() {
    const orders = [];
    let before = null;
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const { data, next } = await this.api.orders({ active: 'true', before, limit: 500 });
      orders.push(...data);
      if (next === null) break;
      before = next;
    }
    return orders;
  }

  render(drivers, orders) {
    const byDriver = new Map(drivers.map((d) => [String(d.id), []]));
    byDriver.set(UNASSIGNED, []);
    for (const order of orders.filter((o) => isActive(o.status)).sort((a, b) => a.id - b.id)) {
      const key = order.driver_id == null ? UNASSIGNED : String(order.driver_id);
      if (!byDriver.has(key)) byDriver.set(key, []); // a driver the list does not know (yet)
      byDriver.get(key).push(order);
    }
    const names = new Map(drivers.map((d) => [String(d.id), d]));
    const keys = [...byDriver.keys()];
    for (const [key, card] of this.cards) {
      if (!byDriver.has(key)) {
        card.article.remove();
        this.cards.delete(key);
      }
    }
    keys.forEach((key, index) => {
      let card = this.cards.get(key);
      if (!card) {
        card = this.createCard(key, names.get(key));
        this.cards.set(key, card);
      }
      setText(card.heading, this.cardTitle(key, names.get(key))); // a driver renamed, or known only now
      const list = byDriver.get(key);
      const signature = JSON.stringify(list.map((o) => [o.id, o.version, receiptKey(o)]));
      if (card.signature !== signature) {
        this.fillCard(card, list);
        if (this.rendered && card.signature !== null) flash(card.article);
        card.signature = signature;
      }
      if (this.grid.children[index] !== card.article) this.grid.insertBefore(card.article, this.grid.children[index] ?? null);
    });
    this.rendered = true;
  }

  createCard(key, driver) {
    const headingId = `fleet-driver-${key}`;
    const title = this.cardTitle(key, driver);
    const heading = h('h2', { id: headingId }, title);
    const count = h('p', { class: 'card-count' });
    // Whether the driver's device shows everything assigned to them (SPEC §2, "Receipts").
    const seen = h('p', { class: 'card-seen', hidden: key === UNASSIGNED });
    const list = h('ul', { class: 'card-orders' });
    const article = h('article', { class: key === UNASSIGNED ? 'driver-card unassigned' : 'driver-card',
      'aria-labelledby': headingId, dataset: { driverId: key } },
    heading,
    driver?.email && driver.name ? h('p', { class: 'muted card-email' }, driver.email) : null,
    count, seen, list);
    return { article, heading, list, count, seen, signature: null };
  }

  cardTitle(key, driver) {
    return key === UNASSIGNED ? 'Not assigned' : (driver ? driverLabel(driver) : `Driver #${key}`);
  }

  fillCard(card, orders) {
    setText(card.count, orders.length === 0 ? 'No current orders' : `${orders.length} current order${orders.length === 1 ? '' : 's'}`);
    const receipts = orders.map(receiptOf).filter((r) => r !== null);
    const unseen = receipts.filter((r) => !r.seen).length;
    card.seen.dataset.seen = receipts.length === 0 ? 'none' : unseen === 0 ? 'all' : 'some';
    setText(card.seen, receipts.length === 0 ? '' : unseen === 0 ? 'All seen on the driver’s device'
      : `${unseen} not seen yet`);
    replace(card.list, orders.map((order) => {
      const receipt = receiptOf(order);
      return h('li', { dataset: { orderId: String(order.id), seen: receipt === null ? 'none' : String(receipt.seen) } },
        h('a', { href: `#/orders/${order.id}` }, order.number), ' ',
        h('span', { class: 'card-title' }, order.title), ' ',
        h('span', { class: `badge status-${order.status}` }, statusLabel(order.status)),
        receipt ? ' ' : null,
        receipt ? h('span', { class: receipt.seen ? 'seen-mark seen' : 'seen-mark unseen', title: receipt.title },
          receipt.text) : null);
    }));
  }
}
