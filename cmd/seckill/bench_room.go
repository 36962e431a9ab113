package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/rxstamp"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/pow"
)

// `seckill bench --waiting-room` (docs/BENCHMARKS.md "The waiting room"): the start instant of
// a sale with a waiting room, then the same crowd at the same sale shape without one, side by
// side. The crowd: --prequeue buyers join before the start (the draw's), the rest arrive over
// --arrival after it; each joins (solving the proof of work when the room asks for one),
// waits for its turn on the live ticket stream (or, past --streams per target, polling its
// ticket), and once admitted fetches the purchase path with its admission token, buys and
// pays. Checked (bench_room_check.go): the admission rate, nobody admitted twice, the draw
// recomputed from the published seed and entrants, the order of admission, and every buyer
// left waiting told sold out within --told-within of the last unit paid. Beside the tell it
// reports the servers' timing of it (bench_room_written.go) and, with --tell-reference, this
// client's against a bare SSE server (bench_room_tell.go).

// roomOptions are --waiting-room's flags.
type roomOptions struct {
	admitRate  int
	maxActive  int
	powBits    int
	arrival    time.Duration // the window over which the buyers after the start arrive
	prequeue   int           // buyers that join before the start
	lead       time.Duration // from the sale's creation to its start (the pre-queue joins in it)
	streams    int           // live ticket streams per target; the other buyers poll
	poll       time.Duration // longest pause between a polling buyer's reads of its ticket
	toldWithin time.Duration
	noRoom     bool // the side-by-side run without a room (on by default)
	tellRef    bool // the tell against a bare SSE server (bench_room_tell.go; on by default)
}

func (r roomOptions) validate(o benchOptions) error {
	switch {
	case r.admitRate < 0 || r.maxActive < 0 || r.admitRate == 0 && r.maxActive == 0:
		return errors.New("bench: --admit-rate and --max-active must not be negative, and one of them above 0")
	case r.powBits < 0 || r.powBits > seckill.MaxPowBits:
		return fmt.Errorf("bench: --pow-bits must be 0 to %d", seckill.MaxPowBits)
	case r.prequeue < 0 || r.prequeue > o.buyers:
		return errors.New("bench: --prequeue must be 0 to --buyers")
	case r.arrival < 0 || r.lead < time.Second || r.streams < 0 || r.poll < 100*time.Millisecond || r.toldWithin <= 0:
		return errors.New("bench: --arrival must not be negative, --lead at least 1s, --streams not negative, --poll at least 100ms, --told-within above 0")
	case o.report != "":
		return errors.New("bench: --waiting-room writes no Markdown report; use --json")
	case o.sales > 1 || o.segments > 1:
		return errors.New("bench: --waiting-room runs one sale of one segment (a sale with a waiting room has one)")
	}
	return nil
}

// roomRun is one side of the comparison in flight.
type roomRun struct {
	o            benchOptions
	r            roomOptions
	saleID       string
	room         bool
	start        time.Time // the sale's starts_at
	hc, phc, shc *http.Client
	webhook      []byte         // the built-in webhook scheme's secret: the bench signs the payment (nil: POST /pay)
	streams      []atomic.Int64 // streams open per target
	buyers       []*roomBuyer
	mu           sync.Mutex
	paid         int
	lastPay      time.Time
	// lastPayAck is when the bench learned of the last payment: the close was before it.
	lastPayAck time.Time
	// lastOpen is the latest server_time (Unix ns) of a ticket still waiting: the room was
	// open then, so it closed after it.
	lastOpen atomic.Int64
	// joins counts answered joins, for the progress line.
	joins, admitted, told atomic.Int64
}

