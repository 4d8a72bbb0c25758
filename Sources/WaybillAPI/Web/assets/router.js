// Hash routing (#/login, #/orders, #/orders/42, #/fleet): the server only has to serve `/`,
// and the route never reaches the server's logs.

/** `{name, orderId, query}` for a hash such as `#/orders/42?status=new`. */
export function parseRoute(hash = location.hash) {
  const [path, search = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean);
  const query = Object.fromEntries(new URLSearchParams(search));
  if (parts[0] === 'login') return { name: 'login', query };
  if (parts[0] === 'fleet') return { name: 'fleet', query };
  if (parts[0] === 'orders' && /^\d+$/.test(parts[1] ?? '')) {
    return { name: 'orders', orderId: Number(parts[1]), query };
  }
  if (parts[0] === 'orders' || parts.length === 0) return { name: 'orders', orderId: null, query };
  return { name: 'not-found', query };
}

/** Builds a hash from a path and query (empty values are left out). */
export function routeHash(path, query = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== '' && value !== null && value !== undefined) params.set(key, value);
  }
  const search = params.toString();
  return `#${path}${search ? `?${search}` : ''}`;
}

export function navigate(path, query) {
  const hash = routeHash(path, query);
  if (location.hash !== hash) location.hash = hash;
}
