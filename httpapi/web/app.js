// The storefront: sign in, the list of sales, a sale page with its live stock and countdown,
// buying (hold or queue), paying through the gateway, cancelling, and the buyer's orders.
// Every server string goes into the page as text (textContent / attributes), never as markup.

import {
  api, ApiError, byId, fmtCountdown, fmtDateTime, fmtPrice, fmtSeconds, h, jwtClaims, jwtSubject, messageFor,
  listPages, plural, randomKey, ServerClock, setText, sleep, store,
} from 'seckill/common';
import { SaleFeed } from 'seckill/sse';
import { joinRoom, TicketFeed } from 'seckill/room';

const TOKEN_KEY = 'seckill.token';
// SIGNIN_KEY (sessionStorage) holds the state and nonce of a sign-in at the shop's login page,
// and the page to come back to, until the login page sends the buyer back.
const SIGNIN_KEY = 'seckill.signin';
const FINAL = new Set(['paid', 'rejected', 'refund_required']);
const STATUS_WORD = {
  upcoming: 'Coming soon', active: 'On sale', sold_out: 'Sold out', ended: 'Ended',
};
// CURRENCY is each sale's currency seen so far (sale id → ISO 4217 code), for the orders list.
const CURRENCY = new Map();
const RES_WORD = {
  queued: 'In line', held: 'Held for you', paid: 'Paid', cancelled: 'Cancelled',
  expired: 'Expired', rejected: 'Not served', refund_required: 'Refund owed',
};
const RESULT = {
  paid: 'Paid. Your order is confirmed: see “Your orders”.',
  expired: 'Your hold expired before it was paid; the unit went back on sale.',
  cancelled: 'Cancelled. The unit went back on sale.',
  rejected: 'Not served: the sale ran out (or ended) before your turn came.',
  refund_required: 'A payment arrived that could not be honoured: a refund is owed to you.',
};

const S = {
  token: store.get(TOKEN_KEY, '') || '',
  user: '',
  clock: new ServerClock(),
  saleId: '', // the sale page shown, or '' for the list
  sale: null, // its last Sale JSON
  feed: null,
  cards: new Map(), // reservation id → card
  buyKeys: new Map(), // sale id → Idempotency-Key of the purchase being attempted
  paths: new Map(), // user + sale id → purchase path
  buying: false,
  blockedUntil: 0, // rate limited until (Date.now() ms)
  names: new Map(), // sale id → name, for the orders list
  listTimer: 0,
  listPages: 1, // pages of the list shown: one more per "More sales"
  listItems: new Map(), // sale id → list item parts
  lastRefresh: 0,
  noDevTokens: false, // the server answered 404 to /dev/token: sign in by pasting a JWT
  signin: null, // GET /api/v1/signin: the shop's login page, if any, and the user id's claim
  claim: 'sub', // the claim of a user token that holds the user id
  roomId: '', // the sale whose waiting room is shown, or ''
  roomFeed: null,
  admissions: new Map(), // user + sale id → {token, expires} given by a waiting room
  buyAfterRoom: '', // the sale to buy as soon as its page has read it (the room let the buyer in)
};
S.user = jwtSubject(S.token); // the claim is `sub` until loadSignIn knows better

// ---- messages -------------------------------------------------------------------------

// announce shows a message in the status line at the top. With rid, the message is about that
// reservation and renderCard keeps it in step with the card (bannerFor): one source, the card's
// reservation, so the line and the card never disagree (a queue position that moved), and the
// line clears once the card itself tells the outcome (no message shown twice).
function announce(text, kind = 'info', rid = '') {
  const el = byId('status');
  el.className = `status ${kind}`;
  el.textContent = '';
  if (rid) el.dataset.rid = rid;
  else delete el.dataset.rid;
  // A fresh text node is announced by screen readers even when it repeats the last message.
  el.append(text);
}

// ---- sign-in ------------------------------------------------------------------------------

function renderAccount() {
  const signedIn = Boolean(S.token);
  byId('signed-in').hidden = !signedIn;
  setText(byId('who'), S.user || 'unknown user');
  const shopLogin = Boolean(S.signin && S.signin.login_url);
  byId('oidc-signin').hidden = signedIn || !shopLogin;
  // With the shop's login page, the test accounts and the token box are for --dev only.
  if (signedIn || (shopLogin && !S.signin.dev_tokens)) {
    byId('signin-form').hidden = true;
    byId('jwt-form').hidden = true;
  } else if (byId('signin-form').hidden && byId('jwt-form').hidden) {
    byId('signin-form').hidden = S.noDevTokens;
    byId('jwt-form').hidden = !S.noDevTokens;
  }
  byId('orders-section').hidden = !signedIn;
  updateBuyButton();
}

async function probeDev() {
  if (S.token) return;
  try {
    await api('POST', '/api/v1/dev/token', { body: { user: '' } });
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) useJWTForm('');
  }
}

// loadSignIn asks the server how buyers sign in; if it cannot tell (its provider is down), the
// dev probe decides between test accounts and the token box, as before there was a login page.
async function loadSignIn() {
  try {
    S.signin = await api('GET', '/api/v1/signin');
    S.claim = S.signin.user_claim || 'sub';
    S.user = jwtSubject(S.token, S.claim);
    if (!S.signin.dev_tokens) S.noDevTokens = true;
  } catch {
    S.signin = null;
    await probeDev();
  }
  renderAccount();
}

