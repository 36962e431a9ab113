// The dashboard: every sale's stock, and for the selected sale its live gauges (the events
// stream, or polling), restock and close, the audit, buys per second by outcome (an SVG
// chart drawn here) and the holds about to expire.

import {
  api, ApiError, byId, fmtCountdown, fmtMoney, fmtPrice, h, listPages, messageFor, parseTime, plural, ServerClock, setText, store,
  svg,
} from 'seckill/common';
import { SaleFeed } from 'seckill/sse';

const TOKEN_KEY = 'seckill.admin';
const OUTCOMES = [
  ['held', '#2e9d4f'], ['queued', '#8e44ad'], ['sold_out', '#7d8590'], ['limit_exceeded', '#e67e22'],
  ['queue_full', '#c0392b'], ['rate_limited', '#f1c40f'], ['ended', '#34495e'], ['not_started', '#95a5a6'],
  ['invalid_token', '#8d6e63'], ['replayed', '#5dade2'], ['other', '#1d2126'],
];
const COLOR = Object.fromEntries(OUTCOMES);
// WORD is how the page names a buy's outcome or a sale's status: words, not the API's codes
// (the codes stay in data-* attributes and the legend's test ids).
const WORD = {
  held: 'held', queued: 'queued', sold_out: 'sold out', limit_exceeded: 'over the per-user limit',
  queue_full: 'queue full', rate_limited: 'rate limited', ended: 'ended', not_started: 'not started yet',
  invalid_token: 'bad purchase link', replayed: 'retried (same key)', other: 'other', upcoming: 'upcoming', active: 'active',
};
const word = (k) => WORD[k] || String(k).replace(/_/g, ' ');
const WINDOW = 300; // seconds of activity the server keeps

const A = {
  token: store.get(TOKEN_KEY, '') || '',
  clock: new ServerClock(),
  selected: '',
  sale: null,
  feed: null,
  rows: new Map(), // sale id → table row parts
  listPages: 1, // pages of the sales table shown: one more per "More sales"
  timers: [],
  activity: null, // last activity answer
  activityMissing: false,
  closeArmed: 0,
  gen: 0, // bumps on every selection: answers for an older one are dropped
  span: WINDOW, // seconds the chart shows: 60 or 300
  checking: null, // a promise while a token being saved is checked: admin calls wait for it
  auditBusy: false, // an audit call is in flight
  auditAt: 0, // when the last audit call started (Date.now())
  created: null, // the "Created sale …" message, whose countdown tick() keeps current
};

function announce(text, kind = 'info') {
  const el = byId('status');
  el.className = `status ${kind}`;
  el.textContent = '';
  el.append(text);
}

const refusal = (e) => e instanceof ApiError && (e.status === 401 || e.status === 403);
const REFUSED = 'The server refused the admin token: the audit, the activity and every action need the '
  + 'SECKILL_ADMIN_TOKEN the server runs with. Enter it above.';

// adminCall calls an admin endpoint with the saved token. A refusal (401/403) shows at the top
// of the page until an admin call succeeds: every admin panel depends on it.
async function adminCall(method, path, body) {
  if (A.checking) await A.checking;
  if (!A.token) throw new ApiError(401, { code: 'unauthorized' });
  const token = A.token;
  try {
    const r = await api(method, path, { token, body });
    if (token === A.token) showRefused('');
    return r;
  } catch (e) {
    if (token === A.token && refusal(e)) showRefused(REFUSED);
    throw e;
  }
}

function showRefused(text) {
  const el = byId('admin-refused');
  el.hidden = !text;
  setText(el, text);
}

// ---- token ------------------------------------------------------------------------------

// A token is saved only once the server accepts it (an admin call answers): a wrong one is
// refused on the spot, not later inside a panel.
const TOKEN_CHECK = '/api/v1/refunds?status=refund_failed&limit=1';

function useToken(token) {
  A.token = token;
  store.set(TOKEN_KEY, token || null);
  if (!token) showRefused('');
  if (A.selected) { refreshAudit(A.gen); refreshActivity(A.gen); }
}