// runRoomBench runs the room side, then the no-room side, prints both and checks the room's.
func runRoomBench(ctx context.Context, o benchOptions, r roomOptions, stdout, stderr io.Writer) error {
	if err := r.validate(o); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.deadline)
	defer cancel()
	// Joins and ticket reads share a bounded pool of connections per target; the purchase
	// (path, buy, payment) has its own, so that a crowd polling its tickets does not hold an
	// admitted buyer's purchase back; streams have theirs, bounded by --streams.
	tr := &http.Transport{MaxConnsPerHost: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	ptr := &http.Transport{MaxConnsPerHost: 128, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}
	// The streams' connections carry the kernel's receive times (rxstamp): when a close
	// reached a buyer, whatever this process's own delay in reading it.
	str := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second, DialContext: rxstamp.Dial}
	defer tr.CloseIdleConnections()
	defer ptr.CloseIdleConnections()
	defer str.CloseIdleConnections()
	mk := func(id string, room bool) *roomRun {
		return &roomRun{o: o, r: r, saleID: id, room: room, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second},
			phc: &http.Client{Transport: ptr, Timeout: 30 * time.Second},
			shc: &http.Client{Transport: str}, streams: make([]atomic.Int64, len(o.targets))}
	}
	withRoom := mk(o.saleID, true)
	head := stdout
	if o.asJSON {
		head = stderr
	}
	fmt.Fprintf(head, "seckill bench --waiting-room: %d buyers (%d before the start, the rest over %s), %d units, admission %d/s (burst %d), max active %d, proof of work %d bits, against %s\n",
		o.buyers, r.prequeue, r.arrival, o.units, r.admitRate, seckill.RoomPolicy{AdmitPerSecond: r.admitRate}.RoomBurst(), r.maxActive, r.powBits, strings.Join(o.targets, ", "))
	written, hasWritten := readCloseWritten(ctx, withRoom.hc, o.targets)
	obs, err := withRoom.run(ctx, stderr)
	if err != nil {
		return err
	}
	if after, ok := readCloseWritten(ctx, withRoom.hc, o.targets); ok && hasWritten {
		if d, ok := closeWrittenSince(written, after); ok {
			obs.written = d.report()
		}
	}
	if r.tellRef {
		if t, err := withRoom.tellReference(ctx, obs.written, stderr); err != nil {
			fmt.Fprintf(stderr, "no tell reference: %v\n", err)
		} else {
			obs.tell = t
		}
	}
	checks := checkRoom(obs)
	var plain *roomRun
	if r.noRoom {
		plain = mk(o.saleID+"-noroom", false)
		if _, err := plain.run(ctx, stderr); err != nil {
			return fmt.Errorf("the run without a room: %w", err)
		}
	}
	verifyNs := measureVerify(r.powBits)
	rp := roomReport(withRoom, plain, obs, checks, verifyNs)
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rp); err != nil {
			return err
		}
	} else {
		rp.writeText(stdout)
	}
	if failed := rp.failed(); len(failed) > 0 {
		return exitError("waiting-room check failed: " + strings.Join(failed, ", "))
	}
	return nil
}

