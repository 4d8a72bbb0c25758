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
    this.title.value = order.title ?? '';
    this.notes.value = order.notes ?? '';
    this.element.hidden = false;
    this.title.focus();
  }

  close() {
    this.element.hidden = true;
    this.etag = null;
  }

  /** After a 412 the user has seen the current version: the next save is meant for it. */
  rebase(etag) {
    this.etag = etag;
  }

  async submitted(event) {
    event.preventDefault();
    const fields = { title: this.title.value.trim(), notes: this.notes.value };
    this.saveButton.disabled = true;
    try {
      await this.save(fields, this.etag);
    } finally {
      this.saveButton.disabled = false;
    }
  }
}
