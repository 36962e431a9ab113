package seckilltest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seckill-go/seckill"
)

// modelRounds is how many rapid.Check rounds the Model subtest runs (each of -rapid.checks
// tests, 100 by default): the bugs that need a full sale, a queue and a payment in the right
// order take a few hundred random runs to turn up reliably. -short runs one round; ModelRounds
// sets another number for a variant configuration.
const modelRounds = 5

// testModel drives the engine and a fresh Model side by side through random sales and random
// operations, and requires the same answers after every step (pgregory.net/rapid shrinks a
// failure to a short sequence of steps and prints how to replay it).
func testModel(t *testing.T, newEngine NewInventory, rounds int) {
	if testing.Short() {
		rounds = 1
	}
	for range rounds {
		rapid.Check(t, func(rt *rapid.T) {
			m := newMachine(t, rt, newEngine)
			actions := m.actions()
			// Four Repeats on one machine, about 120 steps (one Repeat averages 30): enough to
			// sell a sale out, fill its queue, expire holds and end the sale.
			for range 4 {
				rt.Repeat(actions)
			}
		})
		if t.Failed() {
			return
		}
	}
}

// actions are the machine's steps for rapid's Repeat, which draws them uniformly by name: buys
// and payments get several names so that most steps build up holds, queues and sales.
func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"Buy1":     m.buy,
		"Buy2":     m.buy,
		"Buy3":     m.buy,
		"Buy4":     m.buy,
		"Buy5":     m.buy,
		"Buy6":     m.buy,
		"Pay1":     m.pay,
		"Pay2":     m.pay,
		"Pay3":     m.pay,
		"Cancel1":  m.cancel,
		"Cancel2":  m.cancel,
		"Advance1": m.advance,
		"Advance2": m.advance,
		"AddStock": m.addStock,
		"Close":    m.closeSale,
		"Reclaim":  m.reclaim,
		"Observe":  m.check,
	}
}

// machineUsers are the buyers of the state machine: enough to sell small sales out.
var machineUsers = []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"}

// machine is one run of the state machine. Reservation ids differ between the engine and the
// model, so reservations are known by their creation index: eIDs[i] and mIDs[i] are the same
// reservation.
type machine struct {
	ctx      context.Context
	clock    *ManualClock
	eng, mod seckill.Inventory

	sales []seckill.Sale // as loaded
	sold0 []int          // sold given to LoadSale

	eIDs, mIDs  []string
	eIdx, mIdx  map[string]int
	resSale     []int // sale index of each reservation
	resQuantity []int
	resUser     []string
	lastStatus  []seckill.ReservationStatus // as the last check read them
	paymentIDs  []string
	nextPayment int
}

func newMachine(t *testing.T, rt *rapid.T, newEngine NewInventory) *machine {
	clock := NewManualClock(epoch)
	m := &machine{
		ctx: context.Background(), clock: clock, eng: newEngine(t, clock), mod: NewModel(clock),
		eIdx: map[string]int{}, mIdx: map[string]int{},
	}
	n := rapid.SampledFrom([]int{1, 1, 2}).Draw(rt, "sales")
	for i := range n {
		stock := rapid.SampledFrom([]int{2, 1, 3, 0, 5, 8}).Draw(rt, "stock")
		hb := 0
		if rapid.IntRange(0, 3).Draw(rt, "with_holdback") == 0 {
			hb = rapid.IntRange(0, stock).Draw(rt, "holdback")
		}
		start := time.Duration(rapid.SampledFrom([]int{0, -1, 0, 2}).Draw(rt, "start_s")) * time.Second
		length := time.Duration(rapid.SampledFrom([]int{60, 30, 8}).Draw(rt, "length_s")) * time.Second
		in := seckill.SaleInput{
			ID:           fmt.Sprintf("s%d", i+1),
			PriceCents:   ptr(rapid.SampledFrom([]int64{100, 0, 1, 999}).Draw(rt, "price")),
			Stock:        &stock,
			Holdback:     hb,
			StartsAt:     ptr(epoch.Add(start)),
			EndsAt:       ptr(epoch.Add(start + length)),
			PerUserLimit: ptr(rapid.SampledFrom([]int{2, 1, 3}).Draw(rt, "per_user_limit")),
			HoldSeconds:  ptr(rapid.SampledFrom([]int{3, 5, 2, 1}).Draw(rt, "hold_seconds")),
			QueueLimit:   ptr(rapid.SampledFrom([]int{3, 1, 6, 0, 2}).Draw(rt, "queue_limit")),
		}
		s, err := seckill.NewSale(in, epoch)
		if err != nil {
			rt.Fatalf("NewSale: %v", err)
		}
		sold := 0
		if rapid.IntRange(0, 3).Draw(rt, "preloaded") == 3 {
			sold = rapid.IntRange(0, s.Sellable()).Draw(rt, "sold")
		}
		if err := m.eng.LoadSale(m.ctx, s, sold); err != nil {
			rt.Fatalf("engine LoadSale(%+v, %d): %v", s, sold, err)
		}
		if err := m.mod.LoadSale(m.ctx, s, sold); err != nil {
			rt.Fatalf("model LoadSale(%+v, %d): %v", s, sold, err)
		}
		m.sales = append(m.sales, s)
		m.sold0 = append(m.sold0, sold)
	}
	m.check(rt)
	return m
}