// run creates the sale, sends the crowd and waits for every buyer to finish.
func (rr *roomRun) run(ctx context.Context, stderr io.Writer) (roomObservation, error) {
	o, r := rr.o, rr.r
	rr.start = time.Now().UTC().Add(r.lead).Truncate(time.Millisecond)
	ns := client.NewSale{
		ID: rr.saleID, Name: "seckill bench " + rr.saleID, PriceCents: 999, Stock: o.units,
		StartsAt: rr.start, EndsAt: rr.start.Add(10 * time.Minute), PerUserLimit: o.perUser,
		HoldSeconds: int(o.hold.Seconds()), QueueLimit: client.Ptr(0), Listed: client.Ptr(false),
	}
	policy := seckill.RoomPolicy{Order: seckill.RoomDraw, AdmitPerSecond: r.admitRate, MaxActive: r.maxActive}
	if rr.room {
		ns.WaitingRoom = &client.WaitingRoom{Order: seckill.RoomDraw, AdmitPerSecond: r.admitRate, MaxActive: r.maxActive, PowBits: r.powBits}
	}
	if _, err := o.admin(0).CreateSale(ctx, ns); err != nil {
		return roomObservation{}, fmt.Errorf("create sale: %w", err)
	}
	ob := roomObservation{rate: r.admitRate, burst: policy.RoomBurst(), order: seckill.RoomDraw, toldWithin: r.toldWithin}
	oo := o
	oo.saleID = rr.saleID
	if a, err := fetchAudit(ctx, o.targets[0], rr.saleID, o.adminToken, time.Now().Add(o.auditWait)); err != nil {
		return ob, fmt.Errorf("ask the target which payment gateway it runs (the sale's audit): %w", err)
	} else {
		switch {
		case a.Gateway == payment.MockName:
		case a.Gateway == payment.WebhookName && o.paymentSecret != "":
			rr.webhook = []byte(o.paymentSecret)
		default:
			return ob, fmt.Errorf("bench: --waiting-room pays through the mock gateway (POST /pay) or the built-in webhook scheme (--payment-secret); the targets run %q", a.Gateway)
		}
	}
	if rr.room {
		v, err := o.admin(0).WaitingRoom(ctx, rr.saleID)
		if err != nil {
			return ob, fmt.Errorf("read the room before the start: %w", err)
		}
		ob.commitmentBefore = v.Commitment
	}
	side := "with the room"
	if !rr.room {
		side = "without a room"
	}
	fmt.Fprintf(stderr, "%s: sale %s starts at %s\n", side, rr.saleID, rr.start.Format(time.RFC3339Nano))
	rr.buyers = make([]*roomBuyer, o.buyers)
	var wg sync.WaitGroup
	t0 := time.Now()
	stopProgress := make(chan struct{})
	go rr.progress(stderr, side, stopProgress)
	for i := range rr.buyers {
		b := &roomBuyer{user: fmt.Sprintf("%s-b%d", rr.saleID, i), prequeue: i < r.prequeue, rank: i}
		rr.buyers[i] = b
		// The pre-queue arrives evenly over the first half of the lead, the rest evenly over
		// --arrival from the start; without a room, the pre-queue is at the start, all at once.
		var at time.Time
		if b.prequeue {
			at = t0.Add(time.Duration(float64(r.lead/2) * float64(i) / float64(max(1, r.prequeue))))
			if !rr.room {
				at = rr.start
			}
		} else {
			after := o.buyers - r.prequeue
			at = rr.start.Add(time.Duration(float64(r.arrival) * float64(i-r.prequeue) / float64(max(1, after))))
		}
		wg.Go(func() {
			if !wait.Sleep(ctx, time.Until(at)) {
				return
			}
			if err := rr.buyer(ctx, i, b); err != nil && b.failure == "" {
				b.failure = err.Error()
			}
		})
	}
	wg.Wait()
	close(stopProgress)
	rr.mu.Lock()
	ob.soldOut, ob.lastPaid, ob.lastPaidAck = rr.paid >= o.units, rr.lastPay, rr.lastPayAck
	if open := time.Unix(0, rr.lastOpen.Load()); ob.soldOut && open.After(ob.lastPaid) && open.Before(ob.lastPaidAck) {
		// A ticket still waiting after the last payment was sent: the close came later still
		// (the bench and the targets read one clock: the same machine, or synchronised ones).
		ob.lastPaid = open
	}
	rr.mu.Unlock()
	ob.buyers = rr.buyers
	if !rr.room {
		return ob, nil
	}
	v, err := o.admin(0).WaitingRoom(ctx, rr.saleID)
	if err != nil {
		return ob, fmt.Errorf("read the room after the crowd: %w", err)
	}
	ob.commitment, ob.preQueue, ob.admitted = v.Commitment, v.PreQueue, v.Admitted
	if v.ClosedAt != nil {
		ob.closedAt = *v.ClosedAt
	}
	if v.Seed != nil {
		ob.seed = *v.Seed
	}
	ob.bypass = rr.probeBypass(ctx)
	for after := ""; ; {
		p, err := client.New(o.targets[0], client.WithHTTPClient(rr.hc), client.WithRetries(5, 0)).Entrants(ctx, rr.saleID, after, seckill.MaxDrawEntrantsPage)
		if err != nil {
			return ob, fmt.Errorf("read the room's entrants: %w", err)
		}
		ob.entrants = append(ob.entrants, p.Entrants...)
		if p.Next == "" || len(p.Entrants) == 0 {
			break
		}
		after = p.Next
	}
	return ob, nil
}

// probeBypass asks for the purchase path as a buyer who was never admitted: without a token,
// and with an admitted buyer's token. Each answer that is not 403 admission_required is listed.
func (rr *roomRun) probeBypass(ctx context.Context) []string {
	var bad []string
	outsider := &roomBuyer{user: rr.saleID + "-outsider"}
	c, err := rr.client(0, outsider, rr.hc)
	if err != nil {
		return []string{err.Error()}
	}
	if _, err := c.Path(ctx, rr.saleID); client.CodeOf(err) != seckill.CodeAdmissionRequired {
		bad = append(bad, fmt.Sprintf("GET /path without an admission token answered %v", err))
	}
	for i, b := range rr.buyers {
		if b.admittedAt.IsZero() {
			continue
		}
		bc, err := rr.client(i, b, rr.hc)
		if err != nil {
			return append(bad, err.Error())
		}
		tk, err := bc.Ticket(ctx, rr.saleID)
		if err != nil || tk.AdmissionToken == "" {
			break // the token expired: nothing to borrow
		}
		if _, err := c.AdmittedPath(ctx, rr.saleID, tk.AdmissionToken); client.CodeOf(err) != seckill.CodeAdmissionRequired {
			bad = append(bad, fmt.Sprintf("GET /path with another buyer's admission token answered %v", err))
		}
		break
	}
	return bad
}

