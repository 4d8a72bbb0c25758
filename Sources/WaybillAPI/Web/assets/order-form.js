// "New order" dialog: title, notes, an optional driver and any number of route stages.
import { h, options, replace, setOptions } from './dom.js';
import { newIdempotencyKey } from './api.js';
import { STAGE_KINDS, localInputToISO, driverChoices } from './format.js';

let stageCounter = 0; // unique ids for the labels of repeated stage fields

// Said when a changed draft's key turns out to have made the order already.
const ORDER_MADE = 'Your earlier order was created: check the orders list. Start over to create another one.';

// Said when the dialog opens again on an order whose create was never confirmed.
const UNCONFIRMED_DRAFT = 'Your last order was not confirmed, so it is kept here: check the orders list. If it is not '
  + 'there, create it again (it will not be made twice); or start over for another order.';

export class OrderForm {
  constructor({ api, onCreated }) {
    this.api = api;
    this.onCreated = onCreated;
    this.build();
  }

  build() {
    this.title = h('input', { id: 'order-title', name: 'title', required: true, maxlength: '200', autocomplete: 'off' });
    this.notes = h('textarea', { id: 'order-notes', name: 'notes', rows: '3' });
    this.driver = h('select', { id: 'order-driver', name: 'driver_id' });
    this.stageList = h('ol', { class: 'stage-editor', id: 'stage-editor' });
    this.error = h('p', { class: 'form-error', id: 'order-form-error', role: 'alert' });
    this.submit = h('button', { type: 'submit', class: 'primary', id: 'create-order' }, 'Create order');
    this.form = h('form', { class: 'order-form', 'aria-describedby': 'order-form-error', onsubmit: (e) => this.submitted(e) },
      h('h2', { id: 'order-form-heading' }, 'New order'),
      h('div', { class: 'field' }, h('label', { for: 'order-title' }, 'Title'), this.title),
      h('div', { class: 'field' }, h('label', { for: 'order-notes' }, 'Notes'), this.notes),
      h('div', { class: 'field' }, h('label', { for: 'order-driver' }, 'Driver (optional)'), this.driver),
      h('fieldset', { class: 'stages-fieldset' },
        h('legend', {}, 'Stages'),
        this.stageList,
        h('button', { type: 'button', id: 'add-stage', onclick: () => this.addStage(true) }, 'Add stage')),
      this.error,
      h('div', { class: 'button-row' },
        h('button', { type: 'button', onclick: () => this.element.close() }, 'Cancel'),
        this.startOver = h('button', { type: 'button', id: 'start-over', hidden: true, onclick: () => this.clear() }, 'Start over'),
        this.submit));
    this.element = h('dialog', { class: 'form-dialog', id: 'order-dialog', 'aria-labelledby': 'order-form-heading' }, this.form);
  }

  /**
   * Opens an empty form; `drivers` is the Map(id → driver) the page already has. A draft whose
   * create got no answer (it may have been made) is kept instead, with its Idempotency-Key: the
   * dispatcher closed the dialog to check the list, and typing it again in a new form made a second
   * order (found by a review). "Start over" clears it.
   */
  open(drivers) {
    this.drivers = drivers;
    if (this.attempt?.unconfirmed || this.attempt?.made) {
      setOptions(this.driver, driverChoices(drivers, ['', 'No driver yet']), this.driver.value);
      this.error.textContent = this.attempt.made ? ORDER_MADE : UNCONFIRMED_DRAFT;
      this.startOver.hidden = false;
      this.element.showModal();
      this.submit.focus();
      return;
    }
    this.clear();
    this.element.showModal();
    this.title.focus();
  }

  /** An empty form for a new order (a new key). */
  clear() {
    this.attempt = null;
    this.form.reset();
    this.error.textContent = '';
    this.startOver.hidden = true;
    setOptions(this.driver, driverChoices(this.drivers ?? new Map(), ['', 'No driver yet']), '');
    replace(this.stageList);
    this.addStage(false);
    if (this.element.open) this.title.focus();
  }