func (m *machine) at() string { return m.clock.Now().Sub(epoch).String() }

// pickSale returns a loaded sale's id and index, or now and then an unknown id and -1.
func (m *machine) pickSale(rt *rapid.T) (string, int) {
	if rapid.IntRange(0, 19).Draw(rt, "unknown_sale") == 19 {
		return "nosuch", -1
	}
	i := rapid.IntRange(0, len(m.sales)-1).Draw(rt, "sale")
	return m.sales[i].ID, i
}

// pickReservation returns the engine's and the model's id of a known reservation, or now and
// then the same unknown id for both, and the index (-1 when unknown). Half the time it picks
// one whose status (at the last check) is one of prefer, where the interesting cases are.
func (m *machine) pickReservation(rt *rapid.T, prefer ...seckill.ReservationStatus) (string, string, int) {
	if len(m.eIDs) == 0 || rapid.IntRange(0, 9).Draw(rt, "unknown_reservation") == 9 {
		id := rapid.SampledFrom([]string{"nosuch", seckill.ReservationID("s1", make([]byte, 16))}).Draw(rt, "unknown_id")
		return id, id, -1
	}
	var preferred []int
	for i, st := range m.lastStatus {
		if slices.Contains(prefer, st) {
			preferred = append(preferred, i)
		}
	}
	var i int
	if len(preferred) > 0 && rapid.Bool().Draw(rt, "preferred") {
		i = rapid.SampledFrom(preferred).Draw(rt, "reservation")
	} else {
		i = rapid.IntRange(0, len(m.eIDs)-1).Draw(rt, "reservation")
	}
	return m.eIDs[i], m.mIDs[i], i
}

func (m *machine) sameErr(rt *rapid.T, what string, eErr, mErr error) {
	rt.Helper()
	if seckill.ErrorCode(eErr) != seckill.ErrorCode(mErr) {
		rt.Fatalf("%s at %s: engine error %v, model error %v", what, m.at(), eErr, mErr)
	}
}

// sameRes requires the engine's and the model's view of one reservation to agree.
func (m *machine) sameRes(rt *rapid.T, what string, e, o seckill.Reservation) {
	rt.Helper()
	if (e.ID == "") != (o.ID == "") {
		rt.Fatalf("%s at %s: engine reservation %+v, model %+v", what, m.at(), e, o)
	}
	if o.ID == "" {
		return
	}
	ei, eok := m.eIdx[e.ID]
	oi, ook := m.mIdx[o.ID]
	if !eok || !ook || ei != oi {
		rt.Fatalf("%s at %s: engine returned reservation #%d (%s, known %v), model #%d", what, m.at(), ei, e.ID, eok, oi)
	}
	fail := func(field string, ev, ov any) {
		rt.Helper()
		rt.Fatalf("%s at %s, reservation #%d: engine %s %v, model %v\nengine %+v\nmodel  %+v", what, m.at(), ei, field, ev, ov, e, o)
	}
	switch {
	case e.SaleID != o.SaleID:
		fail("sale_id", e.SaleID, o.SaleID)
	case e.UserID != o.UserID:
		fail("user_id", e.UserID, o.UserID)
	case e.Quantity != o.Quantity:
		fail("quantity", e.Quantity, o.Quantity)
	case e.Status != o.Status:
		fail("status", e.Status, o.Status)
	case e.Position != o.Position:
		fail("position", e.Position, o.Position)
	case e.AmountCents != o.AmountCents:
		fail("amount_cents", e.AmountCents, o.AmountCents)
	case e.IdempotencyKey != o.IdempotencyKey:
		fail("idempotency key", e.IdempotencyKey, o.IdempotencyKey)
	case !e.CreatedAt.Equal(o.CreatedAt):
		fail("created_at", e.CreatedAt, o.CreatedAt)
	case (e.ExpiresAt == nil) != (o.ExpiresAt == nil):
		fail("expires_at", e.ExpiresAt, o.ExpiresAt)
	case e.ExpiresAt != nil && !e.ExpiresAt.Equal(*o.ExpiresAt):
		fail("expires_at", e.ExpiresAt.Sub(epoch), o.ExpiresAt.Sub(epoch))
	case o.Status == seckill.StatusPaid && e.PaymentID != o.PaymentID:
		fail("payment_id", e.PaymentID, o.PaymentID)
	}
}