// The shop's login page (OpenID Connect implicit flow, response_type=id_token): it sends the
// buyer back to this page with #id_token=…&state=… (docs/SECURITY.md, Sign-in).
byId('oidc-signin').addEventListener('click', () => {
  const pending = { state: randomKey(), nonce: randomKey(), hash: location.hash };
  try { sessionStorage.setItem(SIGNIN_KEY, JSON.stringify(pending)); } catch { /* private mode: the state check fails on return */ }
  const u = new URL(S.signin.login_url);
  u.searchParams.set('response_type', 'id_token');
  u.searchParams.set('client_id', S.signin.client_id);
  u.searchParams.set('redirect_uri', location.origin + location.pathname);
  u.searchParams.set('scope', 'openid');
  u.searchParams.set('state', pending.state);
  u.searchParams.set('nonce', pending.nonce);
  location.assign(u.href);
});

// takeSignInReturn reads the login page's answer from the fragment, if this load is one, and puts
// back the page the buyer left; it returns the answer, checked by finishSignIn once the
// sign-in settings are known.
function takeSignInReturn() {
  const f = new URLSearchParams(location.hash.slice(1));
  if (!f.has('id_token') && !f.has('access_token') && !f.has('error')) return null;
  let pending = null;
  try {
    pending = JSON.parse(sessionStorage.getItem(SIGNIN_KEY) || 'null');
    sessionStorage.removeItem(SIGNIN_KEY);
  } catch { /* none */ }
  // The token leaves the address bar (and the history) at once.
  history.replaceState(null, '', location.pathname + location.search + ((pending && pending.hash) || ''));
  return { f, pending };
}

function finishSignIn({ f, pending }) {
  if (f.has('error')) {
    announce(`The shop's sign-in failed: ${f.get('error_description') || f.get('error')}.`, 'error');
    return;
  }
  const tok = f.get('id_token') || f.get('access_token');
  const claims = jwtClaims(tok);
  // state ties the answer to a sign-in this page started; nonce ties the token to it.
  if (!pending || f.get('state') !== pending.state || !claims || (claims.nonce !== undefined && claims.nonce !== pending.nonce)) {
    announce('That sign-in answer was not for this page: sign in again.', 'error');
    return;
  }
  setToken(tok);
  announce(S.user ? `Signed in as ${S.user}.` : 'Signed in.');
}

function useJWTForm(message) {
  S.noDevTokens = true;
  byId('signin-form').hidden = true;
  byId('jwt-form').hidden = false;
  if (message) announce(message);
}

function setToken(token) {
  S.token = token;
  S.user = jwtSubject(token, S.claim);
  store.set(TOKEN_KEY, token || null);
  S.paths.clear();
  S.buyKeys.clear();
  renderAccount();
  reloadReservations();
  refreshOrders();
}

function signOut(message) {
  setToken('');
  announce(message || 'Signed out.');
}

byId('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const user = byId('signin-user').value.trim();
  const btn = byId('signin-button');
  btn.disabled = true;
  try {
    const r = await api('POST', '/api/v1/dev/token', { body: { user } });
    setToken(r.token);
    announce(`Signed in as ${S.user}.`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      useJWTForm('This shop does not hand out test accounts: paste your user token (JWT).');
      byId('signin-jwt').focus();
    } else {
      announce(e.code === 'invalid_argument' ? 'A user name is 1–64 letters, digits, “_”, “.” or “-”.' : messageFor(e), 'error');
    }
  } finally {
    btn.disabled = false;
  }
});

byId('jwt-toggle').addEventListener('click', () => {
  useJWTForm('');
  byId('signin-jwt').focus();
});

byId('jwt-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const tok = byId('signin-jwt').value.trim();
  if (!jwtSubject(tok, S.claim)) {
    announce(`That is not a user token: a JWT has three dot-separated parts and names the user in “${S.claim}”.`, 'error');
    return;
  }
  byId('signin-jwt').value = '';
  setToken(tok);
  announce(`Signed in as ${S.user}.`);
});

byId('signout-button').addEventListener('click', () => signOut());
byId('more-sales').addEventListener('click', () => { S.listPages++; refreshList(); });

// userError handles the errors every signed-in call may get; it returns true if it did.
function userError(e) {
  if (e instanceof ApiError && e.code === 'unauthorized' && S.token) {
    signOut('Your session has expired or is not valid here: sign in again.');
    return true;
  }
  return false;
}

// ---- routing ------------------------------------------------------------------------------

function route() {
  const r = /^#\/sale\/([^/]+)\/room$/.exec(location.hash);
  if (r) {
    let rid = '';
    try { rid = decodeURIComponent(r[1]); } catch { rid = ''; }
    if (rid) { showRoom(rid); return; }
  }
  const m = /^#\/sale\/(.+)$/.exec(location.hash);
  let id = '';
  if (m) {
    try { id = decodeURIComponent(m[1]); } catch { id = ''; }
  }
  if (id) showSale(id);
  else showList();
}

function leave() {
  S.feed?.stop();
  S.feed = null;
  S.roomFeed?.stop();
  S.roomFeed = null;
  S.roomId = '';
  byId('view-room').hidden = true;
  clearInterval(S.listTimer);
  S.listTimer = 0;
}

// ---- list of sales ----------------------------------------------------------------------

function showList() {
  leave();
  S.saleId = '';
  S.sale = null;
  byId('view-sale').hidden = true;
  byId('view-missing').hidden = true;
  byId('view-list').hidden = false;
  byId('feed-mode').hidden = true;
  document.title = 'seckill — flash sales';
  refreshList();
  S.listTimer = setInterval(refreshList, 2000);
  refreshOrders();
}