byId('admin-token').value = A.token;
byId('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const token = byId('admin-token').value.trim();
  if (!token) {
    useToken('');
    announce('Admin token cleared.');
    return;
  }
  const btn = byId('admin-save');
  btn.disabled = true;
  announce('Checking the admin token…');
  A.checking = (async () => {
    try {
      await api('GET', TOKEN_CHECK, { token });
    } catch (e) {
      if (refusal(e)) {
        announce(`The server refused this admin token, so it was not saved${A.token ? ' (the previous one is kept)' : ''}. `
          + 'Enter the SECKILL_ADMIN_TOKEN the server runs with.', 'error');
        return;
      }
      useToken(token);
      announce(`Admin token saved, but not checked: ${messageFor(e, 'admin')}`, 'warn');
      return;
    }
    showRefused('');
    useToken(token);
    announce('Admin token accepted and saved.', 'ok');
  })();
  A.checking.finally(() => { A.checking = null; btn.disabled = false; });
});
byId('more-sales').addEventListener('click', () => { A.listPages++; refreshSales(); });
byId('admin-forget').addEventListener('click', () => {
  byId('admin-token').value = '';
  useToken('');
  announce('Admin token forgotten.');
});

// ---- sales table ---------------------------------------------------------------------------

async function refreshSales() {
  let r;
  try {
    // With a token, every sale (unlisted ones included: bench sales, hidden ones); without
    // one, or with one the server refuses, the storefront's list.
    // The pages shown so far, by start: the first, and one more per "More sales".
    const admin = (path) => adminCall('GET', path);
    const shop = (path) => api('GET', path);
    r = A.token ? await listPages(admin, { all: 'true' }, A.listPages).catch((e) => {
      if (refusal(e)) return listPages(shop, {}, A.listPages);
      throw e;
    }) : await listPages(shop, {}, A.listPages);
  } catch (e) {
    announce(messageFor(e), 'error');
    return;
  }
  A.clock.sample(r.serverTime);
  const { sales } = r;
  byId('more-sales').hidden = !r.more;
  byId('no-sales').hidden = sales.length > 0;
  const body = byId('sale-rows');
  const seen = new Set();
  sales.forEach((s, i) => {
    seen.add(s.id);
    let row = A.rows.get(s.id);
    if (!row) {
      const cells = {};
      for (const k of ['status', 'sellable', 'available', 'held', 'sold', 'queued']) cells[k] = h('td', { data: { col: k } });
      const btn = h('button', { type: 'button', onclick: () => { location.hash = `#/sale/${encodeURIComponent(s.id)}`; } }, 'Show');
      const label = h('strong', {});
      const name = h('span', { class: 'muted small' });
      const clip = h('span', { class: 'clip', 'data-testid': 'sale-label' }, label, ' ', name);
      row = { cells, btn, label, name, clip, tr: h('tr', { 'data-testid': `sale-row-${s.id}`, data: { sale: s.id } },
        h('td', { class: 'sale-cell' }, clip), ...Object.values(cells), h('td', {}, btn)) };
      A.rows.set(s.id, row);
    }
    setRow(row, s);
    if (body.children[i] !== row.tr) body.insertBefore(row.tr, body.children[i] || null);
  });
  for (const [id, row] of A.rows) {
    if (!seen.has(id)) { row.tr.remove(); A.rows.delete(id); }
  }
  if (!A.selected && sales.length && !location.hash) select(sales[0].id);
}

// shortId keeps a long id's start and end (where bench ids differ), so the rows stay apart.
const shortId = (id) => (id.length > 24 ? `${id.slice(0, 10)}…${id.slice(-10)}` : id);

function setRow(row, s) {
  // The id, and the name unless it repeats the id (bench sales' names hold their ids); a long
  // one is cut with an ellipsis, whole in the tooltip.
  setText(row.label, shortId(s.id));
  setText(row.name, s.name && !s.name.includes(s.id) ? s.name : '');
  row.clip.title = s.name && s.name !== s.id ? `${s.id}: ${s.name}` : s.id;
  setText(row.cells.status, word(s.status));
  if (!row.unlisted) { // a sale kept off the storefront's list says so, before its id
    row.unlisted = h('span', { class: 'badge unlisted', 'data-testid': 'unlisted-badge', title: 'Not on the storefront’s list' }, 'unlisted');
    row.clip.prepend(row.unlisted, ' ');
  }
  row.unlisted.hidden = s.listed !== false;
  row.tr.dataset.listed = String(s.listed !== false);
  for (const k of ['sellable', 'available', 'held', 'sold', 'queued']) setText(row.cells[k], s.stock_state[k]);
  const on = s.id === A.selected;
  row.tr.classList.toggle('selected', on);
  row.btn.setAttribute('aria-pressed', String(on));
}

// ---- selected sale -------------------------------------------------------------------------