func (m *machine) sameSale(rt *rapid.T, what string, e, o seckill.Sale, est, ost seckill.StockState) {
	rt.Helper()
	if e.ID != o.ID || e.Name != o.Name || e.PriceCents != o.PriceCents || e.Stock != o.Stock ||
		e.Holdback != o.Holdback || e.PerUserLimit != o.PerUserLimit || e.HoldSeconds != o.HoldSeconds ||
		e.QueueLimit != o.QueueLimit || !e.StartsAt.Equal(o.StartsAt) || !e.EndsAt.Equal(o.EndsAt) {
		rt.Fatalf("%s at %s: engine sale %+v, model sale %+v", what, m.at(), e, o)
	}
	if est != ost {
		rt.Fatalf("%s at %s: engine stock state %+v, model %+v", what, m.at(), est, ost)
	}
}

func (m *machine) buy(rt *rapid.T) {
	saleID, si := m.pickSale(rt)
	// Mostly a quantity within the per-user limit; now and then 0 or more than the limit.
	limit := 3
	if si >= 0 {
		limit = m.sales[si].PerUserLimit
	}
	q := rapid.IntRange(1, limit).Draw(rt, "quantity")
	if rapid.IntRange(0, 7).Draw(rt, "odd_quantity") == 7 {
		q = rapid.SampledFrom([]int{0, limit + 1, 4}).Draw(rt, "odd")
	}
	req := seckill.BuyRequest{
		SaleID:         saleID,
		UserID:         m.pickUser(rt, si),
		Quantity:       q,
		IdempotencyKey: rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(rt, "key"),
	}
	er, eErr := m.eng.Buy(m.ctx, req)
	or, oErr := m.mod.Buy(m.ctx, req)
	what := fmt.Sprintf("Buy(%+v)", req)
	m.sameErr(rt, what, eErr, oErr)
	if oErr == nil {
		if er.Replayed != or.Replayed {
			rt.Fatalf("%s at %s: engine Replayed %v, model %v", what, m.at(), er.Replayed, or.Replayed)
		}
		if !or.Replayed {
			if _, dup := m.eIdx[er.Reservation.ID]; dup || er.Reservation.ID == "" {
				rt.Fatalf("%s at %s: new reservation has the id %q of an earlier one", what, m.at(), er.Reservation.ID)
			}
			i := len(m.eIDs)
			m.eIDs, m.mIDs = append(m.eIDs, er.Reservation.ID), append(m.mIDs, or.Reservation.ID)
			m.eIdx[er.Reservation.ID], m.mIdx[or.Reservation.ID] = i, i
			m.resSale = append(m.resSale, slices.IndexFunc(m.sales, func(s seckill.Sale) bool { return s.ID == saleID }))
			m.resQuantity = append(m.resQuantity, req.Quantity)
			m.resUser = append(m.resUser, req.UserID)
			m.lastStatus = append(m.lastStatus, or.Reservation.Status)
		}
		m.sameRes(rt, what, er.Reservation, or.Reservation)
	}
	m.check(rt)
}

// pickUser returns a user, most of the time one with room under the per-user limit of sale si
// (as of the last check), so that buys reach the stock rules instead of limit_exceeded.
func (m *machine) pickUser(rt *rapid.T, si int) string {
	if si < 0 || rapid.IntRange(0, 3).Draw(rt, "any_user") == 3 {
		return rapid.SampledFrom(machineUsers).Draw(rt, "user")
	}
	units := map[string]int{}
	for i, st := range m.lastStatus {
		if m.resSale[i] == si && (st == seckill.StatusHeld || st == seckill.StatusQueued || st == seckill.StatusPaid) {
			units[m.resUser[i]] += m.resQuantity[i]
		}
	}
	var free []string
	for _, u := range machineUsers {
		if units[u] < m.sales[si].PerUserLimit {
			free = append(free, u)
		}
	}
	if len(free) == 0 {
		return rapid.SampledFrom(machineUsers).Draw(rt, "user")
	}
	return rapid.SampledFrom(free).Draw(rt, "free_user")
}