async function refreshList() {
  let r;
  try {
    // The pages shown so far, by start: the first, and one more per "More sales".
    r = await listPages((path) => api('GET', path), {}, S.listPages);
  } catch (e) {
    announce(messageFor(e), 'error');
    return;
  }
  if (S.saleId) return; // navigated away meanwhile
  S.clock.sample(r.serverTime);
  const { sales } = r;
  byId('more-sales').hidden = !r.more;
  const ul = byId('sale-list');
  byId('no-sales').hidden = sales.length > 0;
  const seen = new Set();
  sales.forEach((s, i) => {
    S.names.set(s.id, s.name);
    seen.add(s.id);
    let it = S.listItems.get(s.id);
    if (!it) {
      it = {
        name: h('span', { class: 'card-name' }),
        price: h('span', { class: 'card-price' }),
        badge: h('span', { class: 'badge' }),
        when: h('span', { class: 'card-when' }),
        gauge: miniGauge(),
      };
      it.li = h('li', {},
        h('a', { class: 'card', href: `#/sale/${encodeURIComponent(s.id)}`, 'data-testid': `sale-link-${s.id}`, data: { sale: s.id } },
          it.name, it.price, h('span', { class: 'card-meta' }, it.badge, it.when), it.gauge.el));
      S.listItems.set(s.id, it);
    }
    it.sale = s;
    setText(it.name, s.name);
    CURRENCY.set(s.id, s.currency);
    setText(it.price, fmtPrice(s.price_cents, s.currency));
    setText(it.badge, STATUS_WORD[s.status] || s.status);
    it.badge.className = `badge s-${s.status}`;
    it.gauge.set(s.stock_state);
    if (ul.children[i] !== it.li) ul.insertBefore(it.li, ul.children[i] || null);
  });
  for (const [id, it] of S.listItems) {
    if (!seen.has(id)) { it.li.remove(); S.listItems.delete(id); }
  }
  tickList();
}

function tickList() {
  for (const it of S.listItems.values()) {
    const s = it.sale;
    let text = '';
    if (s.status === 'upcoming') text = `starts in ${fmtCountdown(S.clock.until(s.starts_at))}`;
    else if (s.status === 'active') text = `${s.stock_state.available} of ${s.stock_state.sellable} left`;
    setText(it.when, text);
  }
}

function miniGauge() {
  const sold = h('span', { class: 'seg sold' });
  const held = h('span', { class: 'seg held' });
  const avail = h('span', { class: 'seg available' });
  const el = h('span', { class: 'gauge mini', role: 'img' }, sold, held, avail);
  return { el, set: (st) => setGauge(el, [sold, held, avail], st) };
}

function setGauge(el, [sold, held, avail], st) {
  const n = Math.max(1, st.sellable);
  sold.style.width = `${(100 * st.sold) / n}%`;
  held.style.width = `${(100 * st.held) / n}%`;
  avail.style.width = `${(100 * st.available) / n}%`;
  el.setAttribute('aria-label', `${st.available} available, ${st.held} held, ${st.sold} sold of ${st.sellable}; ${st.queued} queued`);
}

// ---- sale page ---------------------------------------------------------------------------

function showSale(id) {
  leave();
  S.saleId = id;
  S.sale = null;
  byId('view-list').hidden = true;
  byId('view-missing').hidden = true;
  byId('view-sale').hidden = false;
  setText(byId('sale-name'), id);
  for (const k of ['sale-price', 'sale-status', 'sale-countdown', 'sale-terms', 'buy-hint']) setText(byId(k), '');
  for (const k of ['available', 'held', 'sold', 'queued']) setText(byId(`count-${k}`), '–');
  byId('reservations').replaceChildren();
  S.cards.clear();
  updateBuyButton();
  const mode = byId('feed-mode');
  mode.hidden = false;
  S.feed = new SaleFeed({
    saleId: id,
    token: () => S.token,
    onSale: onSale,
    onReservation: onReservation,
    onMode: (m) => {
      setText(mode, { live: 'live', polling: 'polling', connecting: 'connecting…' }[m] || m);
      mode.className = `feed ${m}`;
      mode.title = m === 'live' ? 'Updates are pushed by the server' : m === 'polling' ? 'Live updates unavailable: checking every second' : '';
    },
    onError: (e, rid) => {
      if (userError(e)) return;
      if (rid && e.code === 'not_found') { untrack(rid); return; }
      if (!rid && e.code === 'not_found') showMissing(id);
    },
  });
  // The first state directly (it also tells a missing sale), then the feed keeps it current.
  api('GET', `/api/v1/sales/${encodeURIComponent(id)}`).then(onSale, (e) => {
    if (S.saleId !== id) return;
    if (e.code === 'not_found') showMissing(id);
    else announce(messageFor(e, 'sale'), 'error');
  });
  reloadReservations();
  S.feed.start();
  refreshOrders();
}

// showMissing replaces the sale page by "Sale not found" when the server knows no sale of this
// id (a mistyped link, or a sale deleted since), rather than a page of dashes.
function showMissing(id) {
  if (S.saleId !== id) return;
  leave();
  byId('view-sale').hidden = true;
  byId('feed-mode').hidden = true;
  byId('view-missing').hidden = false;
  document.title = 'Sale not found — seckill';
  announce('', 'info');
}

function onSale(sale) {
  if (!sale || sale.id !== S.saleId) return;
  S.clock.sample(sale.server_time);
  const was = S.sale?.status;
  S.sale = sale;
  S.names.set(sale.id, sale.name);
  document.title = `${sale.name} — seckill`;
  setText(byId('sale-name'), sale.name);
  CURRENCY.set(sale.id, sale.currency);
  setText(byId('sale-price'), fmtPrice(sale.price_cents, sale.currency));
  const badge = byId('sale-status');
  setText(badge, STATUS_WORD[sale.status] || sale.status);
  badge.className = `badge s-${sale.status}`;
  badge.dataset.status = sale.status;
  const st = sale.stock_state;
  for (const k of ['available', 'held', 'sold', 'queued']) setText(byId(`count-${k}`), st[k]);
  const g = byId('sale-gauge');
  setGauge(g, [...g.children], st);
  const terms = [`${st.sellable} for sale`, `at most ${sale.per_user_limit} per buyer`, `a held unit must be paid within ${fmtSeconds(sale.hold_seconds)}`];
  setText(byId('sale-terms'), terms.join(' · '));
  if (was === 'upcoming' && sale.status === 'active') {
    announce(sale.waiting_room ? 'The sale has started: join the waiting room to buy.' : 'The sale has started: you can buy now.');
  }
  updateBuyButton();
  if (S.buyAfterRoom === sale.id) { S.buyAfterRoom = ''; if (admitted(sale.id)) buy(); }
  tickSale();
}

