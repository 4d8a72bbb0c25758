// "Edit order": title and notes of the open order, saved with PATCH and `If-Match`.
//
// The form remembers the version it was opened on and keeps it while the detail beside it
// refreshes live: saving a draft made on an older version must not silently replace what
// someone else saved meanwhile. The server answers 412 then; the detail loads the current
// version, the draft stays in the form, and saving again is the user's conscious choice.
import { h } from './dom.js';

export class OrderEditor {
  /** `save(fields, etag)` resolves when saved and throws the ApiError otherwise. */
  constructor({ save }) {
    this.save = save;
    this.etag = null;
    this.title = h('input', { id: 'edit-title', name: 'title', required: true, maxlength: '200', autocomplete: 'off' });
    this.notes = h('textarea', { id: 'edit-notes', name: 'notes', rows: '4' });
    this.saveButton = h('button', { type: 'submit', class: 'primary', id: 'save-edit' }, 'Save changes');
    this.element = h('form', {
      class: 'edit-form', id: 'edit-form', hidden: true, 'aria-labelledby': 'edit-heading',
      onsubmit: (e) => this.submitted(e),
    },
    h('h3', { id: 'edit-heading' }, 'Edit order'),
    h('div', { class: 'field' }, h('label', { for: 'edit-title' }, 'Title'), this.title),
    h('div', { class: 'field' }, h('label', { for: 'edit-notes' }, 'Notes'), this.notes),
    h('div', { class: 'button-row' },
      h('button', { type: 'button', id: 'cancel-edit', onclick: () => this.close() }, 'Cancel'),
      this.saveButton));
  }

  get isOpen() { return !this.element.hidden; }

  /** Starts editing `order` as shown, at the version `etag` names. */
  open(order, etag) {
    this.etag = etag;
    this.base = asShown(order); // what the form started from, as its controls read it back
    this.title.value = this.base.title;
    this.notes.value = this.base.notes;
    this.element.hidden = false;
    this.title.focus();
  }

  close() {
    this.element.hidden = true;
    this.etag = null;
  }

  /**
   * After a 412 the user has seen the current version (`order`): the next save is meant for it.
   * A field the user did not touch takes the current value, so saving again cannot put back what
   * someone else changed in it; the user's own edits stay in the form.
   */
  rebase(etag, order) {
    this.etag = etag;
    if (!order || !this.base) return;
    const current = asShown(order);
    if (this.title.value.trim() === this.base.title) this.title.value = current.title;
    if (this.notes.value === this.base.notes) this.notes.value = current.notes;
    this.base = current;
  }

  async submitted(event) {
    event.preventDefault();
    // Only what the user changed: a field left alone is not written back over someone else's.
    const fields = {};
    const title = this.title.value.trim();
    if (title !== this.base?.title) fields.title = title;
    if (this.notes.value !== this.base?.notes) fields.notes = this.notes.value;
    if (Object.keys(fields).length === 0) {
      this.close(); // nothing changed: nothing to save
      return;
    }
    this.saveButton.disabled = true;
    try {
      await this.save(fields, this.etag);
    } finally {
      this.saveButton.disabled = false;
    }
  }
}

/**
 * The order's title and notes as the form's controls give them back: a text input drops line
 * breaks and a textarea reads CR LF and CR as LF. Compared with the raw server text, a field the
 * user never touched would look changed (and be written back after a 412).
 */
function asShown(order) {
  return {
    title: (order.title ?? '').replace(/[\r\n]/g, '').trim(),
    notes: (order.notes ?? '').replace(/\r\n?/g, '\n'),
  };
}