function route() {
  const m = /^#\/sale\/(.+)$/.exec(location.hash);
  if (!m) return;
  try { select(decodeURIComponent(m[1])); } catch { /* bad hash */ }
}

function select(id) {
  if (id === A.selected) return;
  A.feed?.stop();
  A.timers.forEach(clearTimeout);
  A.timers = [];
  const gen = ++A.gen;
  A.selected = id;
  A.sale = null;
  A.activity = null;
  A.activityMissing = false;
  for (const row of A.rows.values()) {
    const on = row.tr.dataset.sale === id;
    row.tr.classList.toggle('selected', on);
    row.btn.setAttribute('aria-pressed', String(on));
  }
  byId('detail').hidden = false;
  setText(byId('detail-title'), `Sale ${id}`);
  for (const k of ['available', 'held', 'sold', 'queued']) setText(byId(`g-${k}`), '–');
  byId('activity-chart').replaceChildren();
  byId('activity-legend').replaceChildren();
  byId('expiring').replaceChildren();
  setText(byId('audit-status'), '–');
  byId('audit-violations').replaceChildren();
  setText(byId('audit-when'), '');
  setText(byId('audit-numbers'), '');
  unknownLists('…');
  const mode = byId('feed-mode');
  mode.hidden = false;
  A.feed = new SaleFeed({
    saleId: id,
    onSale: (s) => { if (gen === A.gen) renderSale(s); },
    onMode: (m) => {
      setText(mode, { live: 'live', polling: 'polling', connecting: 'connecting…' }[m] || m);
      mode.className = `feed ${m}`;
    },
    onError: (e) => { if (gen === A.gen && e.code === 'not_found') announce(`There is no sale ${id}.`, 'error'); },
  });
  A.feed.start();
  loop(gen, 3000, refreshAudit);
  loop(gen, 1000, refreshActivity);
}

// loop runs fn(gen) now and again `every` ms (or what fn returns) after each run ends, while
// gen is selected.
function loop(gen, every, fn) {
  const slot = A.timers.push(0) - 1;
  const run = async () => {
    if (gen !== A.gen) return;
    const next = await fn(gen);
    if (gen === A.gen) A.timers[slot] = setTimeout(run, next || every);
  };
  run();
}

function renderSale(s) {
  A.clock.sample(s.server_time);
  A.sale = s;
  setText(byId('detail-title'), s.name === s.id ? `Sale ${s.id}` : `${s.name} (${s.id})`);
  const badge = byId('d-status');
  setText(badge, word(s.status));
  badge.className = `badge s-${s.status}`;
  badge.dataset.status = s.status;
  const st = s.stock_state;
  const n = Math.max(1, st.sellable);
  for (const k of ['available', 'held', 'sold', 'queued']) {
    const el = byId(`g-${k}`);
    setText(el, st[k]);
    el.dataset.value = String(st[k]);
    el.parentElement.querySelector('.seg').style.width = `${Math.min(100, (100 * st[k]) / n)}%`;
  }
  setText(byId('g-sellable'), `${st.sellable} sellable (stock ${s.stock}, holdback ${s.holdback}) · available + held + sold = ${st.available + st.held + st.sold}`);
  setText(byId('d-terms'), `${fmtPrice(s.price_cents, s.currency)} · limit ${plural(s.per_user_limit, 'unit')} per user · holds ${plural(s.hold_seconds, 'second')} · queue ≤ ${plural(s.queue_limit, 'buyer')}`
    + (s.listed === false ? ' · not on the storefront’s list' : ' · on the storefront'));
  setText(byId('listed-button'), s.listed === false ? 'Show on storefront' : 'Hide from storefront');
  const row = A.rows.get(s.id);
  if (row) setRow(row, s);
  tick();
  auditSoon();
}

// auditSoon refreshes the audit when the gauges change, at most every 1.5 s, so the audit
// shows the same moment as the gauges (its loop also refreshes it every 3 s).
function auditSoon() {
  if (!A.token || A.auditBusy || Date.now() - A.auditAt < 1500) return;
  refreshAudit(A.gen);
}

// unknownLists says the lists under the audit are unknown (why), rather than empty.
function unknownLists(why) {
  byId('expiring').replaceChildren();
  setText(byId('expiring-empty'), why === '…' ? '…' : `Unknown: ${why}`);
  byId('expiring-empty').hidden = false;
  byId('refunds-failed').replaceChildren();
  setText(byId('refunds-failed-empty'), why === '…' ? '…' : `Unknown: ${why}`);
  byId('refunds-failed-empty').hidden = false;
  hotUnknown(why === '…' ? '…' : `Unknown: ${why}`);
}