function updateBuyButton() {
  const btn = byId('buy-button');
  const hint = byId('buy-hint');
  const sale = S.sale;
  const wait = S.blockedUntil - Date.now();
  let ok = false;
  let text = '';
  if (!sale) text = '';
  else if (sale.status === 'upcoming') text = 'The button unlocks when the sale starts.';
  else if (sale.status === 'sold_out') text = 'Every unit has been sold.';
  else if (sale.status === 'ended') text = 'This sale has ended.';
  else if (!S.token) text = sale.waiting_room ? 'Sign in to join the waiting room.' : 'Sign in to buy.';
  else if (sale.waiting_room && !admitted(sale.id)) {
    // A sale with a waiting room: the buyer waits for their turn there first.
    const opens = S.clock.until(sale.starts_at) - (sale.waiting_room.opens_seconds || 0) * 1000;
    ok = opens <= 0;
    text = ok ? 'This sale has a waiting room: join it, and buy when your turn comes.' : 'The waiting room opens before the sale starts.';
    btn.disabled = !ok;
    btn.dataset.room = 'true';
    setText(btn, 'Join the waiting room');
    setText(hint, text);
    return;
  }
  else if (S.buying) text = 'Buying…';
  else if (wait > 0) text = `Too many attempts: wait ${Math.ceil(wait / 1000)} s.`;
  else if (unitsTaken() >= sale.per_user_limit) {
    // A buyer in line has no unit yet: the hint must not say otherwise.
    const inLine = [...S.cards.values()].some((c) => c.res?.status === 'queued');
    text = inLine ? 'You are in line for this sale: your place is shown below.'
      : sale.per_user_limit === 1 ? 'You have your unit of this sale.' : `You have the ${sale.per_user_limit} units one buyer may have.`;
  }
  else {
    ok = true;
    const st = sale.stock_state;
    if (st.available === 0 || st.queued > 0) text = 'Every unit is held right now: buying puts you in line for the next one freed.';
  }
  btn.disabled = !ok;
  btn.dataset.room = '';
  setText(btn, S.buying ? 'Buying…' : sale ? `Buy now · ${fmtPrice(sale.price_cents, sale.currency)}` : 'Buy now');
  setText(hint, text);
}

// unitsTaken counts this buyer's units of the sale shown that are held, queued or paid.
function unitsTaken() {
  let n = 0;
  for (const c of S.cards.values()) {
    if (['held', 'queued', 'paid'].includes(c.res?.status)) n += c.res.quantity || 1;
  }
  return n;
}

function tickSale() {
  const sale = S.sale;
  if (sale?.waiting_room) updateBuyButton(); // the room opens, an admission runs out
  const cd = byId('sale-countdown');
  if (!sale) { setText(cd, ''); return; }
  if (sale.status === 'upcoming') {
    const ms = S.clock.until(sale.starts_at);
    setText(cd, ms > 0 ? `starts in ${fmtCountdown(ms)}` : 'starting…');
    cd.dataset.ms = String(Math.max(0, Math.round(ms)));
    if (ms <= 0) refreshSoon();
  } else if (sale.status === 'active') {
    setText(cd, `ends in ${fmtCountdown(S.clock.until(sale.ends_at))}`);
    cd.dataset.ms = '';
  } else {
    setText(cd, '');
  }
  if (S.blockedUntil && Date.now() >= S.blockedUntil) { S.blockedUntil = 0; updateBuyButton(); }
}

// refreshSoon asks the feed for the current state, at most twice a second.
function refreshSoon() {
  if (Date.now() - S.lastRefresh < 500) return;
  S.lastRefresh = Date.now();
  S.feed?.refresh();
}

async function purchasePath(saleId) {
  const k = `${S.user}\n${saleId}`;
  let p = S.paths.get(k);
  if (!p) {
    const a = admitted(saleId);
    const headers = a ? { 'Seckill-Admission': a.token } : {};
    const r = await api('GET', `/api/v1/sales/${encodeURIComponent(saleId)}/path`, { token: S.token, headers });
    if (typeof r.path !== 'string' || !r.path.startsWith('/api/')) throw new Error('unexpected purchase path');
    p = r.path;
    S.paths.set(k, p);
  }
  return p;
}

async function buy() {
  const sale = S.sale;
  if (!sale || sale.status !== 'active' || !S.token || S.buying) return;
  const id = sale.id;
  // One key per intended purchase: retries (automatic, or the next click after a failure
  // that may not have reached the server) reuse it, so a purchase is never made twice.
  let key = S.buyKeys.get(id);
  if (!key) { key = randomKey(); S.buyKeys.set(id, key); }
  S.buying = true;
  updateBuyButton();
  announce('Buying…');
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const path = await purchasePath(id);
        const res = await api('POST', path, { token: S.token, body: { quantity: 1 }, headers: { 'Idempotency-Key': key } });
        S.buyKeys.delete(id);
        track(res);
        announce('', 'ok', res.id); // the card renders the message (bannerFor)
        onReservation(res, true);
        focusCard(S.cards.get(res.id));
        return;
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        if (e.code === 'invalid_token') S.paths.delete(`${S.user}\n${id}`);
        const wait = (e.retryAfter ?? 1) * 1000;
        if (e.code === 'rate_limited') { S.blockedUntil = Date.now() + wait; }
        if ((e.retryable || (e.code === 'invalid_token' && attempt === 1)) && attempt < 4) {
          announce(messageFor(e), 'warn');
          await sleep(e.code === 'invalid_token' ? 0 : wait);
          if (S.saleId !== id || !S.token) return;
          continue;
        }
        if (!e.retryable) S.buyKeys.delete(id); // a definite answer: the next click is a new purchase
        if (userError(e)) return;
        announce(messageFor(e), 'error');
        if (['sold_out', 'ended', 'not_started', 'queue_full'].includes(e.code)) refreshSoon();
        return;
      }
    }
  } catch (e) {
    announce(messageFor(e), 'error');
  } finally {
    S.buying = false;
    updateBuyButton();
  }
}