func (rr *roomRun) progress(w io.Writer, side string, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		rr.mu.Lock()
		paid := rr.paid
		rr.mu.Unlock()
		fmt.Fprintf(w, "%s: %d joined, %d admitted, %d told sold out, %d paid\n", side, rr.joins.Load(), rr.admitted.Load(), rr.told.Load(), paid)
	}
}

// client is buyer i's client (targets round robin), retrying 429 and 503 as asked.
func (rr *roomRun) client(i int, b *roomBuyer, hc *http.Client) (*client.Client, error) {
	tok, err := httpapi.MintToken([]byte(rr.o.authSecret), b.user, time.Now(), time.Hour)
	if err != nil {
		return nil, err
	}
	return client.New(rr.o.targets[i%len(rr.o.targets)], client.WithToken(tok), client.WithHTTPClient(hc), client.WithRetries(20, 2*time.Second)), nil
}

// buyer is one buyer's whole visit.
func (rr *roomRun) buyer(ctx context.Context, i int, b *roomBuyer) error {
	c, err := rr.client(i, b, rr.hc)
	if err != nil {
		return err
	}
	if !rr.room {
		c, err := rr.client(i, b, rr.phc)
		if err != nil {
			return err
		}
		var p client.PurchasePath
		for {
			p, err = c.Path(ctx, rr.saleID)
			if client.CodeOf(err) == seckill.CodeNotStarted && wait.Sleep(ctx, 20*time.Millisecond) {
				continue // the bench's clock ran ahead of the server's
			}
			break
		}
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		return rr.buy(ctx, c, b, p.Path)
	}
	var proof *client.Proof
	if rr.r.powBits > 0 {
		ch, err := c.RoomChallenge(ctx, rr.saleID)
		if err != nil {
			return fmt.Errorf("challenge: %w", err)
		}
		t := time.Now()
		sol, err := pow.Solve(ctx, ch.Challenge, ch.Bits)
		if err != nil {
			return err
		}
		b.solve = time.Since(t)
		proof = &client.Proof{Challenge: ch.Challenge, Solution: sol}
	}
	t := time.Now()
	tk, err := c.JoinRoom(ctx, rr.saleID, proof)
	for try := 1; err != nil && client.CodeOf(err) == "" && ctx.Err() == nil && try < 3; try++ {
		// A connection the server closed as the join went out (EOF): a join is idempotent
		// (docs/API.md), so it is sent again, as a browser's retry would.
		t = time.Now()
		tk, err = c.JoinRoom(ctx, rr.saleID, proof)
	}
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	b.joinLat, b.joined, b.entrant = time.Since(t), true, tk.Entrant
	rr.joins.Add(1)
	if rr.observe(b, tk, "join") {
		return rr.afterTurn(ctx, i, b)
	}
	if n := &rr.streams[i%len(rr.streams)]; n.Add(1) <= int64(rr.r.streams) {
		done, err := rr.stream(ctx, i, b)
		n.Add(-1)
		if err == nil && done {
			return rr.afterTurn(ctx, i, b)
		}
	} else {
		n.Add(-1)
	}
	for {
		tk, err := c.Ticket(ctx, rr.saleID)
		if err != nil {
			return fmt.Errorf("ticket: %w", err)
		}
		if rr.observe(b, tk, "poll") {
			return rr.afterTurn(ctx, i, b)
		}
		pause := rr.r.poll
		if tk.WaitP50 != nil {
			pause = min(pause, max(100*time.Millisecond, time.Duration(*tk.WaitP50*float64(time.Second)/2)))
		}
		if !wait.Sleep(ctx, pause) {
			return ctx.Err()
		}
	}
}

// stream follows the buyer's live ticket until its turn or the room's close; false (or an
// error) when the stream ended first.
func (rr *roomRun) stream(ctx context.Context, i int, b *roomBuyer) (bool, error) {
	c, err := rr.client(i, b, rr.shc)
	if err != nil {
		return false, err
	}
	// The connection each event came on (a reconnect takes another), for its arrival time.
	var conn atomic.Pointer[rxstamp.Conn]
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		conn.Store(rxstamp.Of(ci.Conn))
	}})
	first := true
	for tk, err := range c.RoomEvents(ctx, rr.saleID) {
		if err != nil {
			return false, err
		}
		done := rr.observe(b, tk, "stream")
		if !b.told.IsZero() {
			b.atConnect = first
			if c := conn.Load(); c != nil {
				b.arrived, _ = c.Arrived()
			}
		}
		first = false
		if done {
			return true, nil
		}
	}
	return false, nil
}