// clockTime is the server's time now, as the browser shows times of day.
const clockTime = () => new Date(A.clock.now()).toLocaleTimeString();

function tick() {
  const s = A.sale;
  if (s) {
    let text = '';
    if (s.status === 'upcoming') text = `starts in ${fmtCountdown(A.clock.until(s.starts_at))}`;
    else if (s.status === 'active' || s.status === 'sold_out') text = `ends in ${fmtCountdown(A.clock.until(s.ends_at))}`;
    setText(byId('d-when'), text);
  }
  for (const tr of byId('expiring').children) {
    const ms = A.clock.until(tr.dataset.expires);
    setText(tr.lastChild, ms > 0 ? fmtCountdown(ms) : 'expiring…');
  }
  if (A.closeArmed && Date.now() > A.closeArmed) disarmClose();
  tickCreated();
}

// tickCreated keeps the "Created sale …" message's countdown current; once the sale has
// started the message says so, and 10 s later it goes.
function tickCreated() {
  const c = A.created;
  if (!c) return;
  if (!c.el.isConnected) { A.created = null; return; } // another message replaced it
  const ms = A.clock.until(c.startsAt);
  if (ms > 0) {
    setText(c.el, `starts in ${fmtCountdown(ms)}`);
  } else if (!c.startedAt) {
    c.startedAt = Date.now();
    setText(c.el, 'on sale now');
  } else if (Date.now() - c.startedAt > 10_000) {
    A.created = null;
    announce('');
  }
}

// auditFailed shows why the audit is unknown, and clears what an older answer showed.
function auditFailed(text) {
  const el = byId('audit-status');
  setText(el, text);
  el.className = 'err-text';
  delete el.dataset.ok;
  setText(byId('audit-when'), '');
  setText(byId('audit-numbers'), '');
  byId('audit-violations').replaceChildren();
}

async function refreshAudit(gen) {
  if (!A.token) {
    auditFailed('Enter the admin token to see the audit.');
    unknownLists('the admin token is needed to list them.');
    return 3000;
  }
  if (A.auditBusy) return 3000;
  A.auditBusy = true;
  A.auditAt = Date.now();
  let a;
  try {
    a = await adminCall('GET', `/api/v1/sales/${encodeURIComponent(A.selected)}/audit`);
  } catch (e) {
    if (gen !== A.gen) return 0;
    auditFailed(refusal(e) ? 'Refused: the admin token is not the server’s.' : messageFor(e, 'admin'));
    if (refusal(e)) unknownLists('the admin token was refused.');
    return e.retryAfter ? e.retryAfter * 1000 : 3000;
  } finally {
    A.auditBusy = false;
  }
  if (gen !== A.gen) return 0;
  const el = byId('audit-status');
  const v = a.violations || [];
  setText(el, a.ok ? 'OK: no violation' : `${v.length} violation${v.length === 1 ? '' : 's'}`);
  el.className = a.ok ? 'ok-text' : 'err-text';
  el.dataset.ok = String(Boolean(a.ok));
  setText(byId('audit-when'), `as of ${clockTime()}`);
  byId('audit-violations').replaceChildren(...v.map((x) => h('li', { class: 'err-text' }, String(x))));
  const e = a.engine || {};
  const d = a.database || {};
  setText(byId('audit-numbers'), `engine: sellable ${e.sellable}, available ${e.available}, held ${e.held}, sold ${e.sold}, queued ${e.queued} · `
    + `database: sold ${d.sold}, paid units ${d.paid_units}, paid orders ${d.paid_orders}, refunds ${d.refunds}`
    + ` (owed ${d.refunds_required || 0}, pending ${d.refunds_pending || 0}, refunded ${d.refunded || 0}, failed ${d.refunds_failed || 0})`);
  await refreshFailedRefunds(gen);
  await refreshExport(gen);
  await refreshHot(gen);
  return 3000;
}

// refreshFailedRefunds lists the refunds the refunder gave up on (every sale), for the operator
// to settle by hand.
function refreshFailedRefunds(gen) {
  return showList(gen, '/api/v1/refunds?status=refund_failed&limit=50', 'refunds', 'refunds-failed', 'refunds-failed-empty',
    'None: every refund owed is paid back or on its way.', (f) => h('li', { data: { payment: f.payment_id } },
      `${f.payment_id} · ${f.sale_id || '?'} · ${f.user_id || 'unknown buyer'} · ${fmtMoney(f.amount_cents)} · `
      + `${f.attempts} attempt${f.attempts === 1 ? '' : 's'}: ${f.last_error || 'refused'}`));
}