byId('buy-button').addEventListener('click', () => {
  if (byId('buy-button').dataset.room === 'true') location.hash = `#/sale/${encodeURIComponent(S.saleId)}/room`;
  else buy();
});

// ---- waiting room ---------------------------------------------------------------------------

// admitted is the admission a waiting room gave this buyer for the sale, while it lasts.
function admitted(saleId) {
  const a = S.admissions.get(`${S.user}\n${saleId}`);
  return a && S.clock.until(a.expires) > 0 ? a : null;
}

const ROOM_STATE = {
  pre_queue: 'You are in the pre-queue. At the start a draw puts everyone who joined before it in a random order; then the line moves.',
  waiting: 'You are in line. Keep this page open: it lets you in when your turn comes.',
  admitted: 'It is your turn: buy now.',
  sold_out: 'Sold out: every unit has been sold.',
  ended: 'This sale has ended.',
};

function showRoom(id) {
  leave();
  S.saleId = '';
  S.sale = null;
  S.roomId = id;
  byId('view-list').hidden = true;
  byId('view-missing').hidden = true;
  byId('view-sale').hidden = true;
  byId('view-room').hidden = false;
  byId('feed-mode').hidden = true;
  announce('', 'info'); // the sale page's last word is not the room's
  byId('room-back').href = `#/sale/${encodeURIComponent(id)}`;
  byId('room-enter').hidden = true;
  for (const k of ['room-position', 'room-ahead', 'room-wait']) setText(byId(k), '–');
  for (const k of ['room-hint', 'room-fair']) setText(byId(k), '');
  setText(byId('room-sale-name'), id);
  const state = byId('room-state');
  state.dataset.state = '';
  if (!S.token) { setText(state, 'Sign in to join the waiting room.'); return; }
  setText(state, 'Joining the waiting room…');
  enterRoom(id);
}

// enterRoom reads the sale and its room, joins (again: joining is idempotent) and follows the
// ticket. A room that has not opened yet is tried again when it opens.
async function enterRoom(id) {
  let sale, room;
  try {
    sale = await api('GET', `/api/v1/sales/${encodeURIComponent(id)}`);
    room = await api('GET', `/api/v1/sales/${encodeURIComponent(id)}/waiting-room`);
  } catch (e) {
    if (S.roomId !== id) return;
    if (e.code === 'not_found') { location.hash = `#/sale/${encodeURIComponent(id)}`; return; }
    announce(messageFor(e, 'sale'), 'error');
    return;
  }
  if (S.roomId !== id) return;
  S.clock.sample(room.server_time);
  setText(byId('room-sale-name'), sale.name);
  document.title = `${sale.name} · waiting room — seckill`;
  setText(byId('room-fair'), room.order === 'draw'
    ? `Fair start: the order of everyone who joins before the start is drawn from a seed the shop committed to in advance (SHA-256 ${room.commitment.slice(0, 16)}…) and reveals at the start, so anyone can check it.`
    : 'First come, first served.');
  let t;
  for (;;) {
    try {
      t = await joinRoom(id, S.token, room.pow_bits, (solving) => setText(byId('room-hint'), solving ? 'Your browser is doing a quick check before joining…' : ''));
      break;
    } catch (e) {
      if (S.roomId !== id) return;
      if (userError(e)) return;
      if (e.code === 'not_started') {
        const ms = S.clock.until(room.opens_at);
        setText(byId('room-state'), `The waiting room opens in ${fmtCountdown(ms)}.`);
        await sleep(Math.min(Math.max(ms, 500), 5000));
      } else if (e.retryable) {
        setText(byId('room-hint'), messageFor(e));
        await sleep((e.retryAfter ?? 1) * 1000);
      } else {
        setText(byId('room-state'), messageFor(e));
        return;
      }
      if (S.roomId !== id) return;
    }
  }
  onRoomTicket(t);
  if (['sold_out', 'ended'].includes(t.state)) return;
  S.roomFeed = new TicketFeed({
    saleId: id,
    token: () => S.token,
    onTicket: onRoomTicket,
    onError: (e) => { userError(e); },
  });
  S.roomFeed.start();
}

function onRoomTicket(t) {
  if (!t || t.sale_id !== S.roomId) return;
  S.clock.sample(t.server_time);
  const state = byId('room-state');
  setText(state, ROOM_STATE[t.state] || t.state);
  state.dataset.state = t.state;
  setText(byId('room-position'), t.state === 'waiting' ? t.position : '–');
  setText(byId('room-ahead'), t.state === 'waiting' ? t.ahead : '–');
  const p50 = t.wait_p50_seconds, p90 = t.wait_p90_seconds;
  setText(byId('room-wait'), p50 == null || !['waiting', 'pre_queue'].includes(t.state)
    ? '–' : `about ${fmtSeconds(Math.ceil(p50))} (9 in 10 within ${fmtSeconds(Math.ceil(p90))})`);
  const enter = byId('room-enter');
  if (t.state === 'admitted' && t.admission_token) {
    S.admissions.set(`${S.user}\n${t.sale_id}`, { token: t.admission_token, expires: t.admission_expires_at });
    setText(byId('room-hint'), `Your turn lasts until ${fmtDateTime(t.admission_expires_at)}.`);
    enter.hidden = false;
    setText(enter, 'Buy now');
  } else {
    enter.hidden = true;
    if (t.state === 'admitted') setText(byId('room-hint'), 'Your turn has passed.');
  }
  if (['sold_out', 'ended'].includes(t.state)) { S.roomFeed?.stop(); setText(byId('room-hint'), ''); }
}

