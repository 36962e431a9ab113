package seckilltest

import (
	"context"
	"crypto/rand"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// Model is the reference inventory: a plain, slow implementation of seckill.Inventory that
// follows docs/MODEL.md line by line, so that it is obviously correct by reading. One mutex
// guards everything; a sale's holds and queue are short slices scanned linearly; every call
// settles the sale (reclaim expired holds, then serve the queue) before it does anything else.
// It has no sweeper and emits no events. TestInventory compares engines against it step by
// step, and Model passes TestInventory itself.
//
// Where docs/MODEL.md leaves room, Model chooses as follows (the suite tests these choices,
// except what a restore does with a hold whose units are gone):
//   - The queue is served (granted, never-servable heads rejected, rejected when sold out or
//     ended) at the start of every call and after every change, including a payment: a payment
//     that leaves available == 0 && held == 0 rejects every queued buyer at once.
//   - A payment for an expired or cancelled reservation that cannot be honoured, whether the
//     sale has ended or no unit is free, turns the reservation into refund_required
//     (docs/MODEL.md: "otherwise → refund_required").
//   - RestoreReservation does not change sold (LoadSale's sold already counts paid units); a held
//     reservation takes its units from available (conflict if they are not there); a queued one
//     takes its place in the queue by Seq; a stored idempotency key replays after the restore.
//     A restore neither reclaims nor serves the queue: the next call does.
type Model struct {
	clock seckill.Clock

	mu    sync.Mutex
	sales []*modelSale
	byID  map[string]*modelRes

	// faults breaks the model on purpose for the negative control of the concurrency checker
	// (inventory_test.go). The zero value is the correct model.
	faults modelFaults
}

var _ seckill.Inventory = (*Model)(nil)

// modelFaults are deliberate bugs, each one seen in a public flash-sale project.
type modelFaults struct {
	offByOne    bool // a buy is held when available >= q-1: the peers' `>=` sells one unit too many
	keepExpired bool // an expired hold is marked expired but its units never come back
	racyBuy     bool // Buy drops the lock between its checks and its write (check-then-act)
}

type modelSale struct {
	def    seckill.Sale
	closed bool

	available, held, sold int
	seq                   uint64

	holds []*modelRes            // reservations with status held, in no particular order
	queue []*modelRes            // reservations with status queued, in Seq order
	users map[string][]*modelRes // every reservation of the sale, per user
	keys  map[[2]string]*modelRes
}

type modelRes struct {
	r         seckill.Reservation // ExpiresAt and Position are filled in by view
	expiresAt time.Time           // while held
}

// NewModel returns an empty Model that reads time from clock.
func NewModel(clock seckill.Clock) *Model {
	return &Model{clock: clock, byID: make(map[string]*modelRes)}
}

func (m *Model) findSale(id string) (*modelSale, error) {
	for _, s := range m.sales {
		if s.def.ID == id {
			return s, nil
		}
	}
	return nil, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
}

func (m *Model) findRes(id string) (*modelSale, *modelRes, error) {
	r := m.byID[id]
	if r == nil {
		return nil, nil, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
	}
	s, err := m.findSale(r.r.SaleID)
	return s, r, err
}

func (s *modelSale) ended(now time.Time) bool { return s.closed || !now.Before(s.def.EndsAt) }

func (s *modelSale) inWindow(now time.Time) bool {
	return !now.Before(s.def.StartsAt) && !s.ended(now)
}

// userUnits is held + queued + paid of one user in this sale.
func (s *modelSale) userUnits(user string) int {
	n := 0
	for _, r := range s.users[user] {
		switch r.r.Status {
		case seckill.StatusHeld, seckill.StatusQueued, seckill.StatusPaid:
			n += r.r.Quantity
		}
	}
	return n
}

func (s *modelSale) state() seckill.StockState {
	queued := 0
	for _, r := range s.queue {
		queued += r.r.Quantity
	}
	return seckill.StockState{
		Sellable: s.def.Sellable(), Available: s.available, Held: s.held, Sold: s.sold, Queued: queued,
	}
}

// view is the reservation as callers see it: expires_at only while held, position (live,
// 1-based) only while queued.
func (s *modelSale) view(r *modelRes) seckill.Reservation {
	v := r.r
	v.ExpiresAt, v.Position = nil, 0
	switch v.Status {
	case seckill.StatusHeld:
		t := r.expiresAt
		v.ExpiresAt = &t
	case seckill.StatusQueued:
		v.Position = slices.Index(s.queue, r) + 1
	}
	return v
}

func without(list []*modelRes, r *modelRes) []*modelRes {
	return slices.DeleteFunc(list, func(x *modelRes) bool { return x == r })
}

// settle is "Reclaim" of docs/MODEL.md: expire every hold with expires_at <= now, in expiry
// order, then serve the queue. It returns the number of holds expired.
func (m *Model) settle(s *modelSale, now time.Time) int {
	var expired []*modelRes
	for _, r := range s.holds {
		if !r.expiresAt.After(now) {
			expired = append(expired, r)
		}
	}
	slices.SortStableFunc(expired, func(a, b *modelRes) int {
		if c := a.expiresAt.Compare(b.expiresAt); c != 0 {
			return c
		}
		return compareSeq(a.r.Seq, b.r.Seq)
	})
	for _, r := range expired {
		s.holds = without(s.holds, r)
		r.r.Status = seckill.StatusExpired
		if !m.faults.keepExpired {
			s.held -= r.r.Quantity
			s.available += r.r.Quantity
		}
	}
	m.serve(s, now)
	return len(expired)
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// serve is "Serving the queue" of docs/MODEL.md.
func (m *Model) serve(s *modelSale, now time.Time) {
	if s.ended(now) {
		m.rejectQueue(s)
		return
	}
	if !s.inWindow(now) {
		return // upcoming: nothing is granted yet
	}
	for len(s.queue) > 0 {
		head := s.queue[0]
		q := head.r.Quantity
		if s.available >= q {
			s.queue = s.queue[1:]
			m.hold(s, head, now)
			continue
		}
		if s.available+s.held < q {
			s.queue = s.queue[1:]
			head.r.Status = seckill.StatusRejected
			continue
		}
		break
	}
	if s.available == 0 && s.held == 0 {
		m.rejectQueue(s)
	}
}

func (m *Model) rejectQueue(s *modelSale) {
	for _, r := range s.queue {
		r.r.Status = seckill.StatusRejected
	}
	s.queue = nil
}

// hold moves r's units from available to held, with a hold that starts now.
func (m *Model) hold(s *modelSale, r *modelRes, now time.Time) {
	r.r.Status = seckill.StatusHeld
	r.expiresAt = now.Add(s.def.HoldDuration())
	s.available -= r.r.Quantity
	s.held += r.r.Quantity
	s.holds = append(s.holds, r)
}

func (m *Model) add(s *modelSale, r *modelRes) {
	m.byID[r.r.ID] = r
	s.users[r.r.UserID] = append(s.users[r.r.UserID], r)
	if r.r.IdempotencyKey != "" {
		k := [2]string{r.r.UserID, r.r.IdempotencyKey}
		if s.keys[k] == nil {
			s.keys[k] = r
		}
	}
}

// LoadSale makes sale known with sold units already sold.
func (m *Model) LoadSale(_ context.Context, sale seckill.Sale, sold int) error {
	if !seckill.ValidID(sale.ID) || sale.Stock < 0 || sale.Holdback < 0 || sale.Holdback > sale.Stock ||
		sale.PerUserLimit < 1 || sale.HoldSeconds < 1 || sale.QueueLimit < 0 || !sale.EndsAt.After(sale.StartsAt) {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale %q is not valid", sale.ID)
	}
	if sold < 0 || sold > sale.Sellable() {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sold %d is outside 0..%d", sold, sale.Sellable())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.findSale(sale.ID); err == nil {
		return seckill.Errorf(seckill.CodeConflict, "sale %q is already loaded", sale.ID)
	}
	m.sales = append(m.sales, &modelSale{
		def:       sale,
		available: sale.Sellable() - sold,
		sold:      sold,
		users:     make(map[string][]*modelRes),
		keys:      make(map[[2]string]*modelRes),
	})
	return nil
}

// Sale returns the definition and the live counts.
func (m *Model) Sale(_ context.Context, saleID string) (seckill.Sale, seckill.StockState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	m.settle(s, m.clock.Now())
	return s.def, s.state(), nil
}

// Buy applies "Buy" of docs/MODEL.md: the first rule that applies wins.
func (m *Model) Buy(_ context.Context, req seckill.BuyRequest) (seckill.BuyResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	// 1.
	s, err := m.findSale(req.SaleID)
	if err != nil {
		return seckill.BuyResult{}, err
	}
	m.settle(s, now)
	q := req.Quantity
	if q < 1 {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "quantity must be at least 1")
	}
	// 2. (ended first: a sale closed before its start has ended)
	if s.ended(now) {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeEnded, "sale has ended")
	}
	if now.Before(s.def.StartsAt) {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeNotStarted, "sale has not started")
	}
	// 3.
	if req.IdempotencyKey != "" {
		if r := s.keys[[2]string{req.UserID, req.IdempotencyKey}]; r != nil {
			return seckill.BuyResult{Reservation: s.view(r), Replayed: true}, nil
		}
	}
	// 4.
	if q > s.def.PerUserLimit || s.userUnits(req.UserID)+q > s.def.PerUserLimit {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeLimitExceeded, "over the per-user limit of %d", s.def.PerUserLimit)
	}
	var status seckill.ReservationStatus
	switch {
	case len(s.queue) == 0 && (s.available >= q || m.faults.offByOne && s.available+1 >= q): // 5.
		status = seckill.StatusHeld
	case s.available == 0 && s.held == 0: // 6.
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "sold out")
	case s.available+s.held < q: // 7.
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "only %d units remain", s.available+s.held)
	case s.def.QueueLimit == 0 || len(s.queue) >= s.def.QueueLimit: // 8.
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeQueueFull, "queue is full")
	default: // 9.
		status = seckill.StatusQueued
	}
	if m.faults.racyBuy {
		// The broken check-then-act: another buyer runs between the checks and the write.
		m.mu.Unlock()
		runtime.Gosched()
		m.mu.Lock()
	}
	var random [16]byte
	_, _ = rand.Read(random[:])
	s.seq++
	r := &modelRes{r: seckill.Reservation{
		ID: seckill.ReservationID(s.def.ID, random[:]), SaleID: s.def.ID, UserID: req.UserID,
		Quantity: q, AmountCents: int64(q) * s.def.PriceCents, CreatedAt: now, Seq: s.seq,
		IdempotencyKey: req.IdempotencyKey,
	}}
	m.add(s, r)
	if status == seckill.StatusHeld {
		m.hold(s, r, now)
	} else {
		r.r.Status = seckill.StatusQueued
		s.queue = append(s.queue, r)
	}
	return seckill.BuyResult{Reservation: s.view(r)}, nil
}