// refreshExport shows where each sink of the event export stands on this instance: its lag
// (events not yet acknowledged and the age of the oldest), what it published and gave up on.
function refreshExport(gen) {
  return showList(gen, '/api/v1/export', 'sinks', 'export-sinks', 'export-empty',
    'No sink configured (SECKILL_EXPORT).', (s) => h('li', { data: { sink: s.sink, behind: String(s.far_behind) } },
      `${s.name} (${s.sink}) · lag ${s.lag_events} event${s.lag_events === 1 ? '' : 's'}, ${s.lag_seconds.toFixed(1)} s`
      + `${s.far_behind ? ' (far behind)' : ''} · published ${s.published} · dead letters ${s.dead_lettered}`
      + ` · failed attempts ${s.failures}`));
}

// refreshHot shows this instance's hot sales (the count, and the first 100 ids the server
// names) and its cold cache (the Redis engine's; the memory engine has none).
async function refreshHot(gen) {
  let r;
  try {
    r = await adminCall('GET', '/api/v1/hot');
  } catch (e) {
    if (gen !== A.gen) return;
    hotUnknown(`Unknown: ${messageFor(e, 'admin')}`);
    return;
  }
  if (gen !== A.gen) return;
  const sum = byId('hot-summary');
  sum.dataset.hot = String(r.hot);
  setText(sum, `${r.hot} hot sale${r.hot === 1 ? '' : 's'}`);
  const ids = r.sales || [];
  const more = r.hot > ids.length ? ` … and ${r.hot - ids.length} more` : '';
  setText(byId('hot-sales'), ids.length ? ids.join(', ') + more : '');
  const c = r.cold_cache || { entries: 0, max: 0 };
  const cold = byId('cold-summary');
  cold.dataset.entries = String(c.entries);
  cold.dataset.max = String(c.max);
  setText(cold, (c.max > 0 ? `cold cache: ${c.entries} / ${c.max}` : 'cold cache: none on this engine')
    + ` · cooled ${r.cooled} · loaded ${r.loaded}`);
}

// hotUnknown says why the hot and cold panel is unknown, and clears what an older answer showed.
function hotUnknown(text) {
  const sum = byId('hot-summary');
  delete sum.dataset.hot;
  setText(sum, text);
  setText(byId('hot-sales'), '');
  const cold = byId('cold-summary');
  delete cold.dataset.entries;
  delete cold.dataset.max;
  setText(cold, '');
}

// showList fills the list listId with item of each entry of the array under key in the answer
// to GET path, and the note emptyId with none when there is no entry, or with "Unknown" (and
// the list with nothing) when the call failed. An answer for an earlier selection than gen is
// dropped.
async function showList(gen, path, key, listId, emptyId, none, item) {
  const empty = byId(emptyId);
  let r;
  try {
    r = await adminCall('GET', path);
  } catch (e) {
    if (gen !== A.gen) return;
    byId(listId).replaceChildren();
    setText(empty, `Unknown: ${messageFor(e, 'admin')}`);
    empty.hidden = false;
    return;
  }
  if (gen !== A.gen) return;
  const list = r[key] || [];
  setText(empty, none);
  empty.hidden = list.length > 0;
  byId(listId).replaceChildren(...list.map(item));
}

// ---- activity -----------------------------------------------------------------------------

async function refreshActivity(gen) {
  if (!A.token) {
    setText(byId('activity-note'), 'Enter the admin token to see the activity.');
    byId('expiring').replaceChildren();
    setText(byId('expiring-empty'), 'Unknown: the admin token is needed to list them.');
    byId('expiring-empty').hidden = false;
    return 3000;
  }
  let r;
  try {
    r = await adminCall('GET', `/api/v1/sales/${encodeURIComponent(A.selected)}/activity`);
  } catch (e) {
    if (gen !== A.gen) return 0;
    if (e.status === 404 && A.sale) {
      A.activityMissing = true;
      setText(byId('activity-note'), 'This server does not report buy activity (the activity endpoint answered 404).');
      return 10_000;
    }
    setText(byId('activity-note'), refusal(e) ? 'Refused: the admin token is not the server’s.' : messageFor(e, 'admin'));
    byId('expiring').replaceChildren();
    setText(byId('expiring-empty'), `Unknown: ${refusal(e) ? 'the admin token was refused.' : messageFor(e, 'admin')}`);
    byId('expiring-empty').hidden = false;
    return e.retryAfter ? e.retryAfter * 1000 : 2000;
  }
  if (gen !== A.gen) return 0;
  A.clock.sample(r.server_time);
  A.activity = r;
  drawActivity(r);
  renderExpiring(r.expiring || []);
  return 1000;
}

