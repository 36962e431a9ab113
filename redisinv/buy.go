// The buy room: Buy's checks, then its doors to the local answers (localanswers.go) and the
// in-flight bound (inflight.go), the batching of one sale's buys into one buy.lua call, and the
// decoding of each buyer's answer. A segmented sale leaves through one door (segment.go
// buySegmented) and comes back through buy, one segment's buys batched as a sale's are.

package redisinv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// Buy runs buy.lua: docs/MODEL.md "Buy" in one script.
func (e *Engine) Buy(ctx context.Context, req seckill.BuyRequest) (seckill.BuyResult, error) {
	if !seckill.ValidID(req.SaleID) {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", req.SaleID)
	}
	if !seckill.ValidID(req.UserID) {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "user id must be 1–64 of [A-Za-z0-9_.-]")
	}
	if len(req.IdempotencyKey) > maxIdempotencyKey {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "idempotency key is longer than %d bytes", maxIdempotencyKey)
	}
	if !validAddr(req.ClientAddr) {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "client address must be at most 39 of [0-9a-f.:]")
	}
	q := min(max(req.Quantity, 0), maxExact) // the script answers invalid_argument for 0
	if in := e.segs.of(req.SaleID); in != nil {
		return e.segs.buySegmented(ctx, in, req, q)
	}
	res, err := e.buyGuarded(ctx, req, q)
	var sig *segSignal
	if errors.As(err, &sig) { // a segmented sale this instance had not seen yet (segment.go)
		return e.segs.buyNewlySegmented(ctx, req, q, sig)
	}
	return res, err
}

// buyAnswer decodes one buyer's answer of buy.lua.
func buyAnswer(req seckill.BuyRequest, r reply) (seckill.BuyResult, error) {
	switch r.code() {
	case "ok":
		return seckill.BuyResult{Reservation: reservationOf(req.SaleID, r), Replayed: r.int(1) == 1}, nil
	case "invalid_argument":
		if req.Quantity < 1 {
			return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "quantity must be at least 1")
		}
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "quantity %d × price is too large", req.Quantity)
	case "not_started":
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeNotStarted, "sale %s has not started", req.SaleID)
	case "ended":
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeEnded, "sale %s has ended", req.SaleID)
	case "limit_exceeded":
		if r.str(1) == "quantity" {
			return seckill.BuyResult{}, seckill.Errorf(seckill.CodeLimitExceeded, "quantity %d is over the per-user limit %d", req.Quantity, r.int(2))
		}
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeLimitExceeded, "user %q would hold more than %s", req.UserID, seckill.Units(r.int(2)))
	case "sold_out":
		if left := r.int(1); left > 0 {
			return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "only %s left unsold, fewer than the %d asked for", seckill.Units(left), req.Quantity)
		}
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "sold out")
	case "queue_full":
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeQueueFull, "every unit is held and the queue is full; try again later")
	case "rate_limited":
		return seckill.BuyResult{}, rateLimited(r)
	}
	if sig := segSignalOf(r); sig != nil {
		return seckill.BuyResult{}, sig // segment.go acts on it
	}
	return seckill.BuyResult{}, unexpected("buy", r)
}

// buyGuarded is Buy after its checks: the local answer if the sale's view has one
// (localanswers.go), else a place among the sale's buys in flight, else unavailable.
func (e *Engine) buyGuarded(ctx context.Context, req seckill.BuyRequest, q int) (seckill.BuyResult, error) {
	if ok, err := e.local.answer(req, q); ok {
		return seckill.BuyResult{}, err
	}
	c, ok := e.inflight.acquire(req.SaleID)
	if !ok {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeUnavailable,
			"too many buys of sale %s are waiting for the inventory on this instance; retry shortly", req.SaleID)
	}
	if c != nil {
		defer c.Add(-1)
	}
	return e.buy(ctx, &buyCall{req: req, q: q, random: e.random()})
}