func (m *machine) cancel(rt *rapid.T) {
	eID, oID, i := m.pickReservation(rt, seckill.StatusHeld, seckill.StatusQueued)
	user := rapid.SampledFrom(machineUsers).Draw(rt, "user")
	if i >= 0 && rapid.IntRange(0, 3).Draw(rt, "by_owner") > 0 {
		user = m.resUser[i]
	}
	er, eErr := m.eng.Cancel(m.ctx, eID, user)
	or, oErr := m.mod.Cancel(m.ctx, oID, user)
	what := fmt.Sprintf("Cancel(#%d, %s)", i, user)
	m.sameErr(rt, what, eErr, oErr)
	if oErr == nil {
		m.sameRes(rt, what, er, or)
	}
	m.check(rt)
}

func (m *machine) pay(rt *rapid.T) {
	eID, oID, i := m.pickReservation(rt, seckill.StatusHeld, seckill.StatusExpired, seckill.StatusCancelled)
	amount := int64(100)
	if i >= 0 {
		amount = int64(m.resQuantity[i]) * m.sales[m.resSale[i]].PriceCents
	}
	if rapid.IntRange(0, 4).Draw(rt, "wrong_amount") == 0 {
		amount++
	}
	var pid string
	if len(m.paymentIDs) > 0 && rapid.IntRange(0, 2).Draw(rt, "reuse_payment") == 0 {
		pid = rapid.SampledFrom(m.paymentIDs).Draw(rt, "payment_id")
	} else {
		m.nextPayment++
		pid = fmt.Sprintf("pay%d", m.nextPayment)
		m.paymentIDs = append(m.paymentIDs, pid)
	}
	eRes, er, eErr := m.eng.ConfirmPayment(m.ctx, seckill.PaymentConfirmation{PaymentID: pid, ReservationID: eID, AmountCents: amount})
	oRes, or, oErr := m.mod.ConfirmPayment(m.ctx, seckill.PaymentConfirmation{PaymentID: pid, ReservationID: oID, AmountCents: amount})
	what := fmt.Sprintf("ConfirmPayment(%s, #%d, %d)", pid, i, amount)
	m.sameErr(rt, what, eErr, oErr)
	if eRes != oRes {
		rt.Fatalf("%s at %s: engine %q, model %q (engine reservation %+v, model %+v)", what, m.at(), eRes, oRes, er, or)
	}
	m.sameRes(rt, what, er, or)
	m.check(rt)
}

func (m *machine) addStock(rt *rapid.T) {
	if rapid.IntRange(0, 2).Draw(rt, "add_now") != 2 {
		rt.Skip("scarcity is where the rules are: restock rarely")
	}
	saleID, _ := m.pickSale(rt)
	add := rapid.IntRange(0, 3).Draw(rt, "add")
	es, est, eErr := m.eng.AddStock(m.ctx, saleID, add)
	os, ost, oErr := m.mod.AddStock(m.ctx, saleID, add)
	what := fmt.Sprintf("AddStock(%s, %d)", saleID, add)
	m.sameErr(rt, what, eErr, oErr)
	if oErr == nil {
		m.sameSale(rt, what, es, os, est, ost)
	}
	m.check(rt)
}

func (m *machine) closeSale(rt *rapid.T) {
	if rapid.IntRange(0, 49).Draw(rt, "close_now") != 49 {
		rt.Skip("a closed sale has little left to test: close rarely")
	}
	saleID, _ := m.pickSale(rt)
	es, est, eErr := m.eng.CloseSale(m.ctx, saleID)
	os, ost, oErr := m.mod.CloseSale(m.ctx, saleID)
	what := fmt.Sprintf("CloseSale(%s)", saleID)
	m.sameErr(rt, what, eErr, oErr)
	if oErr == nil {
		m.sameSale(rt, what, es, os, est, ost)
	}
	m.check(rt)
}

func (m *machine) reclaim(rt *rapid.T) {
	saleID, _ := m.pickSale(rt)
	en, eErr := m.eng.Reclaim(m.ctx, saleID)
	on, oErr := m.mod.Reclaim(m.ctx, saleID)
	what := fmt.Sprintf("Reclaim(%s)", saleID)
	m.sameErr(rt, what, eErr, oErr)
	// A sweeper may have expired some of the holds already: the engine may count fewer.
	if en < 0 || en > on {
		rt.Fatalf("%s at %s: engine expired %d holds, model %d", what, m.at(), en, on)
	}
	m.check(rt)
}

