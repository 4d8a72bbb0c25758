// The login page: email + password → token in sessionStorage.
import { h } from './dom.js';

const DRIVER_TURNED_AWAY = 'This panel is for dispatchers. Drivers use the Waybill app.';

export class LoginView {
  /** `onLoggedIn({token, user})` is called with a dispatcher session; `notice` explains why we are here. */
  constructor({ api, onLoggedIn, notice = '' }) {
    this.api = api;
    this.onLoggedIn = onLoggedIn;
    this.notice = notice;
  }

  mount(main) {
    this.error = h('p', { class: 'form-error', id: 'login-error', role: 'alert' });
    this.email = h('input', {
      id: 'login-email', name: 'email', type: 'email', autocomplete: 'username', required: true,
    });
    this.password = h('input', {
      id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true,
    });
    this.submit = h('button', { type: 'submit', class: 'primary' }, 'Log in');
    const form = h('form', { class: 'login-form', 'aria-describedby': 'login-error', onsubmit: (e) => this.submitted(e) },
      h('h1', {}, 'Log in to Waybill'),
      this.notice ? h('p', { class: 'notice' }, this.notice) : null,
      h('div', { class: 'field' }, h('label', { for: 'login-email' }, 'Email'), this.email),
      h('div', { class: 'field' }, h('label', { for: 'login-password' }, 'Password'), this.password),
      this.error,
      h('div', { class: 'button-row' }, this.submit));
    main.replaceChildren(h('section', { class: 'login-page', 'aria-label': 'Log in' }, form));
    this.email.focus();
  }

  update() {}
  unmount() {}

  async submitted(event) {
    event.preventDefault();
    this.error.textContent = '';
    this.submit.disabled = true;
    this.submit.textContent = 'Logging in…';
    try {
      const { token, user } = await this.api.login(this.email.value.trim(), this.password.value);
      // A server older than `role` in the login makes the driver a token anyway: turned away here.
      if (user?.role !== 'dispatcher') {
        this.fail(DRIVER_TURNED_AWAY);
        return;
      }
      this.password.value = '';
      this.onLoggedIn({ token, user });
    } catch (error) {
      if (error.status === 401) this.fail('Wrong email or password.');
      else if (error.code === 'wrong_role') this.fail(DRIVER_TURNED_AWAY);
      else this.fail(error.message);
    } finally {
      this.submit.disabled = false;
      this.submit.textContent = 'Log in';
    }
  }

  fail(message) {
    this.error.textContent = message;
    this.password.select();
    this.password.focus();
  }
}