// random returns 16 lowercase hex digits from crypto/rand, the random half of a reservation
// id. It reads 4 KiB at a time, so a buy pays for one system call per 512 reservations.
func (e *Engine) random() string {
	e.randMu.Lock()
	defer e.randMu.Unlock()
	if len(e.randBuf) < 8 {
		e.randBuf = make([]byte, 4096)
		_, _ = rand.Read(e.randBuf)
	}
	s := hex.EncodeToString(e.randBuf[:8])
	e.randBuf = e.randBuf[8:]
	return s
}

// Buys of one sale that arrive together are sent together: one buy.lua call for up to
// maxBatch buyers, which Redis runs as that many buys one after the other. The script's fixed
// costs (the round trip, the script's set-up, reading and writing the sale's state) are paid
// once per call instead of once per buy, which is where a hot sale's throughput comes from;
// rueidis' pipelining then overlaps the calls in flight. Nobody waits for a batch to fill: a
// buy that finds fewer than maxInFlight calls in flight for its sale starts a sender at once,
// which sends it alone; those that arrive while calls are in flight are taken by the next one.
// With maxInFlight calls in flight, Redis has the next call queued while it runs the current
// one.
//
// A sale's batcher stays in memory for the engine's life (it is a few words); buys reach it
// only for sale ids the service has found (service.Service checks the purchase token, and so
// the sale, first).
const (
	maxBatch    = 64 // buy.lua's limit; WithMaxBatch can lower it
	maxInFlight = 4
)

// buyCall is one Buy waiting for its answer.
type buyCall struct {
	ctx    context.Context // the buyer's; a call whose buyer gave up is not sent
	until  time.Time       // not sent after this (queued longer than the engine's timeout)
	req    seckill.BuyRequest
	tag    string // the segment's id (segplace.go segTag): the sale's id for a one-segment sale
	floor  uint64 // a segmented sale's seq floor (segment.go), 0 for none
	q      int
	random string
	done   chan struct{}
	res    seckill.BuyResult
	err    error
}

// saleBatcher queues the buys of one sale.
type saleBatcher struct {
	mu       sync.Mutex
	queue    []*buyCall
	inFlight int
}

// batcher finds the saleBatcher of a sale, and owns the senders (drain): each runs in a
// goroutine counted in wg, and Engine.Close waits for them. Once closed, a sender runs in the
// goroutine of the buy that needs it, so none is ever started that Close would not wait for.
type batcher struct {
	mu     sync.Mutex
	sales  map[string]*saleBatcher
	closed bool           // guarded by mu
	wg     sync.WaitGroup // one count per running sender goroutine; Add only while !closed
}

// goSend runs send in a goroutine the engine owns, or in this one once the engine is closed.
func (b *batcher) goSend(send func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		send()
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		send()
	}()
}

// close starts no more sender goroutines and waits for the running ones: each ends when its
// sale's queue is empty, and each of its calls is bounded by the engine's timeout.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *batcher) of(saleID string) *saleBatcher {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sales == nil {
		b.sales = map[string]*saleBatcher{}
	}
	sb := b.sales[saleID]
	if sb == nil {
		sb = &saleBatcher{}
		b.sales[saleID] = sb
	}
	return sb
}

// buy queues c and waits for its answer (or ctx).
func (e *Engine) buy(ctx context.Context, c *buyCall) (seckill.BuyResult, error) {
	c.done, c.ctx, c.until = make(chan struct{}), ctx, time.Now().Add(e.timeout)
	if c.tag == "" {
		c.tag = c.req.SaleID
	}
	if e.maxBatch == 1 { // every buy its own call, as many in flight as there are buyers
		e.sendBatch(c.tag, []*buyCall{c})
		return c.res, c.err
	}
	sb := e.batches.of(c.tag)
	sb.mu.Lock()
	sb.queue = append(sb.queue, c)
	start := sb.inFlight < maxInFlight
	if start {
		sb.inFlight++
	}
	sb.mu.Unlock()
	if start {
		e.batches.goSend(func() { e.drain(c.tag, sb) })
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// The buy may still happen (it may be in flight): a client retries with its
		// idempotency key, as after any timeout.
		return seckill.BuyResult{}, errUnavailable(ctx.Err())
	}
}

