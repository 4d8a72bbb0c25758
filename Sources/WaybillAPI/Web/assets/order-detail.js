// The open order: facts, stages, documents and the dispatcher's actions (assign / reassign /
// unassign, the status moves of SPEC §1, cancel, delete). Refetched on every signal that names
// it; never patched from event payloads.
import { h, replace, setOptions, setText, flash, timeElement } from './dom.js';
import { statusLabel, stageKindLabel, shortTime, longTime, driverName, driverChoices, receiptOf } from './format.js';
import { confirmAction, announce } from './feedback.js';
import { OrderEditor } from './order-edit.js';

// Said when a write named an older version than the server's (412): the view reloads at once.
const CHANGED_MEANWHILE = 'This order was changed meanwhile. The current version is shown now: check it and try again.';
const CHANGED_MEANWHILE_EDIT = 'This order was changed meanwhile, so your edit was not saved. The current version '
  + 'is shown; your text is still in the form: save again to replace it, or cancel.';

/**
 * User text inside a sentence, isolated (U+2068 … U+2069): a title with a right-to-left override
 * (U+202E) or other bidi controls cannot reorder the rest of the sentence (found by a review: a
 * confirmation could be made to read otherwise).
 */
const isolated = (text) => `\u2068${text}\u2069`;

/** Whether `answer` is an older state of the order than `shown` (within one history). */
const isOlder = (answer, shown) => answer.version < shown.version
  || (answer.version === shown.version && (answer.seen?.version ?? -1) < (shown.seen?.version ?? -1));

/** The ETag of an order version (SPEC §2), for a server that sent none. */
const tagOf = (order) => `"o${order.id}-v${order.version}"`;

// The forward moves a dispatcher may make through POST /status (new ⇄ assigned go through
// assign/unassign; cancel has its own button).
const FORWARD = {
  assigned: ['accepted', 'Mark accepted'],
  accepted: ['in_progress', 'Mark in progress'],
  in_progress: ['completed', 'Mark completed'],
};

export class OrderDetail {
  constructor({ api, root, drivers, onChanged, onClose }) {
    this.api = api;
    this.root = root;
    this.drivers = drivers; // () => Map(id → driver)
    this.onChanged = onChanged;
    this.onClose = onClose;
    this.orderId = null;
    this.order = null;
    this.etag = null; // the version of `order`: every write sends it as If-Match
    // Bumped by a `reset`: versions compare only within one history. After a restore the refetch
    // can bring a lower version, which is then the truth (docs/PROTOCOL.md, "Resume by cursor").
    this.history = 0;
    this.shownHistory = 0; // the history `order` was fetched in
    this.build();
  }

  build() {
    this.heading = h('h2', { id: 'detail-heading', tabindex: '-1' });
    // Two messages: what the last action got from the server (stays until the next action), and
    // whether the order could be loaded (cleared by the next successful load).
    this.error = h('p', { class: 'inline-error', id: 'detail-error', role: 'alert' });
    this.loadError = h('p', { class: 'inline-error', id: 'detail-load-error', role: 'alert' });
    this.gone = h('p', { class: 'notice', id: 'detail-gone', role: 'status', hidden: true });
    this.facts = {
      status: h('span', { class: 'badge' }),
      driver: h('dd'),
      version: h('dd'),
      created: h('dd', {}, timeElement('', '')),
      updated: h('dd', {}, timeElement('', '')),
      seen: h('dd', { id: 'detail-seen' }, timeElement('', '')),
    };
    this.factList = h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', {}, this.facts.status),
      h('dt', {}, 'Driver'), this.facts.driver,
      h('dt', {}, 'Version'), this.facts.version,
      h('dt', {}, 'Created'), this.facts.created,
      h('dt', {}, 'Updated'), this.facts.updated,
      h('dt', {}, 'Driver’s device'), this.facts.seen);

    this.driverSelect = h('select', {
      id: 'assign-driver', name: 'driver_id', required: true,
      onchange: () => { this.pickedDriver = this.driverSelect.value; },
    });
    this.pickedDriver = null; // the user's choice in the select, kept across refetches
    this.assignButton = h('button', { type: 'submit', id: 'assign-button' }, 'Assign');
    this.assignForm = h('form', { class: 'assign-form', onsubmit: (e) => this.assignSubmitted(e) },
      h('label', { for: 'assign-driver' }, 'Driver'), this.driverSelect, this.assignButton);
    this.unassignButton = h('button', { type: 'button', id: 'unassign-button', onclick: () => this.unassign() }, 'Unassign');
    this.forwardButton = h('button', { type: 'button', id: 'forward-button', onclick: () => this.moveForward() });
    this.cancelButton = h('button', { type: 'button', class: 'danger', id: 'cancel-order', onclick: () => this.cancel() },
      'Cancel order');
    this.deleteButton = h('button', { type: 'button', class: 'danger', id: 'delete-order', onclick: () => this.remove() },
      'Delete order');
    this.editor = new OrderEditor({ save: (fields, etag) => this.saveEdit(fields, etag) });
    this.editButton = h('button', {
      type: 'button', id: 'edit-order', onclick: () => this.editor.open(this.order, this.etag),
    }, 'Edit');
    // One fieldset: disabling it disables every control while a request is on its way.
    this.actions = h('fieldset', { class: 'actions' },
      h('legend', {}, 'Actions'),
      this.assignForm,
      h('div', { class: 'button-row' },
        this.editButton, this.unassignButton, this.forwardButton, this.cancelButton, this.deleteButton));