// perSecond turns the buckets into `span` slots (oldest first) of outcome counts.
function perSecond(r, span) {
  const now = parseTime(r.server_time);
  const step = (r.interval_seconds || 1) * 1000;
  const slots = Array.from({ length: span }, () => ({}));
  for (const b of r.buckets || []) {
    const age = Math.floor((now - parseTime(b.at)) / step);
    const i = span - 1 - age;
    if (!(i >= 0 && i < span)) continue;
    for (const [k, n] of Object.entries(b.outcomes || {})) {
      const key = k in COLOR ? k : 'other';
      if (Number(n) > 0) slots[i][key] = (slots[i][key] || 0) + Number(n);
    }
  }
  return slots;
}

function niceCeil(x) {
  if (x <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function drawActivity(r) {
  const span = A.span;
  const slots = perSecond(r, span);
  const totals = slots.map((s) => Object.values(s).reduce((a, b) => a + b, 0));
  const peak = Math.max(0, ...totals);
  const top = niceCeil(peak);
  // One SVG unit per CSS pixel: labels keep their size on a phone.
  const W = Math.max(280, Math.round(byId('activity-chart').clientWidth || 640)), H = 200, L = 40, R = 8, T = 10, B = 22;
  const cw = (W - L - R) / span;
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const groups = Object.fromEntries(OUTCOMES.map(([k, c]) => [k, svg('g', { fill: c, 'data-outcome': k })]));
  slots.forEach((s, i) => {
    let acc = 0;
    for (const [k] of OUTCOMES) {
      const n = s[k];
      if (!n) continue;
      groups[k].append(svg('rect', { class: 'bar', x: (L + i * cw).toFixed(2), y: y(acc + n).toFixed(2), width: Math.max(cw - 0.3, 0.8).toFixed(2), height: (y(acc) - y(acc + n)).toFixed(2) }));
      acc += n;
    }
  });
  const grid = [];
  for (const v of [0, top / 2, top]) {
    grid.push(svg('line', { class: 'axis', x1: L, x2: W - R, y1: y(v), y2: y(v), 'stroke-dasharray': v ? '3 3' : null }));
    grid.push(svg('text', { x: L - 4, y: y(v) + 3, 'text-anchor': 'end' }, String(Math.round(v * 10) / 10)));
  }
  const tick = (span > 60 ? 60 : 15) * (W < 480 ? 2 : 1); // fewer labels on a narrow chart
  for (let ago = Math.floor(span / tick) * tick; ago >= 0; ago -= tick) {
    const x = L + (span - ago) * cw;
    const label = ago === 0 ? 'now' : span > 60 ? `−${ago / 60} min` : `−${ago} s`;
    grid.push(svg('text', { x: Math.min(x, W - R), y: H - 6, 'text-anchor': ago === 0 ? 'end' : 'middle' }, label));
  }
  const last = (secs) => {
    const sum = {};
    for (const s of slots.slice(-secs)) for (const [k, n] of Object.entries(s)) sum[k] = (sum[k] || 0) + n;
    return sum;
  };
  const minute = last(60);
  const all = last(span);
  const now10 = totals.slice(-10).reduce((a, b) => a + b, 0) / 10;
  const summary = `Buys per second over the last ${span > 60 ? `${span / 60} minutes` : `${span} seconds`}: now ${now10.toFixed(1)}/s, peak ${peak}/s. Last minute: `
    + (OUTCOMES.filter(([k]) => minute[k]).map(([k]) => `${minute[k]} ${word(k)}`).join(', ') || 'none');
  const chart = svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary, 'data-peak': peak, 'data-bars': totals.filter(Boolean).length },
    svg('title', {}, summary), ...grid, ...Object.values(groups));
  byId('activity-chart').replaceChildren(chart);
  setText(byId('activity-note'), `now ${now10.toFixed(1)} buys/s (last 10 s) · peak ${peak}/s`);
  byId('activity-legend').replaceChildren(...OUTCOMES.filter(([k]) => all[k]).map(([k, c]) => h('li', { 'data-testid': `legend-${k}` },
    h('span', { class: 'dot', style: `background:${c}` }), span > 60 ? `${word(k)}: ${minute[k] || 0} in the last minute, ${all[k]} in ${span / 60} min` : `${word(k)}: ${all[k]} in the last minute`)));
}

