// TicketFeed: the buyer's live ticket in a sale's waiting room, from
// GET /api/v1/sales/{id}/waiting-room/events (read with fetch(), which can send the
// Authorization header EventSource cannot). While the stream is unavailable it polls
// GET .../waiting-room/ticket every second, and tries the stream again with a backoff.
// joinRoom joins the room, solving the room's proof of work first when it asks for one.

import { api, ApiError, sleep } from 'seckill/common';
import { sseParser } from 'seckill/sse';

const IDLE_TIMEOUT = 40_000; // the server pings every 15 s

const roomURL = (saleId) => `/api/v1/sales/${encodeURIComponent(saleId)}/waiting-room`;

// joinRoom joins the sale's room (idempotent) and returns the ticket. With pow_bits above 0 it
// fetches a challenge and solves it with the shop's solver (/assets/pow.js), loaded only then.
export async function joinRoom(saleId, token, powBits, onSolving = () => {}) {
  let body;
  if (powBits > 0) {
    const c = await api('GET', `${roomURL(saleId)}/challenge`, { token });
    onSolving(true);
    try {
      const pow = await import('/assets/pow.js');
      const solution = await pow.solve(c.challenge, c.bits);
      body = { pow: { challenge: c.challenge, solution } };
    } finally {
      onSolving(false);
    }
  }
  return api('POST', `${roomURL(saleId)}/join`, { token, body });
}

export class TicketFeed {
  // opts: saleId, token() → user JWT, onTicket(ticket), onMode('connecting'|'live'|'polling'),
  // onError(err) for failed polls.
  constructor(opts) {
    this.o = { onMode() {}, onError() {}, ...opts };
    this.stopped = true;
    this.mode = '';
    this.pollGen = 0;
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

  setMode(mode) {
    if (this.mode === mode) return;
    this.mode = mode;
    this.o.onMode(mode);
  }

  async run() {
    let backoff = 1000;
    while (!this.stopped) {
      this.ctrl = new AbortController();
      let r;
      try {
        r = await this.stream(this.ctrl.signal);
      } catch (e) {
        r = { error: e };
      }
      if (this.stopped) return;
      this.startPolling();
      await new Promise((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, backoff * (0.8 + Math.random() * 0.4));
      });
      this.wake = null;
      backoff = Math.min(backoff * 2, r.status === 404 ? 120_000 : 30_000);
    }
  }

  async stream(signal) {
    const resp = await fetch(`${roomURL(this.o.saleId)}/events`, {
      headers: { Accept: 'text/event-stream', Authorization: `Bearer ${this.o.token()}` }, signal, cache: 'no-store',
    });
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
      if (ev.event !== 'ticket') return;
      try { this.o.onTicket(JSON.parse(ev.data)); } catch { /* a torn event: the next one comes */ }
    });
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
        try {
          this.o.onTicket(await api('GET', `${roomURL(this.o.saleId)}/ticket`, { token: this.o.token() }));
        } catch (e) {
          if (e instanceof ApiError) this.o.onError(e);
        }
        await sleep(1000);
      }
    })();
  }

  stopPolling() { this.pollGen++; }
}
