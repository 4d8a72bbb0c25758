// Wording and formatting shared by the views.

export const STATUSES = ['new', 'assigned', 'accepted', 'in_progress', 'completed', 'cancelled'];

const STATUS_LABELS = {
  new: 'New',
  assigned: 'Assigned',
  accepted: 'Accepted',
  in_progress: 'In progress',
  completed: 'Completed',
  cancelled: 'Cancelled',
};

export const STAGE_KINDS = [['pickup', 'Pickup'], ['delivery', 'Delivery'], ['stop', 'Stop']];

export function statusLabel(status) {
  return STATUS_LABELS[status] ?? String(status);
}

export function stageKindLabel(kind) {
  return STAGE_KINDS.find(([value]) => value === kind)?.[1] ?? String(kind);
}

/** Whether the order is still being worked on (shown on the fleet board). */
export function isActive(status) {
  return status !== 'completed' && status !== 'cancelled';
}

const dateTime = new Intl.DateTimeFormat(undefined, {
  day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit',
});
const fullDateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** Short local date and time, e.g. "30 Nov, 10:15"; empty for missing or unparsable input. */
export function shortTime(iso) {
  const date = iso ? new Date(iso) : null;
  return date && !Number.isNaN(date.getTime()) ? dateTime.format(date) : '';
}

export function longTime(iso) {
  const date = iso ? new Date(iso) : null;
  return date && !Number.isNaN(date.getTime()) ? fullDateTime.format(date) : '';
}

/** `datetime-local` input value (local wall time) → ISO 8601 in UTC, or null when empty. */
export function localInputToISO(value) {
  if (!value) return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

/** How a driver is named on screen. */
export function driverLabel(driver) {
  return driver.name || driver.email;
}

/** The driver's display name from a `Map(id → driver)`; "Unassigned" when there is none. */
export function driverName(drivers, driverId) {
  if (driverId === null || driverId === undefined) return 'Unassigned';
  const driver = drivers.get(driverId);
  return driver ? driverLabel(driver) : `Driver #${driverId}`;
}

/** `[value, label]` pairs for a driver <select>, after the given leading choices. */
export function driverChoices(drivers, ...leading) {
  return [...leading, ...[...drivers.values()].map((d) => [String(d.id), driverLabel(d)])];
}

const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

/** Local wall-clock time with seconds, e.g. "10:15:03"; empty for missing or unparsable input. */
export function clockTime(iso) {
  const date = iso ? new Date(iso) : null;
  return date && !Number.isNaN(date.getTime()) ? clock.format(date) : '';
}

/**
 * What the assigned driver's device shows of `order` (SPEC §2, "Receipts"): null without a
 * driver; `{ seen: true, text: "Seen 10:15:03", iso }` when it reported the current version;
 * otherwise `{ seen: false, text: "Not seen yet — changed 10:14:50", iso }` (since when the
 * current version waits to be seen). A receipt of another driver never counts.
 */
export function receiptOf(order) {
  if (order.driver_id === null || order.driver_id === undefined) return null;
  const seen = order.seen;
  if (seen && seen.version === order.version && seen.driver_id === order.driver_id) {
    return { seen: true, text: `Seen ${clockTime(seen.at)}`, iso: seen.at, title: longTime(seen.at) };
  }
  return {
    seen: false, text: `Not seen yet — changed ${clockTime(order.updated_at)}`, iso: order.updated_at,
    title: longTime(order.updated_at),
  };
}

/** A key that changes whenever what `receiptOf` shows changes. */
export function receiptKey(order) {
  const receipt = receiptOf(order);
  return receipt ? `${receipt.seen}|${receipt.iso}` : '';
}
