// The connection indicator in the header: live / connecting / reconnecting in N s / polling only.
// The label is in a polite live region and changes only with the state; the countdown ticks in
// an aria-hidden element so a screen reader is not told every second.

const LABELS = {
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting',
  polling: 'Polling only',
  stopped: 'Offline',
};

export class ConnectionIndicator {
  constructor(root = document.getElementById('connection')) {
    this.root = root;
    this.label = root.querySelector('#connection-label');
    this.countdown = root.querySelector('#connection-countdown');
    this.retryButton = root.querySelector('#connection-retry');
    this.timer = null;
    this.onRetry = null;
    this.retryButton.addEventListener('click', () => this.onRetry?.());
  }

  show({ state, retryAt }) {
    clearInterval(this.timer);
    this.timer = null;
    this.root.dataset.state = state;
    const label = LABELS[state] ?? state;
    if (this.label.textContent !== label) this.label.textContent = label;
    this.retryButton.hidden = !(state === 'reconnecting' || state === 'polling');
    this.root.title = state === 'polling'
      ? 'The live link is down; the panel refreshes every 15 seconds.'
      : '';
    if (state === 'reconnecting' && retryAt) {
      const tick = () => {
        const seconds = Math.max(0, Math.ceil((retryAt - performance.now()) / 1000));
        this.countdown.textContent = seconds > 0 ? `in ${seconds} s` : 'now…';
      };
      tick();
      this.timer = setInterval(tick, 250);
    } else {
      this.countdown.textContent = state === 'reconnecting' ? '…' : '';
    }
  }
}