// drain is a sender: it sends the queued buys of one sale, e.maxBatch per call, until the queue
// is empty, and then ends. Its exit is the empty queue; every call it makes is bounded by the
// engine's timeout. Its goroutine is the engine's (goSend), awaited by Close: senders serve
// buyers who are waiting, so they are request work, not a background service, and run exactly
// as long as there are buys queued.
func (e *Engine) drain(saleID string, sb *saleBatcher) {
	for {
		sb.mu.Lock()
		n := min(len(sb.queue), e.maxBatch)
		if n == 0 {
			sb.inFlight--
			sb.mu.Unlock()
			return
		}
		batch := make([]*buyCall, 0, n)
		now := time.Now()
		for _, c := range sb.queue[:n] {
			if c.ctx.Err() != nil || now.After(c.until) {
				// Its buyer has given up or been answered unavailable: sending it would make
				// a hold that nobody knows about.
				c.err = errUnavailable(errors.New("redisinv: the buy waited too long to be sent"))
				close(c.done)
				continue
			}
			batch = append(batch, c)
		}
		sb.queue = sb.queue[n:]
		if len(sb.queue) == 0 {
			sb.queue = nil // let the backing array go
		}
		sb.mu.Unlock()
		if len(batch) > 0 {
			e.sendBatch(saleID, batch)
		}
	}
}

// sendBatch runs buy.lua for the batch and hands each buyer its answer. The call is bounded by
// the engine's timeout, not by any one buyer's context: it serves all of them.
//
// buy.lua (its header in lua/ is the whole contract):
//
//	KEYS   the sale's (or segment's) eight keys (keys)
//	ARGV   [1] clock; then 4 per buyer, 1 to 64 buyers: user id, quantity, idempotency key
//	       ('' for none), the random half of a new id (random); then, optionally, the seq
//	       floor of a segmented sale (seqFloor). With WithRateLimits, [2] is the gcra block
//	       (rateBlock) and each buyer has a fifth argument, its client address (ClientAddr)
//	reply  {'ok', answer per buyer...} or {'not_loaded'} / {'loading'}; each answer {'ok',
//	       replayed, res_reply...}, a refusal (buyAnswer) or a segment's signal (segSignalOf)
func (e *Engine) sendBatch(saleID string, batch []*buyCall) {
	args := make([]string, 0, 2+5*len(batch))
	if e.rateBlock == "" {
		for _, c := range batch {
			args = append(args, c.req.UserID, itoa(c.q), c.req.IdempotencyKey, c.random)
		}
	} else {
		args = append(args, e.rateBlock)
		for _, c := range batch {
			args = append(args, c.req.UserID, itoa(c.q), c.req.IdempotencyKey, c.random, c.req.ClientAddr)
		}
	}
	if fl := seqFloor(batch); fl > 0 {
		args = append(args, i64toa(int64(fl)))
	}
	// The script call has its own timeout (exec); this one also bounds the look-up in the
	// database when the sale turns out to be missing.
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.timeout)
	defer cancel()
	r, err := e.execTag(ctx, e.scripts.buy, saleID, args...)
	for i, c := range batch {
		switch {
		case err != nil:
			c.err = err
		case r.code() != "ok" || len(r) != len(batch)+1:
			c.err = unexpected("buy", r)
		default:
			sub, aerr := r[i+1].ToArray()
			if aerr != nil {
				c.err = unexpected("buy", r)
			} else {
				c.res, c.err = buyAnswer(c.req, reply(sub))
			}
		}
		close(c.done)
	}
}

// seqFloor is the highest seq floor of a batch's buys.
func seqFloor(batch []*buyCall) uint64 {
	var fl uint64
	for _, c := range batch {
		fl = max(fl, c.floor)
	}
	return fl
}

// goSend runs f in a goroutine the engine owns (Close waits for it): the batches' senders, and
// the local answers' reads of a view.
func (e *Engine) goSend(f func()) { e.batches.goSend(f) }