  addStage(focus) {
    const n = ++stageCounter;
    const kind = h('select', { id: `stage-kind-${n}`, name: 'kind' },
      options(STAGE_KINDS, this.stageList.children.length === 0 ? 'pickup' : 'delivery'));
    const address = h('input', { id: `stage-address-${n}`, name: 'address', required: true, autocomplete: 'off' });
    const planned = h('input', { id: `stage-planned-${n}`, name: 'planned_at', type: 'datetime-local' });
    const item = h('li', { class: 'stage-row' },
      h('div', { class: 'field' }, h('label', { for: kind.id }, 'Kind'), kind),
      h('div', { class: 'field grow' }, h('label', { for: address.id }, 'Address'), address),
      h('div', { class: 'field' }, h('label', { for: planned.id }, 'Planned (optional)'), planned),
      h('button', {
        type: 'button', class: 'link-button remove-stage', 'aria-label': 'Remove this stage',
        onclick: () => { item.remove(); this.form.querySelector('#add-stage').focus(); },
      }, 'Remove'));
    this.stageList.append(item);
    if (focus) kind.focus();
  }

  collect() {
    const stages = [...this.stageList.children].map((item) => {
      const stage = {
        kind: item.querySelector('[name=kind]').value,
        address: item.querySelector('[name=address]').value.trim(),
      };
      const planned = localInputToISO(item.querySelector('[name=planned_at]').value);
      if (planned) stage.planned_at = planned;
      return stage;
    });
    const body = { title: this.title.value.trim(), notes: this.notes.value, stages };
    if (this.driver.value) body.driver_id = Number(this.driver.value);
    return body;
  }

  async submitted(event) {
    event.preventDefault();
    const body = this.collect();
    if (!body.title) {
      this.error.textContent = 'Give the order a title.';
      this.title.focus();
      return;
    }
    this.submit.disabled = true;
    this.error.textContent = '';
    // A create whose answer was lost (a dropped connection, a 502, a 503 that committed) is
    // retried by clicking again: with the same key the server creates the order once and answers
    // the retry with it. Changed fields are another order, a new key, unless the last try is
    // unconfirmed: the dispatcher who fixes a typo in it before trying again means the same order,
    // and with a new key an order made by the lost try was made twice (found by a review,
    // 2026-12-07). With the same key the server refuses the changed body if that try was made
    // (422 `idempotency_key_reused`, said below), and makes it once if it was not.
    const json = JSON.stringify(body);
    if (!this.attempt || (!this.attempt.unconfirmed && !this.attempt.made && this.attempt.json !== json)) {
      this.attempt = { key: newIdempotencyKey(), json };
    }
    this.attempt.json = json;
    const attempt = this.attempt;
    try {
      const order = await this.api.createOrder(body, attempt.key);
      this.attempt = null;
      this.startOver.hidden = true;
      this.element.close();
      this.onCreated(order);
    } catch (error) {
      // No answer, a server failure, or the first try still running: it may have been made.
      // Once so, it stays so until an answer says otherwise (a later refusal cannot undo it).
      attempt.unconfirmed ||= error.status === 0 || error.status >= 500 || error.code === 'idempotency_key_in_use';
      if (error.code === 'idempotency_key_reused') {
        // The unconfirmed try was made, with the fields as they were then: this key is spent.
        attempt.unconfirmed = false;
        attempt.made = true;
        this.error.textContent = ORDER_MADE;
        this.startOver.hidden = false;
      } else {
        // Refused (a field the server turned down, answered now or replayed for this key): that
        // settles the try, nothing was made, and the corrected fields are a new try (a new key).
        // Kept unconfirmed, the corrected body went with the spent key and was told "created"
        // (found by a review, 2026-12-07).
        if (error.status >= 400 && error.status < 500 && error.status !== 401 && error.status !== 429
          && !String(error.code).startsWith('idempotency_key')) attempt.unconfirmed = false;
        if (error.status !== 401) this.error.textContent = error.message;
      }
    } finally {
      this.submit.disabled = false;
    }
  }
}
