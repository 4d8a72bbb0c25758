// How the panel talks back: an error banner (role=alert), polite announcements for screen
// readers, and the confirmation dialog for destructive actions.
import { h, replace } from './dom.js';

const alerts = () => document.getElementById('alerts');

/** Shows an error banner until dismissed or replaced. `message` is plain text. */
export function showError(message) {
  const banner = h('div', { class: 'alert alert-error' },
    h('p', {}, message),
    h('button', { type: 'button', class: 'link-button', onclick: () => banner.remove() }, 'Dismiss'));
  replace(alerts(), banner);
}

export function clearErrors() {
  alerts().replaceChildren();
}

/** A short message for screen readers (and nothing visible). */
export function announce(message) {
  const region = document.getElementById('announcer');
  region.textContent = '';
  // A fresh text node a tick later makes screen readers announce a repeated message too.
  setTimeout(() => { region.textContent = message; }, 50);
}

/**
 * Asks before something is destroyed. Resolves true only on an explicit "confirm"; Escape and
 * "Keep it" resolve false. The dialog is native <dialog>: focus is trapped and returned for us.
 */
export function confirmAction({ title, message, confirmLabel }) {
  const dialog = document.getElementById('confirm-dialog');
  if (dialog.open) return Promise.resolve(false); // one question at a time
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-message').textContent = message;
  document.getElementById('confirm-ok').textContent = confirmLabel;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true });
    dialog.showModal();
    document.getElementById('confirm-cancel').focus(); // the safe choice is the default
  });
}
