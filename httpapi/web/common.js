// Shared helpers of the storefront and the dashboard: DOM building without innerHTML, the
// server clock, the JSON API client and human messages for problem+json codes.

// h builds an element. props: class, text, hidden, data (dataset), on<event> handlers, and any
// other attribute. Children are nodes or strings (strings become text nodes, never markup).
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'data') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined && c !== false) el.append(c);
  }
  return el;
}

// svg builds an SVG element; attributes only, children are SVG nodes or strings.
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c);
  return el;
}

export const byId = (id) => document.getElementById(id);

// setText changes a node's text only when it differs (no needless layout, and screen readers
// are not re-notified).
export function setText(el, text) {
  text = String(text);
  if (el.textContent !== text) el.textContent = text;
}

// parseTime parses any RFC 3339 time (0–9 fraction digits) to epoch milliseconds.
export function parseTime(s) {
  if (typeof s !== 'string') return NaN;
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/i.exec(s.trim());
  if (!m) return Date.parse(s);
  const frac = ((m[2] || '') + '000').slice(0, 3);
  return Date.parse(`${m[1]}.${frac}${m[3].toUpperCase()}`);
}

// ServerClock estimates the server's clock. Each sample is server_time − Date.now() at the
// moment the answer arrived; the answer's travel time only makes a sample smaller, so the
// estimate is the largest of the recent samples.
export class ServerClock {
  constructor() { this.samples = []; this.offset = 0; this.known = false; }
  sample(serverTime) {
    const t = parseTime(serverTime);
    if (!Number.isFinite(t)) return;
    this.samples.push(t - Date.now());
    if (this.samples.length > 8) this.samples.shift();
    this.offset = Math.max(...this.samples);
    this.known = true;
  }
  now() { return Date.now() + this.offset; }
  until(time) { return parseTime(time) - this.now(); }
}

// fmtCountdown: 75_000 → "1:15", 3_725_000 → "1:02:05"; never negative.
export function fmtCountdown(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const hh = Math.floor(s / 3600), mm = Math.floor((s % 3600) / 60), ss = s % 60;
  const two = (n) => String(n).padStart(2, '0');
  if (s >= 86400) return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  return hh ? `${hh}:${two(mm)}:${two(ss)}` : `${mm}:${two(ss)}`;
}

// fmtSeconds: 30 → "30 s", 90 → "1 min 30 s", 7200 → "2 h".
export function fmtSeconds(secs) {
  const s = Math.max(0, Math.round(secs));
  const parts = [];
  if (s >= 86400) parts.push(`${Math.floor(s / 86400)} d`);
  if (s % 86400 >= 3600) parts.push(`${Math.floor((s % 86400) / 3600)} h`);
  if (s % 3600 >= 60) parts.push(`${Math.floor((s % 3600) / 60)} min`);
  if (s % 60 || !parts.length) parts.push(`${s % 60} s`);
  return parts.slice(0, 2).join(' ');
}

export function fmtMoney(cents) {
  const n = Number(cents) || 0;
  const whole = Math.trunc(Math.abs(n) / 100).toLocaleString('en-US');
  return `${n < 0 ? '−' : ''}${whole}.${String(Math.abs(n) % 100).padStart(2, '0')}`;
}

// plural: plural(1, 'unit') → "1 unit", plural(2, 'unit') → "2 units", plural(3, 'buyer',
// 'buyers') → "3 buyers". Counts are grouped for reading (10,000).
export function plural(n, one, many = `${one}s`) {
  const k = Number(n) || 0;
  return `${k.toLocaleString('en-US')} ${k === 1 ? one : many}`;
}

// fmtPrice formats an amount in the smallest unit of an ISO 4217 currency (the sale's
// `currency`, lower case on the wire): fmtPrice(99900, 'usd') → "$999.00", fmtPrice(500,
// 'jpy') → "¥500". The number of decimals is the currency's own (Intl knows them); a currency
// the browser does not know, or none, shows the plain amount with two decimals and the code.
export function fmtPrice(cents, currency) {
  const code = typeof currency === 'string' && /^[a-z]{3}$/.test(currency) ? currency.toUpperCase() : '';
  if (code) {
    try {
      const f = new Intl.NumberFormat('en-US', { style: 'currency', currency: code });
      const digits = f.resolvedOptions().maximumFractionDigits;
      return f.format((Number(cents) || 0) / 10 ** digits);
    } catch { /* an unknown code: below */ }
  }
  return code ? `${fmtMoney(cents)} ${code}` : fmtMoney(cents);
}

export function fmtDateTime(s) {
  const t = parseTime(s);
  return Number.isFinite(t) ? new Date(t).toLocaleString() : String(s ?? '');
}

// randomKey is an Idempotency-Key: 128 random bits in hex (crypto.randomUUID needs a secure
// context; getRandomValues does not).
export function randomKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ApiError is a failed call: an HTTP problem (status, code, detail, retryAfter seconds) or,
// with status 0, a network failure.
export class ApiError extends Error {
  constructor(status, problem = {}, retryAfter = null) {
    super(problem.detail || problem.title || (status ? `HTTP ${status}` : 'network error'));
    this.status = status;
    this.code = problem.code || (status ? '' : 'network');
    this.detail = problem.detail || '';
    this.retryAfter = retryAfter;
  }
  get retryable() {
    return this.status === 0 || this.code === 'unavailable' || this.code === 'rate_limited' || this.status === 502 || this.status === 504;
  }
}

