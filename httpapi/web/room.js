// TicketFeed: the buyer's live ticket in a sale's waiting room, from
// GET /api/v1/sales/{id}/waiting-room/events; while the stream is unavailable it polls
// GET .../waiting-room/ticket every second (sse.js's LiveFeed).
// joinRoom joins the room, solving the room's proof of work first when it asks for one.

import { api, ApiError } from 'seckill/common';
import { LiveFeed } from 'seckill/sse';

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

export class TicketFeed extends LiveFeed {
  // opts: saleId, token() → user JWT, onTicket(ticket), onMode('connecting'|'live'|'polling'),
  // onError(err) for failed polls.
  request() {
    return { url: `${roomURL(this.o.saleId)}/events`, token: this.o.token() };
  }

  dispatch(event, data) {
    if (event === 'ticket') this.o.onTicket(data);
  }

  async pollOnce() {
    try {
      this.o.onTicket(await api('GET', `${roomURL(this.o.saleId)}/ticket`, { token: this.o.token() }));
    } catch (e) {
      if (e instanceof ApiError) this.o.onError(e);
    }
  }
}