// observe records a ticket; true when the buyer's wait is over (admitted, or told).
func (rr *roomRun) observe(b *roomBuyer, tk client.Ticket, by string) bool {
	now := time.Now()
	b.state, b.drawn, b.joinedAt = tk.State, tk.Drawn, tk.JoinedAt
	if tk.Index > 0 {
		b.index = tk.Index
	}
	if tk.AdmittedAt != nil {
		if b.admittedAt.IsZero() {
			b.admissions = 1
			rr.admitted.Add(1)
		} else if !tk.AdmittedAt.Equal(b.admittedAt) {
			b.admissions++
		}
		b.admittedAt = *tk.AdmittedAt
	}
	if tk.State == seckill.TicketWaiting {
		for t := tk.ServerTime.UnixNano(); ; {
			cur := rr.lastOpen.Load()
			if t <= cur || rr.lastOpen.CompareAndSwap(cur, t) {
				break
			}
		}
	}
	switch tk.State {
	case seckill.TicketAdmitted:
		b.token = tk.AdmissionToken
		return tk.AdmissionToken != ""
	case seckill.TicketSoldOut, seckill.TicketEnded:
		b.told, b.by = now, by
		rr.told.Add(1)
		return true
	}
	return false
}

// afterTurn buys with the admission token, unless the room closed first.
func (rr *roomRun) afterTurn(ctx context.Context, i int, b *roomBuyer) error {
	if b.state != seckill.TicketAdmitted {
		return nil
	}
	c, err := rr.client(i, b, rr.phc)
	if err != nil {
		return err
	}
	p, err := c.AdmittedPath(ctx, rr.saleID, b.token)
	if err != nil {
		return fmt.Errorf("admitted path: %w", err)
	}
	return rr.buy(ctx, c, b, p.Path)
}

// buy buys one unit and pays it through the targets' gateway, waiting until it is paid.
func (rr *roomRun) buy(ctx context.Context, c *client.Client, b *roomBuyer, path string) error {
	b.buyAt = time.Now()
	res, err := c.Buy(ctx, path, 1, "")
	// A refusal is an outcome: sold out, or every unit held and no queue (queue_limit 0: a
	// buyer who is refused now is not served later, in either run).
	refused := client.CodeOf(err) == seckill.CodeSoldOut || client.CodeOf(err) == seckill.CodeQueueFull
	b.buyLat, b.bought = time.Since(b.buyAt), err == nil || refused
	if refused {
		return nil
	}
	if err != nil {
		return fmt.Errorf("buy: %w", err)
	}
	if res.Reservation.Status != seckill.StatusHeld {
		return fmt.Errorf("buy answered %s", res.Reservation.Status)
	}
	if rr.webhook != nil {
		// The shop's payment service: the succeeded payment's signed webhook.
		ev := payment.Event{PaymentID: "pay-" + res.Reservation.ID, ReservationID: res.Reservation.ID,
			AmountCents: res.Reservation.AmountCents, Status: payment.StatusSucceeded}
		sent := time.Now()
		result, err := c.Webhook(ctx, rr.webhook, ev)
		if err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		if result == seckill.PaymentApplied || result == seckill.PaymentLateApplied {
			rr.paidNow(b, sent)
		}
		return nil
	}
	if _, err := c.Pay(ctx, res.Reservation.ID); client.CodeOf(err) == seckill.CodeHoldExpired {
		return nil // too slow to pay: an outcome (the unit went back on sale), not a failure
	} else if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	for {
		unpaid := time.Now() // the hold is read after this: if it reads paid, it was paid since
		if !wait.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
		cur, err := c.Reservation(ctx, res.Reservation.ID)
		if err != nil {
			return fmt.Errorf("reservation: %w", err)
		}
		if cur.Status == seckill.StatusHeld {
			continue
		}
		if cur.Status == seckill.StatusPaid {
			rr.paidNow(b, unpaid)
		}
		return nil
	}
}

// paidNow records b's unit as paid, at some time after since (the webhook's sending, or the
// read before the one that saw it paid). The room's close is timed from the latest since: no
// later than the last unit's payment, so the time to tell a waiting buyer is never understated.
func (rr *roomRun) paidNow(b *roomBuyer, since time.Time) {
	b.got, b.paidAt = true, since
	rr.mu.Lock()
	rr.paid++
	if since.After(rr.lastPay) {
		rr.lastPay = since
	}
	if now := time.Now(); now.After(rr.lastPayAck) {
		rr.lastPayAck = now
	}
	rr.mu.Unlock()
}