// Reservation returns a reservation as it is now.
func (m *Model) Reservation(_ context.Context, id string) (seckill.Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, r, err := m.findRes(id)
	if err != nil {
		return seckill.Reservation{}, err
	}
	m.settle(s, m.clock.Now())
	return s.view(r), nil
}

// Cancel applies "Cancel" of docs/MODEL.md.
func (m *Model) Cancel(_ context.Context, id, userID string) (seckill.Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, r, err := m.findRes(id)
	if err != nil {
		return seckill.Reservation{}, err
	}
	if r.r.UserID != userID {
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
	}
	now := m.clock.Now()
	m.settle(s, now)
	switch r.r.Status {
	case seckill.StatusHeld:
		s.holds = without(s.holds, r)
		s.held -= r.r.Quantity
		s.available += r.r.Quantity
		r.r.Status = seckill.StatusCancelled
	case seckill.StatusQueued:
		s.queue = without(s.queue, r)
		r.r.Status = seckill.StatusCancelled
	case seckill.StatusPaid:
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeConflict, "reservation %q is paid", id)
	}
	m.serve(s, now)
	return s.view(r), nil
}

// ConfirmPayment applies "ConfirmPayment" of docs/MODEL.md: the first rule that applies wins.
func (m *Model) ConfirmPayment(_ context.Context, p seckill.PaymentConfirmation) (seckill.PaymentResult, seckill.Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// 1.
	s, r, err := m.findRes(p.ReservationID)
	if err != nil {
		return seckill.PaymentRefundRequired, seckill.Reservation{}, nil
	}
	now := m.clock.Now()
	m.settle(s, now)
	defer m.serve(s, now) // a payment lowers held: the queue head may now never be served
	q := r.r.Quantity
	switch {
	case r.r.Status == seckill.StatusPaid && r.r.PaymentID == p.PaymentID: // 2.
		return seckill.PaymentDuplicate, s.view(r), nil
	case r.r.Status == seckill.StatusPaid: // 3.
		return seckill.PaymentRefundRequired, s.view(r), nil
	case p.AmountCents != int64(q)*s.def.PriceCents, !p.InCurrency(s.def.Currency): // 4.
		return seckill.PaymentRefundRequired, s.view(r), nil
	case r.r.Status == seckill.StatusHeld: // 5.
		s.holds = without(s.holds, r)
		s.held -= q
		s.sold += q
		r.r.Status, r.r.PaymentID = seckill.StatusPaid, p.PaymentID
		return seckill.PaymentApplied, s.view(r), nil
	case r.r.Status == seckill.StatusQueued || r.r.Status == seckill.StatusRejected: // 6.
		return seckill.PaymentRefundRequired, s.view(r), nil
	case r.r.Status == seckill.StatusExpired || r.r.Status == seckill.StatusCancelled: // 7.
		if !s.ended(now) && s.available >= q && s.userUnits(r.r.UserID)+q <= s.def.PerUserLimit {
			s.available -= q
			s.sold += q
			r.r.Status, r.r.PaymentID = seckill.StatusPaid, p.PaymentID
			return seckill.PaymentLateApplied, s.view(r), nil
		}
		r.r.Status = seckill.StatusRefundRequired
		return seckill.PaymentRefundRequired, s.view(r), nil
	}
	// refund_required already.
	return seckill.PaymentRefundRequired, s.view(r), nil
}