// api calls the JSON API and returns the decoded body (with the HTTP status as a hidden
// property `_status`), or throws ApiError.
export async function api(method, path, { token, body, headers = {}, signal } = {}) {
  const hdr = { Accept: 'application/json', ...headers };
  if (token) hdr.Authorization = `Bearer ${token}`;
  if (body !== undefined) hdr['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(path, { method, headers: hdr, body: body === undefined ? undefined : JSON.stringify(body), signal, cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0);
  }
  let data = null;
  const text = await resp.text().catch(() => '');
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const ra = resp.headers.get('Retry-After');
    const secs = ra !== null && /^\d+$/.test(ra.trim()) ? Number(ra) : null;
    throw new ApiError(resp.status, data && typeof data === 'object' ? data : {}, secs);
  }
  // Every success of this API but 204 (a deleted sale) has a JSON body: one that cannot be
  // read (a connection cut after the status line) leaves the outcome unknown, as a network
  // error does.
  if (resp.status === 204) data = {};
  if (!data || typeof data !== 'object') throw new ApiError(0);
  Object.defineProperty(data, '_status', { value: resp.status });
  return data;
}

// listPages reads the first `pages` pages of GET /api/v1/sales, each after the one before
// (query: all, status), with `get` (api, or the dashboard's admin call): the sales in the
// list's order (starts_at, then id), whether more pages follow, and the server's clock.
export async function listPages(get, query, pages) {
  let sales = [];
  let cursor = '';
  let serverTime = null;
  for (let i = 0; i < pages; i++) {
    const q = new URLSearchParams(query);
    if (cursor) q.set('cursor', cursor);
    const qs = q.toString();
    const r = await get(`/api/v1/sales${qs ? `?${qs}` : ''}`);
    sales = sales.concat(r.sales || []);
    serverTime = r.server_time;
    cursor = r.next_cursor || '';
    if (!cursor) break;
  }
  return { sales, more: cursor !== '', serverTime };
}

// messageFor turns an error into a sentence for a person. Every code of docs/API.md has its
// own sentence, so a shopper never sees a raw code or the server's detail text (which names ids
// and fields); the dashboard (context 'admin') adds the detail where it tells an operator what
// to fix.
export function messageFor(err, context = '') {
  if (!(err instanceof ApiError)) return 'Something went wrong in this page. Reload it and try again.';
  const wait = err.retryAfter ?? 1;
  const admin = context === 'admin';
  const detail = admin && err.detail ? ` (${err.detail})` : '';
  switch (err.code) {
    case 'network': return 'Cannot reach the shop. Check your connection; we keep trying.';
    case 'sold_out': return 'Sold out: every unit has been sold.';
    case 'limit_exceeded': return 'You already have as many units of this sale as one buyer may have.';
    case 'queue_full': return 'Every unit is held by other buyers and the waiting line is full. Unpaid holds come back: try again in a moment.';
    case 'rate_limited': return `Too many attempts. Wait ${plural(wait, 'second')} before trying again.`;
    case 'ended': return 'This sale has ended.';
    case 'not_started': return 'This sale has not started yet.';
    case 'hold_expired': return 'Your hold has ended, so it can no longer be paid.';
    case 'invalid_token': return 'Your purchase link does not belong to this account. Try again.';
    case 'unauthorized': return admin ? 'Enter the admin token first.' : 'Please sign in (your session is missing or has expired).';
    case 'forbidden': return admin ? 'The admin token was refused.' : 'You are not allowed to do that.';
    case 'unavailable': return `The shop is busy recovering. Retrying in ${plural(wait, 'second')}…`;
    case 'not_found': return context === 'sale' ? 'Sale not found: there is no sale at this address.' : `Not found: it may have been removed.${detail}`;
    case 'conflict': return admin ? `Not possible in the current state${detail}.` : 'That is not possible any more: the page shows what changed.';
    case 'too_large': return 'The request is too large.';
    case 'invalid_argument': return admin ? `Invalid input${detail || ': check the fields'}.` : 'That request was not valid. Reload the page and try again.';
    case 'invalid_signature': return 'The payment notice could not be verified.';
    case 'admission_required': return 'This sale has a waiting room: wait for your turn there, then buy within the time it gives you.';
    case 'pow_required': return 'Joining this waiting room needs a quick check by your browser. Reload the page and try again.';
    case 'invalid_pow': return 'Your browser\'s check did not pass (it may have taken too long). Try again.';
    case 'internal': return 'The shop hit an error. Try again in a moment.';
    default: return err.status ? `The shop could not do that (error ${err.status}). Try again in a moment.` : 'Something went wrong. Try again in a moment.';
  }
}

// jwtClaims reads the claims of a JWT without verifying them (for display only), or null.
export function jwtClaims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const claims = JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
    return claims && typeof claims === 'object' ? claims : null;
  } catch {
    return null;
  }
}

// jwtSubject reads the user id of a JWT, its `claim` (default `sub`), without verifying it.
export function jwtSubject(token, claim = 'sub') {
  const v = (jwtClaims(token) || {})[claim];
  return typeof v === 'string' ? v : '';
}

export const store = {
  get(key, fallback = null) {
    try { const v = localStorage.getItem(key); return v === null ? fallback : JSON.parse(v); } catch { return fallback; }
  },
  set(key, value) {
    try { if (value === null || value === undefined) localStorage.removeItem(key); else localStorage.setItem(key, JSON.stringify(value)); } catch { /* private mode */ }
  },
};