// The room lets the buyer in: the sale page, where the buy goes through with the admission.
byId('room-enter').addEventListener('click', () => {
  S.buyAfterRoom = S.roomId; // the sale page buys once it has read the sale
  location.hash = `#/sale/${encodeURIComponent(S.roomId)}`;
});

// ---- reservations -------------------------------------------------------------------------

const trackKey = () => `seckill.reservations.${S.user}`;
const tracked = () => (S.user ? store.get(trackKey(), []) : []);

function track(res) {
  const list = tracked().filter((t) => t.rid !== res.id);
  list.push({ rid: res.id, sale: res.sale_id, at: Date.now() });
  // Keep the newest 8 per sale (the live feed follows at most 8) and 50 in all.
  const perSale = new Map();
  const kept = [];
  for (const t of list.reverse()) {
    const n = (perSale.get(t.sale) || 0) + 1;
    perSale.set(t.sale, n);
    if (n <= 8 && kept.length < 50) kept.push(t);
  }
  store.set(trackKey(), kept.reverse());
}

function patchTracked(rid, patch) {
  store.set(trackKey(), tracked().map((t) => (t.rid === rid ? { ...t, ...patch } : t)));
}

function untrack(rid) {
  store.set(trackKey(), tracked().filter((t) => t.rid !== rid));
  const c = S.cards.get(rid);
  if (c) { c.el.remove(); S.cards.delete(rid); }
  watch();
  updateBuyButton();
}

// reloadReservations shows the signed-in user's reservations of the sale page.
function reloadReservations() {
  byId('reservations').replaceChildren();
  S.cards.clear();
  if (!S.saleId || !S.token) { watch(); return; }
  for (const t of tracked().filter((x) => x.sale === S.saleId)) {
    const c = card(t.rid);
    Object.assign(c, { paymentId: t.pid || '', redirectUrl: t.url || '', payAt: t.payAt || 0 });
    api('GET', `/api/v1/reservations/${encodeURIComponent(t.rid)}`, { token: S.token }).then(
      (res) => onReservation(res, true),
      (e) => {
        if (userError(e)) return;
        if (e.code === 'not_found') untrack(t.rid);
      });
  }
  watch();
}

// watch tells the feed which reservations to follow: those that can still change.
function watch() {
  const ids = [];
  for (const c of S.cards.values()) {
    const st = c.res?.status;
    if (!st || st === 'queued' || st === 'held') ids.push(c.rid);
    else if (paymentPending(c)) ids.push(c.rid);
  }
  S.feed?.setReservations(ids);
}

let cardSeq = 0;

function card(rid) {
  let c = S.cards.get(rid);
  if (c) return c;
  const hid = `resv-title-${++cardSeq}`;
  c = { rid, res: null, paymentId: '', redirectUrl: '', payAt: 0, paying: false };
  c.status = h('strong', { 'data-testid': 'reservation-status' }, '…');
  c.left = h('strong', { 'data-testid': 'hold-countdown', class: 'countdown' });
  c.holdLine = h('p', { class: 'hold', hidden: true }, 'Pay within ', c.left, '.');
  c.position = h('strong', { 'data-testid': 'queue-position' });
  c.queueLine = h('p', { class: 'queue', hidden: true }, 'You are number ', c.position, ' in line. A unit is yours as soon as one is freed.');
  c.granted = h('p', { class: 'note ok', 'data-testid': 'granted', hidden: true }, 'Your turn came: a unit is now held for you.');
  c.result = h('p', { class: 'result', 'data-testid': 'result', role: 'status', hidden: true });
  c.pay = h('button', { type: 'button', class: 'primary', 'data-testid': 'pay-button', hidden: true, onclick: () => pay(c) }, 'Pay');
  c.cancel = h('button', { type: 'button', 'data-testid': 'cancel-button', hidden: true, onclick: () => cancel(c) }, 'Cancel');
  c.dismiss = h('button', { type: 'button', class: 'link', hidden: true, onclick: () => untrack(rid) }, 'Dismiss');
  c.gatewayLink = h('a', { target: '_blank', rel: 'noopener', 'data-testid': 'gateway-link' }, 'Open the payment page');
  // The gateway's page in a frame that may only navigate the shop on a click (its link back).
  c.frame = h('iframe', { title: 'Payment gateway', 'data-testid': 'gateway-frame',
    sandbox: 'allow-top-navigation-by-user-activation allow-popups allow-popups-to-escape-sandbox' });
  c.gateway = h('div', { class: 'gateway', hidden: true },
    h('p', { class: 'small' }, 'The payment gateway’s page: ', c.gatewayLink), c.frame);
  c.title = h('h2', { id: hid, tabindex: '-1' }, 'Your reservation');
  c.el = h('article', { class: 'resv', id: `resv-${rid}`, 'data-testid': 'reservation', 'aria-labelledby': hid, data: { rid } },
    c.title,
    h('p', {}, 'Status: ', c.status, h('span', { class: 'muted small rid' }, ` · ${rid.slice(-8)}`)),
    c.holdLine, c.queueLine, c.granted, c.result,
    h('div', { class: 'actions' }, c.pay, c.cancel, c.dismiss),
    c.gateway);
  byId('reservations').prepend(c.el);
  S.cards.set(rid, c);
  return c;
}