    this.notes = h('p', { class: 'notes' });
    this.stages = h('ol', { class: 'stages', id: 'detail-stages' });
    this.documents = h('ul', { class: 'documents', id: 'detail-documents' });
    this.body = h('div', { class: 'detail-body' },
      this.factList,
      this.actions,
      this.editor.element,
      h('section', { 'aria-labelledby': 'notes-heading' }, h('h3', { id: 'notes-heading' }, 'Notes'), this.notes),
      h('section', { 'aria-labelledby': 'stages-heading' }, h('h3', { id: 'stages-heading' }, 'Stages'), this.stages),
      h('section', { 'aria-labelledby': 'documents-heading' },
        h('h3', { id: 'documents-heading' }, 'Documents'), this.documents));

    replace(this.root,
      h('div', { class: 'detail-header' },
        this.heading,
        h('button', { type: 'button', class: 'link-button', id: 'close-detail', onclick: () => this.onClose() }, 'Close')),
      this.error, this.loadError, this.gone, this.body);
  }

  /** Opens order `id` (focus goes to its heading so keyboard and screen reader users land there). */
  show(id) {
    this.orderId = id;
    this.order = null;
    this.etag = null;
    this.editor.close();
    this.pickedDriver = null;
    this.body.hidden = true;
    this.gone.hidden = true;
    this.error.textContent = '';
    this.loadError.textContent = '';
    setText(this.heading, 'Loading order…');
    this.heading.focus({ preventScroll: false });
    return this.load();
  }

  close() {
    this.orderId = null;
    this.order = null;
    this.etag = null;
    this.editor.close();
  }

  /** Signal from the live feed. */
  async refresh(signal) {
    const id = this.orderId;
    if (signal.reset) this.history += 1;
    if (id === null) return;
    if (signal.deletedIds.has(id)) return this.showGone();
    if (signal.all || signal.orderIds.has(id)) await this.load();
  }

  async load() {
    const id = this.orderId;
    const history = this.history;
    try {
      const { data, changed, etag } = await this.api.order(id);
      if (id !== this.orderId) return; // another order was opened meanwhile
      // Asked before a `reset`: the load the reset started draws what is true now.
      if (history !== this.history) return;
      // Two loads of one order can overlap (opening it, a live event): an answer older than what is
      // shown arrives last sometimes, and drawing it would take the screen and its If-Match back.
      // Only within one history: after a reset a lower version is the restored truth (found by a
      // review, 2026-12-04: the detail kept the lost version, and every save got 412).
      // At the same version, an answer without the receipt shown is older too: a version's `seen`
      // only ever comes (found by a review: "Not seen yet" came back over "Seen").
      const sameHistory = this.shownHistory === history;
      if (this.order && data && sameHistory && isOlder(data, this.order)) return;
      this.loadError.textContent = '';
      if (changed || !this.order || !sameHistory) this.render(data);
      this.shownHistory = history;
      this.etag = etag ?? tagOf(this.order);
    } catch (error) {
      if (id !== this.orderId || error.status === 401) return;
      if (error.status === 0 && this.order) return; // unreachable: the indicator says so; keep what we show
      if (error.status === 404) this.showGone();
      else this.loadError.textContent = `Could not load the order: ${error.message}`;
    }
  }

  /** Draws the current order again (the drivers' names arrived or changed). */
  redraw() {
    if (this.order) this.render(this.order);
  }

  showGone() {
    this.api.forgetOrder(this.orderId);
    // Focus on a control about to be hidden would drop to the page's body, silently, for a
    // keyboard or screen-reader user (found by a review): it moves to the heading, and the
    // notice is a live region.
    const hadFocus = this.body.contains(document.activeElement);
    this.order = null;
    this.etag = null;
    this.editor.close();
    this.body.hidden = true;
    this.gone.hidden = false;
    setText(this.heading, 'Order not available');
    setText(this.gone, 'This order was deleted or is no longer visible to you.');
    if (hadFocus) this.heading.focus();
  }

  render(order) {
    const previous = this.order;
    this.order = order;
    this.body.hidden = false;
    this.gone.hidden = true;
    setText(this.heading, `${order.number} · ${order.title}`);
    this.facts.status.className = `badge status-${order.status}`;
    setText(this.facts.status, statusLabel(order.status));
    setText(this.facts.driver, driverName(this.drivers(), order.driver_id));
    setText(this.facts.version, order.version);
    this.setTime(this.facts.created.firstChild, order.created_at);
    this.setTime(this.facts.updated.firstChild, order.updated_at);
    this.renderReceipt(order);
    setText(this.notes, order.notes || '—');
    this.renderStages(order.stages ?? []);
    this.renderDocuments(order.documents ?? []);
    this.renderActions(order, previous);
    if (previous && previous.id === order.id && previous.version !== order.version) flash(this.factList);
  }

  /** "Seen 10:15:03" or "Not seen yet — changed 10:14:50" (SPEC §2, "Receipts"); "—" without a driver. */
  renderReceipt(order) {
    const receipt = receiptOf(order);
    const time = this.facts.seen.firstChild;
    time.setAttribute('datetime', receipt?.iso ?? '');
    time.title = receipt?.title ?? '';
    setText(time, receipt?.text ?? '—');
    this.facts.seen.dataset.seen = receipt === null ? 'none' : String(receipt.seen);
  }

  setTime(time, iso) {
    time.setAttribute('datetime', iso ?? '');
    setText(time, longTime(iso));
  }

  renderStages(stages) {
    if (stages.length === 0) {
      replace(this.stages, h('li', { class: 'muted' }, 'No stages.'));
      return;
    }
    replace(this.stages, [...stages].sort((a, b) => a.position - b.position).map((stage) =>
      h('li', { class: stage.completed_at ? 'stage done' : 'stage' },
        h('span', { class: `badge kind-${stage.kind}` }, stageKindLabel(stage.kind)),
        h('span', { class: 'stage-address' }, stage.address),
        stage.planned_at ? h('span', { class: 'muted' }, 'planned ', timeElement(stage.planned_at, shortTime(stage.planned_at))) : null,
        stage.completed_at ? h('span', { class: 'stage-done' }, 'done ', timeElement(stage.completed_at, shortTime(stage.completed_at))) : null)));
  }

  renderDocuments(documents) {
    if (documents.length === 0) {
      replace(this.documents, h('li', { class: 'muted' }, 'No documents.'));
      return;
    }
    replace(this.documents, documents.map((doc) =>
      h('li', {}, h('span', { class: 'document-name' }, doc.name), ' ',
        h('span', { class: 'muted' }, `(${doc.kind}) `, timeElement(doc.created_at, shortTime(doc.created_at))))));
  }

  renderActions(order, previous) {
    const canAssign = order.status === 'new' || order.status === 'assigned';
    this.assignForm.hidden = !canAssign;
    // Keep what the user picked unless the order's driver itself changed underneath.
    if (previous && previous.driver_id !== order.driver_id) this.pickedDriver = null;
    setOptions(this.driverSelect, driverChoices(this.drivers(), ['', 'Choose a driver…']),
      this.pickedDriver ?? (order.driver_id == null ? '' : String(order.driver_id)));
    setText(this.assignButton, order.driver_id == null ? 'Assign' : 'Reassign');
    this.unassignButton.hidden = order.status !== 'assigned';
    const forward = FORWARD[order.status];
    this.forwardButton.hidden = !forward;
    if (forward) setText(this.forwardButton, forward[1]);
    this.cancelButton.hidden = order.status === 'completed' || order.status === 'cancelled';
    // Focus on a control that just disappeared would fall back to <body>: keep it in the panel.
    if (this.root.contains(document.activeElement) && document.activeElement.closest('[hidden]')) this.heading.focus();
  }

  // --- actions: each names the version shown (If-Match), shows its error in plain words, then
  // refetches. A 412 means someone else changed the order first: nothing was done, and the
  // refetch puts their version on screen for the user to decide again.

  // `shown`: the order and tag the user decided on, when a confirmation dialog stood between (a live
  // event may have reloaded the detail behind it: the write must name what the dialog showed).
  async run(description, action, shown = { order: this.order, etag: this.etag }) {
    const { order, etag } = shown;
    if (!order) return;
    this.actions.disabled = true;
    this.error.textContent = '';
    const history = this.history;
    try {
      const saved = await action(order, etag);
      this.adopt(saved, history);
      // An Edit form opened on the version this action replaced still names it: its save met a
      // 412 worded as someone else's change, for the user's own move (found by a review,
      // 2026-12-07). It moves on to the version the action made, the user's draft kept.
      if (this.editor.isOpen && this.editor.etag === etag && saved && this.etag === tagOf(saved)) {
        this.editor.rebase(this.etag, this.order);
      }
      announce(description(order));
    } catch (error) {
      if (error.status === 412) this.error.textContent = CHANGED_MEANWHILE;
      else if (error.status !== 401) this.error.textContent = error.message;
    } finally {
      this.actions.disabled = false;
      this.onChanged(); // refetch even after a 409: the view was probably stale
    }
  }

  assignSubmitted(event) {
    event.preventDefault();
    const driverId = Number(this.driverSelect.value);
    if (!driverId) {
      this.error.textContent = 'Choose a driver first.';
      this.driverSelect.focus();
      return;
    }
    this.run((o) => `Order ${o.number} assigned to ${driverName(this.drivers(), driverId)}.`,
      (o, etag) => this.api.assign(o.id, driverId, etag));
  }

  unassign() {
    this.run((o) => `Order ${o.number} unassigned.`, (o, etag) => this.api.unassign(o.id, etag));
  }

  moveForward() {
    const forward = FORWARD[this.order?.status];
    if (!forward) return;
    this.run((o) => `Order ${o.number} is now ${statusLabel(forward[0])}.`, (o, etag) => this.api.changeStatus(o.id, forward[0], etag));
  }

  async cancel() {
    const order = this.order;
    const etag = this.etag; // read before the dialog: see run()
    if (!order) return;
    const ok = await confirmAction({
      title: `Cancel order ${isolated(order.number)}?`,
      message: `“${isolated(order.title)}” will be cancelled. This cannot be undone, and the driver is told at once.`,
      confirmLabel: 'Cancel order',
    });
    if (ok) {
      this.run((o) => `Order ${o.number} cancelled.`, (o, tag) => this.api.changeStatus(o.id, 'cancelled', tag),
        { order, etag });
    }
  }

  async remove() {
    const order = this.order;
    const etag = this.etag; // read before the dialog: see run()
    if (!order) return;
    const ok = await confirmAction({
      title: `Delete order ${isolated(order.number)}?`,
      message: `“${isolated(order.title)}”, its stages and documents will be removed for everyone. This cannot be undone.`,
      confirmLabel: 'Delete order',
    });
    if (!ok) return;
    this.actions.disabled = true;
    this.error.textContent = '';
    try {
      // The version the user confirmed deleting: an order changed meanwhile is not deleted unseen.
      await this.api.deleteOrder(order.id, etag);
      announce(`Order ${order.number} deleted.`);
      this.api.forgetOrder(order.id);
      this.onChanged();
      this.onClose();
    } catch (error) {
      if (error.status === 412) {
        this.error.textContent = CHANGED_MEANWHILE;
        this.onChanged();
      } else if (error.status === 404) {
        // Gone, which is what was asked: this delete committed and its answer was lost (a proxy
        // in front of two nodes sends a DELETE again, HTTP calls it idempotent), or another
        // dispatcher deleted it first. Said as such, not as an error (found by a review).
        this.api.forgetOrder(order.id);
        this.onChanged();
        this.showGone();
      } else if (error.status !== 401) {
        this.error.textContent = error.message;
      }
    } finally {
      this.actions.disabled = false;
    }
  }

  // A write's answer is the order as the write left it: drawn at once, so the next action names
  // the new version before the refetch lands. A quick second click went with the old one and met a
  // 412 worded as someone else's change (found by a review; after an edit too, found by another).
  // `history`: `this.history` when the write was sent (a reset since makes the answer stale).
  adopt(saved, history) {
    if (saved && typeof saved.version === 'number' && saved.id === this.orderId && history === this.history
      && this.shownHistory === history && (!this.order || !isOlder(saved, this.order))) {
      this.render(saved);
      this.etag = tagOf(saved);
    }
  }

  /** Saves the edit form, at the version it was opened on (see order-edit.js). */
  async saveEdit(fields, etag) {
    const order = this.order;
    if (!order) return;
    this.error.textContent = '';
    const history = this.history;
    try {
      this.adopt(await this.api.updateOrder(order.id, fields, etag), history);
      announce(`Order ${order.number} saved.`);
      this.editor.close();
      this.heading.focus();
    } catch (error) {
      if (error.status === 412) {
        await this.load(); // the current version on screen before the user decides again
        this.editor.rebase(this.etag, this.order);
        this.error.textContent = CHANGED_MEANWHILE_EDIT;
      } else if (error.status !== 401) {
        this.error.textContent = error.message;
      }
    } finally {
      this.onChanged();
    }
  }
}
