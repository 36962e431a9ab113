package main

import (
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
// client's against a bare SSE server (bench_room_tell.go); bench_room_report.go prints it all.

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