// focusCard moves keyboard focus to a reservation's next action (the buy and pay buttons
// are disabled or hidden once used, which would leave the focus nowhere).
function focusCard(c) {
  if (!c) return;
  const target = [c.pay, c.cancel].find((b) => !b.hidden && !b.disabled) || c.title;
  target.focus();
}

function onReservation(res, initial = false) {
  if (!res || !res.id || res.sale_id !== S.saleId || !S.token || res.user_id !== S.user) return; // another sale's, or a signed-out user's
  if (!initial && !S.cards.has(res.id)) return; // not ours any more (signed out meanwhile)
  const c = card(res.id);
  const prev = c.res?.status;
  c.res = res;
  const st = res.status;
  if (prev === 'queued' && st === 'held') {
    c.grantedNow = true;
    announce('', 'ok', res.id); // the card renders the message (bannerFor)
  }
  if (prev && prev !== st && (FINAL.has(st) || st === 'expired' || st === 'cancelled')) {
    // The card's result line (a live region) tells the outcome; the status line clears.
    announce('', 'info', res.id);
  }
  if (st === 'paid' || st === 'refund_required') {
    refreshOrders();
    setTimeout(refreshOrders, 1500);
  }
  renderCard(c);
  watch();
  tickCards();
  updateBuyButton();
}

const LATE_PAYMENT_WAIT = 120_000; // how long a started payment may still land after its hold ended
// A payment whose start is unknown (the answer was lost) blocks Pay for this long: if it went
// through, the reservation shows paid well before; if the hold is still held after it, the
// buyer may try again rather than lose the hold.
const UNKNOWN_PAYMENT_RETRY = 15_000;

// payLocked: Pay stays hidden, since a second payment would be refunded, not applied.
function payLocked(c) {
  return Boolean(c.paymentId) && !(c.paymentId === 'unknown' && Date.now() - c.payAt > UNKNOWN_PAYMENT_RETRY);
}

// paymentPending: a payment was started and its outcome may still come.
function paymentPending(c) {
  const st = c.res?.status;
  return Boolean(c.paymentId) && !FINAL.has(st) && (st === 'held' || Date.now() - c.payAt < LATE_PAYMENT_WAIT);
}

// bannerFor is the status line's message about a reservation, [text, kind], from the card's
// state: '' once the card's own result line says it.
function bannerFor(c) {
  const st = c.res?.status;
  if (st === 'queued') return [`Every unit is held by someone: you are number ${c.res.position ?? '?'} in line.`, 'ok'];
  if (c.paymentId === 'unknown' && paymentPending(c)) return ['We lost contact while starting the payment. If it went through, this page shows it in a moment.', 'warn'];
  if (c.paymentId && paymentPending(c)) return ['Payment started. The gateway confirms it in a moment.', 'ok'];
  if (st === 'held' && c.grantedNow) return ['Your turn came: a unit is now held for you. Pay before the countdown ends.', 'ok'];
  if (st === 'held' && c.res.amount_cents === 0) return ['A free unit is held for you: confirm it before the countdown ends.', 'ok'];
  if (st === 'held') return ['A unit is held for you: pay before the countdown ends.', 'ok'];
  return ['', 'info'];
}

function renderCard(c) {
  const res = c.res;
  if (!res) return;
  const st = res.status;
  setText(c.status, RES_WORD[st] || st);
  c.status.dataset.status = st;
  c.el.dataset.status = st;
  c.holdLine.hidden = st !== 'held';
  c.queueLine.hidden = st !== 'queued';
  if (st === 'queued') setText(c.position, res.position ?? '?');
  c.granted.hidden = !(c.grantedNow && st === 'held');
  const payPending = paymentPending(c);
  let result = '';
  if (payPending) {
    result = st === 'held' ? 'Payment started: waiting for the gateway’s confirmation…'
      : 'Your payment is still being confirmed after the hold ended…';
  } else if (RESULT[st]) result = RESULT[st];
  c.result.hidden = !result;
  setText(c.result, result);
  c.result.className = `result r-${payPending ? 'pending' : st}`;
  c.result.dataset.status = payPending ? 'pending' : st;
  c.pay.hidden = st !== 'held' || payLocked(c);
  c.pay.disabled = c.paying;
  const isFree = res.amount_cents === 0; // a giveaway: the button confirms the hold
  setText(c.pay, isFree ? (c.paying ? 'Confirming…' : 'Confirm (free)') : c.paying ? 'Starting payment…'
    : `${c.paymentId === 'unknown' ? 'Try paying again' : 'Pay'} ${fmtPrice(res.amount_cents, S.sale?.currency)}`);
  c.cancel.hidden = !(st === 'queued' || (st === 'held' && !c.paymentId));
  c.dismiss.hidden = !(FINAL.has(st) || ((st === 'expired' || st === 'cancelled') && !payPending));
  // The gateway's page (a frame, and a link to open it apart) while the payment is pending.
  c.gateway.hidden = !c.redirectUrl || !payPending;
  c.frame.hidden = !payPending;
  if (c.redirectUrl && c.gatewayLink.getAttribute('href') !== c.redirectUrl) c.gatewayLink.setAttribute('href', c.redirectUrl);
  if (c.redirectUrl && payPending && c.frame.getAttribute('src') !== c.redirectUrl) c.frame.setAttribute('src', c.redirectUrl);
  const banner = byId('status');
  if (banner.dataset.rid === c.rid) {
    const [text, kind] = bannerFor(c);
    if (banner.textContent !== text || !banner.classList.contains(kind)) announce(text, kind, c.rid);
  }
}