// advance moves the clock and deliberately does not look: the next operation, whatever it is,
// is the first call to see the new time, so lazy reclaim is tested on every path.
func (m *machine) advance(rt *rapid.T) {
	d := time.Duration(rapid.IntRange(0, 12).Draw(rt, "advance_quarter_s")) * 250 * time.Millisecond
	m.clock.Advance(d)
}

// check reads every sale and every reservation from both and requires them to agree, and
// checks invariants 1–3 of docs/MODEL.md plus the consistency of the counts with the
// reservations (every reservation of the run is known to the machine).
func (m *machine) check(rt *rapid.T) {
	rt.Helper()
	states := make([]seckill.StockState, len(m.sales))
	for i, s := range m.sales {
		es, est, eErr := m.eng.Sale(m.ctx, s.ID)
		os, ost, oErr := m.mod.Sale(m.ctx, s.ID)
		if eErr != nil || oErr != nil {
			rt.Fatalf("Sale(%s): engine %v, model %v", s.ID, eErr, oErr)
		}
		m.sameSale(rt, "Sale("+s.ID+")", es, os, est, ost)
		for _, st := range []seckill.StockState{est, ost} {
			if msg := stockViolation(st); msg != "" {
				rt.Fatalf("Sale(%s) at %s: %s", s.ID, m.at(), msg)
			}
		}
		states[i] = est
	}
	type sums struct{ held, queued, paid int }
	perSale := make([]sums, len(m.sales))
	perUser := map[[2]string]int{}
	queue := make([][]int, len(m.sales)) // positions in creation order
	lastSeq := make([]uint64, len(m.sales))
	for i := range m.eIDs {
		er, eErr := m.eng.Reservation(m.ctx, m.eIDs[i])
		or, oErr := m.mod.Reservation(m.ctx, m.mIDs[i])
		if eErr != nil || oErr != nil {
			rt.Fatalf("Reservation(#%d): engine %v, model %v", i, eErr, oErr)
		}
		what := fmt.Sprintf("Reservation(#%d)", i)
		m.sameRes(rt, what, er, or)
		m.lastStatus[i] = or.Status
		si := m.resSale[i]
		if er.Seq <= lastSeq[si] {
			rt.Fatalf("%s: Seq %d does not grow with arrival (previous %d)", what, er.Seq, lastSeq[si])
		}
		lastSeq[si] = er.Seq
		switch er.Status {
		case seckill.StatusHeld:
			perSale[si].held += er.Quantity
		case seckill.StatusQueued:
			perSale[si].queued += er.Quantity
			queue[si] = append(queue[si], er.Position)
		case seckill.StatusPaid:
			perSale[si].paid += er.Quantity
		default:
			continue
		}
		perUser[[2]string{er.SaleID, er.UserID}] += er.Quantity
	}
	for si, s := range m.sales {
		st, sum := states[si], perSale[si]
		if st.Held != sum.held || st.Queued != sum.queued || st.Sold != m.sold0[si]+sum.paid {
			rt.Fatalf("sale %s at %s: counts %+v, but the reservations hold %d, queue %d and paid %d (+%d loaded sold)",
				s.ID, m.at(), st, sum.held, sum.queued, sum.paid, m.sold0[si])
		}
		for p, pos := range queue[si] {
			if pos != p+1 {
				rt.Fatalf("sale %s at %s: queued positions in arrival order are %v, want 1..%d", s.ID, m.at(), queue[si], len(queue[si]))
			}
		}
	}
	for k, units := range perUser {
		si := slices.IndexFunc(m.sales, func(s seckill.Sale) bool { return s.ID == k[0] })
		if units > m.sales[si].PerUserLimit {
			rt.Fatalf("sale %s at %s: user %s has %d units held+queued+paid, limit %d", k[0], m.at(), k[1], units, m.sales[si].PerUserLimit)
		}
	}
}

// stockViolation returns what is wrong with one snapshot of a sale's counts (invariants 1 and 2
// of docs/MODEL.md), or "".
func stockViolation(st seckill.StockState) string {
	switch {
	case st.Available < 0 || st.Held < 0 || st.Sold < 0 || st.Queued < 0 || st.Sellable < 0:
		return fmt.Sprintf("negative count in %+v", st)
	case st.Available+st.Held+st.Sold != st.Sellable:
		return fmt.Sprintf("available+held+sold = %d, sellable %d (%+v)", st.Available+st.Held+st.Sold, st.Sellable, st)
	case st.Sold > st.Sellable:
		return fmt.Sprintf("sold %d > sellable %d", st.Sold, st.Sellable)
	}
	return ""
}
