// DOM helpers. Every piece of data reaches the page as a text node or a property:
// nothing here parses HTML, so an order titled `<img src=x onerror=…>` stays text.

// Properties set as DOM properties rather than attributes (their live state matters).
const PROPERTIES = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'required', 'tabIndex']);
// Names that could smuggle markup, script or inline style (the CSP forbids inline style anyway).
const FORBIDDEN = new Set(['innerHTML', 'outerHTML', 'srcdoc', 'style']);

/**
 * Creates an element: `h('a', {href: '#/orders', class: 'x', onclick: fn}, 'text', child)`.
 * Strings and numbers become text nodes; arrays are flattened; null/undefined/false are skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (FORBIDDEN.has(name)) throw new Error(`dom.h: "${name}" is not allowed`);
    if (name === 'class') {
      el.className = value;
    } else if (name === 'text') {
      el.textContent = String(value);
    } else if (name === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (name.startsWith('on')) {
      // Only functions: a string here would be an inline handler (blocked by CSP, and a smell).
      if (typeof value !== 'function') throw new Error(`dom.h: ${name} must be a function`);
      el.addEventListener(name.slice(2), value);
    } else if (PROPERTIES.has(name)) {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (strings become text nodes). */
export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

/** Replaces all children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Sets text only when it changed, so unchanged cells are not touched (no reflow, no flicker). */
export function setText(el, text) {
  const value = text === null || text === undefined ? '' : String(text);
  if (el.textContent !== value) el.textContent = value;
}

/** `<time datetime=iso>` with a readable label. */
export function timeElement(iso, label) {
  return h('time', { datetime: iso ?? '' }, label);
}

/**
 * Highlights an element briefly (a background fade, see `.flash` in styles.css).
 * Only colour changes: the row keeps its size, so nothing around it moves.
 */
export function flash(el) {
  el.classList.remove('flash');
  // Reading offsetWidth restarts the CSS animation when the same row changes twice in a row.
  void el.offsetWidth;
  el.classList.add('flash');
}

document.addEventListener('animationend', (event) => {
  if (event.animationName === 'flash') event.target.classList.remove('flash');
});

/**
 * Gives a <select> these `[value, label]` options and selects `value`. The options are rebuilt
 * only when they differ, so a refetch does not disturb a select the user is looking at.
 */
export function setOptions(select, pairs, value) {
  const signature = JSON.stringify(pairs);
  if (select.dataset.options !== signature) {
    replace(select, options(pairs, value));
    select.dataset.options = signature;
  }
  select.value = value ?? '';
}

/** Builds `<option>`s from `[value, label]` pairs and selects `selected`. */
export function options(pairs, selected) {
  return pairs.map(([value, label]) =>
    h('option', { value: String(value), selected: String(value) === String(selected ?? '') }, label));
}