function tickCards() {
  for (const c of S.cards.values()) {
    if (c.pendingShown && !paymentPending(c)) { renderCard(c); watch(); } // the wait for a late payment is over
    c.pendingShown = paymentPending(c);
    const locked = payLocked(c);
    if (c.payLockedShown && !locked) renderCard(c); // an unknown payment start may be retried now
    c.payLockedShown = locked;
    if (c.res?.status !== 'held' || !c.res.expires_at) continue;
    const ms = S.clock.until(c.res.expires_at);
    setText(c.left, fmtCountdown(ms));
    c.left.dataset.ms = String(Math.max(0, Math.round(ms)));
    c.holdLine.classList.toggle('urgent', ms < 10_000);
    if (ms <= 0) refreshSoon();
  }
}

// safeURL accepts only http(s) URLs for the gateway's page.
function safeURL(u) {
  try {
    const url = new URL(u, location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : '';
  } catch {
    return '';
  }
}

function paymentStarted(c, pid, url) {
  c.paymentId = pid;
  c.redirectUrl = url;
  c.payAt = Date.now();
  patchTracked(c.rid, { pid, url, payAt: c.payAt });
}

async function pay(c) {
  if (c.paying || payLocked(c)) return; // a second payment would be refunded, not applied
  c.paying = true;
  renderCard(c);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const r = await api('POST', `/api/v1/reservations/${encodeURIComponent(c.rid)}/pay`, { token: S.token });
        if (r.reservation) { // a free hold: confirmed at once, nothing to pay at a gateway
          onReservation(r.reservation);
          return;
        }
        paymentStarted(c, r.payment_id || 'started', safeURL(r.redirect_url || ''));
        announce('', 'ok', c.rid); // the card renders the message (bannerFor)
        return;
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        if (userError(e)) return;
        if (e.status === 0 || (e.status >= 500 && e.status !== 503)) {
          // The payment may have started (a lost answer, or a proxy's 500/502/504 after the
          // gateway was called): do not start a second one at once (it would be refunded).
          paymentStarted(c, 'unknown', '');
          announce('', 'warn', c.rid); // the card renders the message (bannerFor)
          return;
        }
        if (e.code === 'unavailable' && attempt < 3) { // a 503 started nothing: safe to retry
          announce('The payment service is busy; trying again…', 'warn');
          await sleep((e.retryAfter ?? 1) * 1000);
          continue;
        }
        announce(e.code === 'unavailable' ? 'Payments are unavailable right now. Try again in a moment.' : messageFor(e), 'error');
        api('GET', `/api/v1/reservations/${encodeURIComponent(c.rid)}`, { token: S.token }).then((res) => onReservation(res), () => {});
        return;
      }
    }
  } catch (e) {
    announce(messageFor(e), 'error');
  } finally {
    c.paying = false;
    renderCard(c);
    watch();
    if (document.activeElement === document.body || document.activeElement === c.pay) focusCard(c);
  }
}

async function cancel(c) {
  c.cancel.disabled = true;
  try {
    const res = await api('DELETE', `/api/v1/reservations/${encodeURIComponent(c.rid)}`, { token: S.token });
    onReservation(res);
  } catch (e) {
    if (!userError(e)) announce(messageFor(e), 'error');
  } finally {
    c.cancel.disabled = false;
  }
}

// ---- orders -------------------------------------------------------------------------------

// Only the latest call's answer is shown, and only for the user still signed in: an answer for
// a user who has signed out since must not land on the next one's page.
// REFUND_LABEL says where the refund of a refund_required order stands (its refund_status).
const REFUND_LABEL = {
  refund_required: 'Refund owed', refund_pending: 'Refund in progress', refunded: 'Refunded',
  refund_failed: 'Refund delayed: the shop will contact you',
};
let ordersSeq = 0;
async function refreshOrders() {
  const seq = ++ordersSeq;
  const token = S.token;
  if (!token) {
    byId('orders').replaceChildren();
    byId('orders-empty').hidden = false;
    return;
  }
  try {
    const r = await api('GET', '/api/v1/orders', { token });
    if (seq !== ordersSeq || token !== S.token) return;
    const orders = r.orders || [];
    // The name and currency of a sale this page has not shown (a fresh page, an unlisted sale).
    await Promise.all([...new Set(orders.map((o) => o.sale_id))].filter((id) => !CURRENCY.has(id)).map((id) =>
      api('GET', `/api/v1/sales/${encodeURIComponent(id)}`).then((v) => {
        CURRENCY.set(id, v.currency);
        S.names.set(id, v.name);
      }, () => { CURRENCY.set(id, ''); })));
    if (seq !== ordersSeq || token !== S.token) return;
    byId('orders-empty').hidden = orders.length > 0;
    byId('orders').replaceChildren(...orders.map((o) => h('li', {
      class: `order o-${o.status}`, 'data-testid': 'order-row', data: { rid: o.reservation_id, status: o.status, sale: o.sale_id },
    },
    h('span', { class: 'order-name' }, S.names.get(o.sale_id) || o.sale_id),
    h('span', {}, `${plural(o.quantity, 'unit')} · ${fmtPrice(o.amount_cents, CURRENCY.get(o.sale_id))}`),
    h('span', { class: `badge o-${o.status}` }, o.status === 'paid' ? 'Paid' : (REFUND_LABEL[o.refund_status] || 'Refund owed')),
    h('span', { class: 'muted small' }, fmtDateTime(o.created_at)))));
  } catch (e) {
    if (seq === ordersSeq && token === S.token && !userError(e)) byId('orders-empty').hidden = false;
  }
}

// ---- start ----------------------------------------------------------------------------------

setInterval(() => {
  if (S.saleId) { tickSale(); tickCards(); } else tickList();
}, 250);
window.addEventListener('hashchange', route);
const signInReturn = takeSignInReturn();
renderAccount();
route();
loadSignIn().then(() => { if (signInReturn) finishSignIn(signInReturn); });