function renderExpiring(list) {
  const rows = list.map((res) => h('tr', { 'data-testid': 'expiring-row', data: { rid: res.id, expires: res.expires_at || '' } },
    h('td', { title: res.id }, `…${String(res.id).slice(-10)}`), h('td', {}, res.user_id), h('td', {}, String(res.quantity)), h('td', { class: 'countdown' })));
  byId('expiring').replaceChildren(...rows);
  setText(byId('expiring-empty'), 'No unpaid holds.');
  byId('expiring-empty').hidden = rows.length > 0;
  tick();
}

for (const btn of document.querySelectorAll('[data-span]')) {
  btn.addEventListener('click', () => {
    A.span = Number(btn.dataset.span);
    for (const b of document.querySelectorAll('[data-span]')) b.setAttribute('aria-pressed', String(b === btn));
    if (A.activity) drawActivity(A.activity);
  });
}
let chartWidth = 0;
window.addEventListener('resize', () => {
  const w = byId('activity-chart').clientWidth;
  if (A.activity && w !== chartWidth) { chartWidth = w; drawActivity(A.activity); }
});

// ---- actions ------------------------------------------------------------------------------

byId('restock-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const add = Number(byId('restock-amount').value);
  if (!A.selected || !(add >= 1)) return;
  try {
    const s = await adminCall('POST', `/api/v1/sales/${encodeURIComponent(A.selected)}/stock`, { add: Math.floor(add) });
    renderSale(s);
    announce(`Added ${plural(Math.floor(add), 'unit')} to ${s.id}.`, 'ok');
  } catch (e) {
    announce(messageFor(e, 'admin'), 'error');
  }
});

function disarmClose() {
  A.closeArmed = 0;
  setText(byId('close-button'), 'Close sale');
}

byId('close-button').addEventListener('click', async () => {
  if (!A.selected) return;
  if (!A.closeArmed) { // two clicks: closing rejects every queued buyer
    A.closeArmed = Date.now() + 5000;
    setText(byId('close-button'), 'Click again to close now');
    return;
  }
  disarmClose();
  try {
    const s = await adminCall('POST', `/api/v1/sales/${encodeURIComponent(A.selected)}/close`);
    renderSale(s);
    announce(`Sale ${s.id} is closed.`, 'ok');
  } catch (e) {
    announce(messageFor(e, 'admin'), 'error');
  }
});

// Listing on the storefront and deleting: a sale nobody has reserved in can be deleted; any
// other is refused by the server (409), and can be hidden instead.
byId('listed-button').addEventListener('click', async () => {
  if (!A.selected || !A.sale) return;
  const listed = A.sale.listed === false;
  try {
    const s = await adminCall('PATCH', `/api/v1/sales/${encodeURIComponent(A.selected)}`, { listed });
    renderSale(s);
    announce(listed ? `Sale ${s.id} is on the storefront again.` : `Sale ${s.id} is hidden from the storefront (its own link still works).`, 'ok');
  } catch (e) {
    announce(messageFor(e, 'admin'), 'error');
  }
});

function disarmDelete() {
  A.deleteArmed = 0;
  setText(byId('delete-button'), 'Delete sale');
}

byId('delete-button').addEventListener('click', async () => {
  const id = A.selected;
  if (!id) return;
  if (!A.deleteArmed || Date.now() > A.deleteArmed) { // two clicks: deleting cannot be undone
    A.deleteArmed = Date.now() + 5000;
    setText(byId('delete-button'), 'Click again to delete');
    return;
  }
  disarmDelete();
  try {
    await adminCall('DELETE', `/api/v1/sales/${encodeURIComponent(id)}`);
  } catch (e) {
    announce(e.code === 'conflict'
      ? `Sale ${id} cannot be deleted: buyers have reserved in it. Hide it from the storefront instead.`
      : messageFor(e, 'admin'), 'error');
    return;
  }
  if (A.selected === id) { // the panel of a sale that is gone: closed, and its loops stopped
    A.feed?.stop();
    A.feed = null;
    A.timers.forEach(clearTimeout);
    A.timers = [];
    A.gen++;
    A.selected = '';
    A.sale = null;
    byId('detail').hidden = true;
    history.replaceState(null, '', location.pathname);
  }
  A.rows.get(id)?.tr.remove();
  A.rows.delete(id);
  announce(`Sale ${id} is deleted.`, 'ok');
  refreshSales();
});

