// LiveFeed, the shape of every live view; SaleFeed: live updates of one sale (and some of the
// caller's reservations) from GET /api/v1/sales/{id}/events. When the stream is unavailable or
// fails, it polls GET /api/v1/sales/{id} and GET /api/v1/reservations/{rid} every second, and
// keeps trying to reconnect the stream with a backoff.

import { api, sleep } from 'seckill/common';

const MAX_RESERVATIONS = 8; // the server's limit of reservation parameters
const IDLE_TIMEOUT = 40_000; // the server pings every 15 s: this much silence is a dead stream

// sseParser returns a function to feed decoded text chunks; it calls dispatch({event, data})
// on each blank line that ends an event with data, and onRetry(ms) on a retry field.
export function sseParser(dispatch, onRetry = () => {}) {
  let buf = '';
  let data = [];
  let event = '';
  const line = (l) => {
    if (l === '') {
      if (data.length) dispatch({ event: event || 'message', data: data.join('\n') });
      data = [];
      event = '';
      return;
    }
    if (l[0] === ':') return; // comment, e.g. ": ping"
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'retry' && /^\d+$/.test(value)) onRetry(Number(value));
  };
  return (chunk) => {
    buf += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(buf);
      if (!m) return;
      // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
      if (m[0] === '\r' && m.index === buf.length - 1) return;
      line(buf.slice(0, m.index));
      buf = buf.slice(m.index + m[0].length);
    }
  };
}

// LiveFeed is what every live view of the storefront shares: one stream of server-sent events
// read with fetch() (EventSource cannot send an Authorization header), a poll every second
// while the stream is unavailable, and a reconnection with a backoff (longer for a server
// without the endpoint). A subclass says what to ask for (request), what an event means
// (dispatch) and what one poll reads (pollOnce).
export class LiveFeed {
  // opts: onMode('connecting'|'live'|'polling'), onError(err, …) for failed polls, and the
  // subclass's own.
  constructor(opts) {
    this.o = { onMode() {}, onError() {}, token: () => '', ...opts };
    this.stopped = true;
    this.mode = '';
    this.retryMs = 2000;
    this.pollGen = 0;
    this.wake = null; // resolves the current backoff wait early
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.setMode('connecting');
    this.run();
  }

  stop() {
    this.stopped = true;
    this.pollGen++;
    this.ctrl?.abort();
    this.wake?.();
  }

  // reconnect opens the stream again at once, for a subclass whose request has changed.
  reconnect() {
    if (!this.streaming) return; // a stream that is open, or still being opened
    this.restart = true;
    this.ctrl?.abort();
  }

  setMode(mode) {
    if (this.mode === mode) return;
    this.mode = mode;
    this.o.onMode(mode);
  }

  async run() {
    let backoff = 1000;
    while (!this.stopped) {
      this.ctrl = new AbortController();
      const began = Date.now();
      let r;
      this.streaming = true;
      try {
        r = await this.stream(this.ctrl.signal);
      } catch (e) {
        r = { error: e, connected: this.mode === 'live' };
      } finally {
        this.streaming = false;
      }
      if (this.stopped) return;
      if (this.restart) {
        this.restart = false;
        continue;
      }
      this.startPolling();
      if (r.connected && Date.now() - began > 10_000) backoff = this.retryMs;
      // A server without the endpoint (404) is asked again rarely; anything else soon.
      const wait = r.status === 404 ? Math.max(backoff, 15_000) : backoff;
      await new Promise((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, wait * (0.8 + Math.random() * 0.4));
      });
      this.wake = null;
      backoff = Math.min(backoff * 2, r.status === 404 ? 120_000 : 30_000);
    }
  }

  async stream(signal) {
    const { url, token } = this.request();
    const headers = { Accept: 'text/event-stream' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const resp = await fetch(url, { headers, signal, cache: 'no-store' });
    const type = resp.headers.get('Content-Type') || '';
    if (!resp.ok || !type.startsWith('text/event-stream') || !resp.body) {
      resp.body?.cancel().catch(() => {});
      return { status: resp.status };
    }
    this.stopPolling();
    this.setMode('live');
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let last = Date.now();
    const idle = setInterval(() => {
      if (Date.now() - last > IDLE_TIMEOUT) this.ctrl.abort();
    }, 5000);
    const feed = sseParser((ev) => {
      let data;
      try { data = JSON.parse(ev.data); } catch { return; } // a torn event: the next one comes
      this.dispatch(ev.event, data);
    }, (ms) => { this.retryMs = Math.max(500, ms); });
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        last = Date.now();
        feed(value);
      }
    } finally {
      clearInterval(idle);
    }
    return { connected: true };
  }

  startPolling() {
    if (this.mode === 'polling') return;
    this.setMode('polling');
    const gen = ++this.pollGen;
    (async () => {
      while (gen === this.pollGen && !this.stopped) {
        await this.pollOnce();
        await sleep(1000);
      }
    })();
  }

  stopPolling() { this.pollGen++; }
}

export class SaleFeed extends LiveFeed {
  // opts: saleId, token() → user JWT or '', onSale(sale), onReservation(res),
  // onMode('connecting'|'live'|'polling'), onError(err, rid) for failed polls.
  constructor(opts) {
    super({ onReservation() {}, ...opts });
    this.rids = [];
  }

  // setReservations changes the reservations followed; a live stream reconnects with the new set.
  setReservations(ids) {
    const next = [...new Set(ids)].slice(0, MAX_RESERVATIONS).sort();
    if (next.join('\n') === this.rids.join('\n')) return;
    this.rids = next;
    this.reconnect(); // the open stream carries the old set in its URL
    if (this.mode === 'polling') this.pollOnce();
  }

  // refresh asks for the current state now (e.g. when a countdown reaches zero).
  refresh() {
    if (this.mode !== 'live') this.pollOnce();
  }

  request() {
    const q = this.rids.map((r) => `reservation=${encodeURIComponent(r)}`).join('&');
    return {
      url: `/api/v1/sales/${encodeURIComponent(this.o.saleId)}/events${q ? `?${q}` : ''}`,
      token: this.rids.length ? this.o.token() : '',
    };
  }

  dispatch(event, data) {
    if (event === 'sale') this.o.onSale(data);
    else if (event === 'reservation') this.o.onReservation(data);
  }

  async pollOnce() {
    if (this.polling) return; // one poll at a time
    this.polling = true;
    try {
      try {
        this.o.onSale(await api('GET', `/api/v1/sales/${encodeURIComponent(this.o.saleId)}`));
      } catch (e) {
        this.o.onError(e, '');
      }
      for (const rid of this.rids) {
        if (this.stopped) break;
        try {
          this.o.onReservation(await api('GET', `/api/v1/reservations/${encodeURIComponent(rid)}`, { token: this.o.token() }));
        } catch (e) {
          this.o.onError(e, rid);
        }
      }
    } finally {
      this.polling = false;
    }
  }
}