// measureVerify is the server's cost of one proof's check (pow.Verify of an accepted proof), in
// ns, measured in this process: what the targets spend per join on it (0: not measured).
func measureVerify(bits int) float64 {
	if bits == 0 {
		return 0
	}
	secret := []byte("seckill bench pow verify secret!")
	now := time.Now()
	ch, err := pow.Issue(secret, "bench-sale", "bench-user", bits, now)
	if err != nil {
		return 0
	}
	s := ch.String()
	sol, err := pow.Solve(context.Background(), s, bits)
	if err != nil {
		return 0
	}
	const n = 20000
	t := time.Now()
	for range n {
		if pow.Verify(secret, s, sol, "bench-sale", "bench-user", now, time.Minute) != nil {
			return 0
		}
	}
	return float64(time.Since(t).Nanoseconds()) / n
}

// side is one side's figures in the report.
type roomSide struct {
	Sale          string  `json:"sale"`
	Buyers        int     `json:"buyers"`
	Failed        int     `json:"failed"`
	FirstFailure  string  `json:"first_failure,omitempty"`
	Paid          int     `json:"paid"`
	Buys          int     `json:"buys"`
	BuysPerSecMax int     `json:"buys_per_second_max"`
	BuyP50Ms      float64 `json:"buy_p50_ms"`
	BuyP99Ms      float64 `json:"buy_p99_ms"`
	// RhoOutcome is the rank correlation of arrival order and getting a unit (1) or not (0):
	// negative, the earlier the likelier; near 0, arrival did not matter.
	RhoOutcome float64 `json:"rho_arrival_outcome"`
	// RhoServed is the rank correlation of arrival order and the order buys were sent, among
	// the buyers who bought.
	RhoServed float64 `json:"rho_arrival_served"`
	// RhoPreQueue is RhoServed among the pre-queue's buyers only: with a room their order is
	// the draw's (near 0), without one whoever sends first at the start.
	RhoPreQueue float64 `json:"rho_arrival_served_prequeue"`
}