function intField(id) {
  const v = byId(id).value.trim();
  return v === '' ? undefined : Math.floor(Number(v));
}

// minorDigits is how many decimals a currency's amounts have (2 for usd, 0 for jpy).
function minorDigits(currency) {
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.toUpperCase() }).resolvedOptions().maximumFractionDigits;
  } catch {
    return 2;
  }
}

byId('create-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  // The price is in the currency's own unit; price_cents is in its smallest (cents, or yen).
  const currency = byId('c-currency').value.trim().toLowerCase();
  if (currency && !/^[a-z]{3}$/.test(currency)) { announce('Currency: an ISO 4217 code of 3 letters, e.g. usd or eur.', 'error'); return; }
  const digits = minorDigits(currency || 'usd');
  const price = new RegExp(`^(\\d+)(?:\\.(\\d{1,${Math.max(digits, 1)}}))?$`).exec(byId('c-price').value.trim());
  if (!price || (digits === 0 && price[2])) {
    announce(digits ? `Price: a number with at most ${plural(digits, 'decimal')}, e.g. 9.99.` : 'Price: a whole number in this currency, e.g. 500.', 'error');
    return;
  }
  if (!A.clock.known) await refreshSales();
  const body = {
    price_cents: Number(price[1]) * 10 ** digits + Number((price[2] || '').padEnd(digits, '0') || 0),
    currency: currency || undefined,
    listed: byId('c-listed').checked,
    stock: intField('c-stock'),
    per_user_limit: intField('c-limit'),
    hold_seconds: intField('c-hold'),
    queue_limit: intField('c-queue'),
    holdback: intField('c-holdback'),
    preheat_seconds: intField('c-preheat'),
  };
  if (byId('c-room').checked) {
    // The room's other fields (opens_seconds, token_seconds) take the server's defaults; the
    // server says what is wrong with the rest (a room needs an admission rate or a max active).
    body.waiting_room = {
      order: byId('c-room-order').value,
      admit_per_second: intField('c-room-admit'),
      max_active: intField('c-room-active'),
      pow_bits: intField('c-room-pow'),
    };
    for (const k of Object.keys(body.waiting_room)) if (body.waiting_room[k] === undefined) delete body.waiting_room[k];
  }
  const id = byId('c-id').value.trim();
  const name = byId('c-name').value.trim();
  if (id) body.id = id;
  if (name) body.name = name;
  const startsAt = byId('c-starts-at').value.trim();
  let start;
  if (startsAt) {
    start = parseTime(startsAt);
    if (!Number.isFinite(start)) { announce('Starts at: an RFC 3339 time such as 2026-12-03T08:00:00Z.', 'error'); return; }
    body.starts_at = startsAt;
  } else {
    start = A.clock.now() + (intField('c-starts-in') || 0) * 1000; // the server's clock, not ours
    body.starts_at = new Date(start).toISOString();
  }
  const endsAt = byId('c-ends-at').value.trim();
  if (endsAt) body.ends_at = endsAt;
  else if (intField('c-minutes')) body.ends_at = new Date(start + intField('c-minutes') * 60_000).toISOString();
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  const btn = byId('create-button');
  btn.disabled = true;
  try {
    const s = await adminCall('POST', '/api/v1/sales', body);
    const when = h('span', { 'data-testid': 'created-when' });
    A.created = { startsAt: s.starts_at, el: when, startedAt: 0 };
    announce(h('span', {}, `Created sale ${s.id}: ${plural(s.stock_state.sellable, 'unit')}, `, when, '.'), 'ok');
    tickCreated();
    byId('c-id').value = '';
    byId('c-name').value = '';
    await refreshSales();
    location.hash = `#/sale/${encodeURIComponent(s.id)}`;
  } catch (e) {
    announce(messageFor(e, 'admin'), 'error');
  } finally {
    btn.disabled = false;
  }
});

// ---- start ----------------------------------------------------------------------------------

window.addEventListener('hashchange', route);
route();
if (A.token) adminCall('GET', TOKEN_CHECK).catch(() => {}); // a saved token refused shows at once
refreshSales();
setInterval(refreshSales, 1000);
setInterval(tick, 250);