// AddStock applies "AddStock" of docs/MODEL.md.
func (m *Model) AddStock(_ context.Context, saleID string, add int) (seckill.Sale, seckill.StockState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	now := m.clock.Now()
	m.settle(s, now)
	if add < 1 || add > seckill.MaxQuantity-s.def.Stock {
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeInvalidArgument, "add must be at least 1 and keep stock within %d", seckill.MaxQuantity)
	}
	s.def.Stock += add
	s.available += add
	m.serve(s, now)
	return s.def, s.state(), nil
}

// CloseSale applies "CloseSale" of docs/MODEL.md.
func (m *Model) CloseSale(_ context.Context, saleID string) (seckill.Sale, seckill.StockState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	now := m.clock.Now()
	m.settle(s, now)
	if now.Before(s.def.EndsAt) {
		s.def.EndsAt = now
	}
	s.closed = true
	m.serve(s, now)
	return s.def, s.state(), nil
}

// Reclaim expires the holds of the sale whose expiry has passed and returns how many.
func (m *Model) Reclaim(_ context.Context, saleID string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return 0, err
	}
	return m.settle(s, m.clock.Now()), nil
}

// RestoreReservation puts back a reservation that the order store knew. Paid units are already
// in the sold count given to LoadSale; a held reservation takes its units from available; a
// queued one goes into the queue in Seq order.
func (m *Model) RestoreReservation(_ context.Context, in seckill.Reservation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(in.SaleID)
	if err != nil {
		return err
	}
	if in.ID == "" || in.Quantity < 1 || !in.Status.Valid() {
		return seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: bad id, quantity or status", in.ID)
	}
	if m.byID[in.ID] != nil {
		return seckill.Errorf(seckill.CodeConflict, "reservation %q is already known", in.ID)
	}
	// No settle here: a restore puts back the stored state as it was; the next call settles it.
	now := m.clock.Now()
	r := &modelRes{r: in}
	r.r.ExpiresAt, r.r.Position = nil, 0
	if r.r.Seq == 0 {
		s.seq++
		r.r.Seq = s.seq
	}
	s.seq = max(s.seq, r.r.Seq)
	switch in.Status {
	case seckill.StatusHeld:
		if s.available < in.Quantity {
			return seckill.Errorf(seckill.CodeConflict, "reservation %q: %d units are not available to hold", in.ID, in.Quantity)
		}
		r.expiresAt = now.Add(s.def.HoldDuration())
		if in.ExpiresAt != nil {
			r.expiresAt = *in.ExpiresAt
		}
		s.available -= in.Quantity
		s.held += in.Quantity
		s.holds = append(s.holds, r)
	case seckill.StatusQueued:
		i := len(s.queue)
		for i > 0 && s.queue[i-1].r.Seq > r.r.Seq {
			i--
		}
		s.queue = slices.Insert(s.queue, i, r)
	}
	m.add(s, r)
	return nil
}