type roomReportJSON struct {
	WithRoom   roomSide       `json:"with_room"`
	WithoutRm  *roomSide      `json:"without_room,omitempty"`
	JoinP50Ms  float64        `json:"join_p50_ms"`
	JoinP99Ms  float64        `json:"join_p99_ms"`
	SolveP50Ms float64        `json:"pow_solve_p50_ms,omitempty"`
	SolveP99Ms float64        `json:"pow_solve_p99_ms,omitempty"`
	VerifyUs   float64        `json:"pow_verify_us,omitempty"`
	Admitted   int64          `json:"admitted"`
	PreQueue   int64          `json:"pre_queue"`
	Streamed   int            `json:"told_by_stream"`
	Polled     int            `json:"told_by_poll"`
	AtJoin     int            `json:"told_at_join"` // joined after the close: the join answered sold_out
	States     map[string]int `json:"last_states"`  // the buyers' last ticket states
	ToldP50Ms  float64        `json:"told_after_last_paid_p50_ms"`
	ToldMaxMs  float64        `json:"told_after_last_paid_max_ms"`
	// ToldLow… are from when the bench learned of the last payment (the payment's answer),
	// after the close: a lower bound, where Told… is an upper one (from the payment's sending).
	ToldLowP50Ms float64 `json:"told_after_last_paid_answer_p50_ms"`
	ToldLowMaxMs float64 `json:"told_after_last_paid_answer_max_ms"`
	// ToldClosed… are from the room's closed_at (the checked figure): the bench's clock against
	// the engine's, one clock when they share a machine. A buyer told by stream is told when
	// the event reached its socket (roomBuyer.toldAt), as the Told… figures above; ReadClosed…
	// are when this process read it, later when it is short of CPU.
	ToldClosedP50Ms float64 `json:"told_after_closed_at_p50_ms"`
	ToldClosedMaxMs float64 `json:"told_after_closed_at_max_ms"`
	ReadClosedP50Ms float64 `json:"read_after_closed_at_p50_ms"`
	ReadClosedMaxMs float64 `json:"read_after_closed_at_max_ms"`
	// Arrived is how many of the buyers told by stream have the event's arrival time (all of
	// them on Linux; none where the kernel gives no receive timestamps).
	Arrived int `json:"told_by_stream_arrival_known"`
	// AtConnect… are the buyers told by stream whose stream connected after the close (its
	// first event was the close): they joined before it, and are told when they connect.
	AtConnect      int     `json:"told_at_stream_connect"`
	AtConnectMaxMs float64 `json:"told_at_stream_connect_after_closed_at_max_ms"`
	// CloseWritten is the servers' side of the same (closeWritten): absent when a target does
	// not serve its metrics.
	CloseWritten *closeWrittenJSON `json:"close_written,omitempty"`
	// TellReference is this client reading as many streams told at once by a bare server
	// (measureTell): absent with --tell-reference=false or when no buyer was told by stream.
	TellReference *tellReferenceJSON `json:"tell_reference,omitempty"`
	Checks        []struct {
		Name       string   `json:"name"`
		What       string   `json:"what"`
		OK         bool     `json:"ok"`
		Violations []string `json:"violations,omitempty"`
	} `json:"checks"`
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sideOf(rr *roomRun) roomSide {
	s := roomSide{Sale: rr.saleID, Buyers: len(rr.buyers)}
	var lats []time.Duration
	var sends []time.Time
	var arr, got, arrB, served, arrP, servedP []float64
	for _, b := range rr.buyers {
		if b.failure != "" {
			s.Failed++
			if s.FirstFailure == "" {
				s.FirstFailure = b.failure
			}
		}
		outcome := 0.0
		if b.got {
			s.Paid++
			outcome = 1
		}
		arr, got = append(arr, float64(b.rank)), append(got, outcome)
		if b.bought {
			s.Buys++
			lats, sends = append(lats, b.buyLat), append(sends, b.buyAt)
			arrB, served = append(arrB, float64(b.rank)), append(served, float64(b.buyAt.UnixNano()))
			if b.prequeue {
				arrP, servedP = append(arrP, float64(b.rank)), append(servedP, float64(b.buyAt.UnixNano()))
			}
		}
	}
	s.BuysPerSecMax = maxPerSecond(sends)
	s.BuyP50Ms, s.BuyP99Ms = msOf(quantile(lats, .5)), msOf(quantile(lats, .99))
	s.RhoOutcome, s.RhoServed, s.RhoPreQueue = spearman(arr, got), spearman(arrB, served), spearman(arrP, servedP)
	return s
}

func roomReport(withRoom, plain *roomRun, ob roomObservation, checks []roomCheck, verifyNs float64) roomReportJSON {
	rp := roomReportJSON{WithRoom: sideOf(withRoom), Admitted: ob.admitted, PreQueue: ob.preQueue, CloseWritten: ob.written, TellReference: ob.tell}
	if plain != nil {
		s := sideOf(plain)
		rp.WithoutRm = &s
	}
	var joins, solves, told, toldLow, toldClosed, readClosed []time.Duration
	rp.States = map[string]int{}
	for _, b := range withRoom.buyers {
		rp.States[cmp.Or(b.state, "none")]++
		if b.joined {
			joins = append(joins, b.joinLat)
		}
		if b.solve > 0 {
			solves = append(solves, b.solve)
		}
		switch {
		case b.told.IsZero() || !ob.soldOut:
		case b.by == "join":
			rp.AtJoin++
		default:
			at := b.toldAt()
			told = append(told, max(0, at.Sub(ob.lastPaid)))
			toldLow = append(toldLow, max(0, at.Sub(ob.lastPaidAck)))
			if !ob.closedAt.IsZero() {
				toldClosed = append(toldClosed, max(0, at.Sub(ob.closedAt)))
				readClosed = append(readClosed, max(0, b.told.Sub(ob.closedAt)))
			}
			if b.by == "stream" {
				rp.Streamed++
				if !b.arrived.IsZero() {
					rp.Arrived++
				}
				if b.atConnect {
					rp.AtConnect++
					if !ob.closedAt.IsZero() {
						rp.AtConnectMaxMs = max(rp.AtConnectMaxMs, msOf(at.Sub(ob.closedAt)))
					}
				}
			} else {
				rp.Polled++
			}
		}
	}
	rp.JoinP50Ms, rp.JoinP99Ms = msOf(quantile(joins, .5)), msOf(quantile(joins, .99))
	rp.SolveP50Ms, rp.SolveP99Ms = msOf(quantile(solves, .5)), msOf(quantile(solves, .99))
	rp.VerifyUs = verifyNs / 1000
	rp.ToldP50Ms, rp.ToldMaxMs = msOf(quantile(told, .5)), msOf(quantile(told, 1))
	rp.ToldLowP50Ms, rp.ToldLowMaxMs = msOf(quantile(toldLow, .5)), msOf(quantile(toldLow, 1))
	rp.ToldClosedP50Ms, rp.ToldClosedMaxMs = msOf(quantile(toldClosed, .5)), msOf(quantile(toldClosed, 1))
	rp.ReadClosedP50Ms, rp.ReadClosedMaxMs = msOf(quantile(readClosed, .5)), msOf(quantile(readClosed, 1))
	for _, c := range checks {
		rp.Checks = append(rp.Checks, struct {
			Name       string   `json:"name"`
			What       string   `json:"what"`
			OK         bool     `json:"ok"`
			Violations []string `json:"violations,omitempty"`
		}{c.name, c.what, len(c.bad) == 0, c.bad})
	}
	if rp.WithRoom.Failed > 0 {
		rp.Checks = append(rp.Checks, struct {
			Name       string   `json:"name"`
			What       string   `json:"what"`
			OK         bool     `json:"ok"`
			Violations []string `json:"violations,omitempty"`
		}{"buyers_finished", "every buyer of the room's sale finished without an unexpected error", false,
			[]string{fmt.Sprintf("%d buyers failed; the first: %s", rp.WithRoom.Failed, rp.WithRoom.FirstFailure)}})
	}
	return rp
}

func (rp roomReportJSON) failed() []string {
	var out []string
	for _, c := range rp.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

func (rp roomReportJSON) writeText(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\twith the room\twithout a room")
	row := func(name string, f func(roomSide) string) {
		other := "—"
		if rp.WithoutRm != nil {
			other = f(*rp.WithoutRm)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(rp.WithRoom), other)
	}
	row("sale", func(s roomSide) string { return s.Sale })
	row("buyers (failed)", func(s roomSide) string { return fmt.Sprintf("%d (%d)", s.Buyers, s.Failed) })
	row("units paid", func(s roomSide) string { return fmt.Sprint(s.Paid) })
	row("buys at the origin", func(s roomSide) string { return fmt.Sprint(s.Buys) })
	row("most buys in 1 s", func(s roomSide) string { return fmt.Sprint(s.BuysPerSecMax) })
	row("buy p50 / p99", func(s roomSide) string { return fmt.Sprintf("%.1f / %.1f ms", s.BuyP50Ms, s.BuyP99Ms) })
	row("ρ(arrival, got a unit)", func(s roomSide) string { return fmt.Sprintf("%+.3f", s.RhoOutcome) })
	row("ρ(arrival, order served)", func(s roomSide) string { return fmt.Sprintf("%+.3f", s.RhoServed) })
	row("  the same, pre-queue only", func(s roomSide) string { return fmt.Sprintf("%+.3f", s.RhoPreQueue) })
	_ = tw.Flush()
	fmt.Fprintf(w, "\nroom: %d in the pre-queue, %d admitted; join p50 %.1f ms, p99 %.1f ms; the buyers' last ticket states %v\n", rp.PreQueue, rp.Admitted, rp.JoinP50Ms, rp.JoinP99Ms, rp.States)
	if rp.VerifyUs > 0 {
		fmt.Fprintf(w, "proof of work: solve p50 %.1f ms, p99 %.1f ms per join (client); verify %.2f µs per join (server, pow.Verify)\n", rp.SolveP50Ms, rp.SolveP99Ms, rp.VerifyUs)
	}
	fmt.Fprintf(w, "told sold out while waiting: %d by stream, %d by polling; %d more joined after the close and were told by the join\n",
		rp.Streamed, rp.Polled, rp.AtJoin)
	fmt.Fprintf(w, "  after the room's closed_at (checked; a stream's event when it reached the buyer's socket) p50 %.0f ms, max %.0f ms; after the last payment's sending p50 %.0f ms, max %.0f ms, after its answer p50 %.0f ms, max %.0f ms\n",
		rp.ToldClosedP50Ms, rp.ToldClosedMaxMs, rp.ToldP50Ms, rp.ToldMaxMs, rp.ToldLowP50Ms, rp.ToldLowMaxMs)
	fmt.Fprintf(w, "  read by this bench p50 %.0f ms, max %.0f ms after closed_at (later than the arrival when the bench is short of CPU); arrival known for %d of the %d told by stream\n",
		rp.ReadClosedP50Ms, rp.ReadClosedMaxMs, rp.Arrived, rp.Streamed)
	fmt.Fprintf(w, "  %d of them joined before the close and connected their stream after it (told at connect), the last %.0f ms after closed_at\n",
		rp.AtConnect, rp.AtConnectMaxMs)
	if c := rp.CloseWritten; c != nil {
		fmt.Fprintf(w, "  the servers wrote it to the %d streams open at the close: p50 %s, p99 %s, the last %s after closed_at (%s)\n",
			c.Streams, msBound(c.P50Ms), msBound(c.P99Ms), msBound(c.MaxMs), httpapi.CloseWrittenMetric)
	}
	if t := rp.TellReference; t != nil {
		t.writeText(w)
	}
	for _, c := range rp.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "check %-16s %-6s %s\n", c.Name, verdict, c.What)
		for _, v := range c.Violations {
			fmt.Fprintf(w, "  violation: %s\n", v)
		}
	}
}
