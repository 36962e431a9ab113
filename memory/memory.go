// Package memory is the embedded inventory engine: one process, one critical section per sale,
// holds ordered by expiry and a FIFO queue for waiting buyers. It is the default engine
// (no Redis needed) and the reference for speed. State lives in memory only; on restart the
// caller rebuilds it from the order store with LoadSale and RestoreReservation.
//
// Memory follows use: a sale costs a few hundred bytes until buyers come, and each hold or
// queued buyer adds its own entry (nothing is sized by stock or queue limit). A sale that has
// ended and settled (no hold, no queue) is released once the order store holds every one of its
// reservations as the engine does: the engine keeps its definition and counts, and answers for
// its reservations from the store (see release.go and WithArchive).
package memory

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

var _ seckill.Inventory = (*Engine)(nil)

// Engine is the in-process inventory. It is safe for concurrent use. Calls on different sales
// never contend except on the short reservation index lock.
type Engine struct {
	clock  seckill.Clock
	events chan<- seckill.Event

	mu    sync.RWMutex
	sales map[string]*sale

	archive Archive // where released sales' reservations are read from; nil: never release
}

// Option configures an Engine.
type Option func(*Engine)

// WithEvents makes the engine send every reservation change to ch. The send happens inside the
// sale's critical section, so events of one sale arrive in order; a full channel slows buyers
// down rather than losing an event, so size it for bursts and keep a consumer running.
func WithEvents(ch chan<- seckill.Event) Option { return func(e *Engine) { e.events = ch } }

// New returns an empty engine that reads time from clock.
func New(clock seckill.Clock, opts ...Option) *Engine {
	e := &Engine{clock: clock, sales: make(map[string]*sale)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// sale is one sale's state. Every field is guarded by mu.
type sale struct {
	mu     sync.Mutex
	def    seckill.Sale
	closed bool

	available, held, sold int

	book    book                    // reservations by seq: ids carry their seq, so lookup is an index, not a hash
	foreign map[string]*reservation // restored reservations whose id is not in that format
	users   userUnits               // units held + queued + paid per user
	idem    map[idemKey]*reservation
	holds   holdSet
	queue   fifo
	seq     uint64

	idBuf []byte // random bytes from crypto/rand, 8 per reservation id; idBuf[idPos:] unused
	idPos int

	rel  releaseState // release.go
	room *room        // the waiting room (room.go), made by its first call
}

type idemKey struct{ user, key string }

// reservation is one reservation's state, 80 bytes. It holds few pointers and no time.Time
// (whose location pointer the garbage collector would chase): a hot sale keeps a million of
// these live. What most reservations do not have is in extra, and the amount is the sale's
// price times the quantity unless extra says otherwise.
type reservation struct {
	user      string
	extra     *extra
	random    uint64 // the random half of the id
	seq       uint64 // 0: an empty slot of the book
	expiresAt int64  // unix nanoseconds, while held
	createdAt int64  // unix nanoseconds
	quantity  int
	slot      int // slot in queue, -1 when not queued
	status    state
	units     int32 // the user's units, on the reservation that the per-user table points at (users.go)
}

// extra holds the fields that few reservations have: an idempotency key, a payment, an id from
// elsewhere, an amount that is not the sale's price times the quantity (restored).
type extra struct {
	idemKey   string
	paymentID string
	foreignID string // the id, when it is not "<sale>-<seq><random>" (restored from elsewhere)
	amount    int64
	hasAmount bool
}

// more returns r's extra fields, making them.
func (r *reservation) more() *extra {
	if r.extra == nil {
		r.extra = new(extra)
	}
	return r.extra
}

func (r *reservation) idemKey() string {
	if r.extra == nil {
		return ""
	}
	return r.extra.idemKey
}

func (r *reservation) paymentID() string {
	if r.extra == nil {
		return ""
	}
	return r.extra.paymentID
}

func (r *reservation) foreignID() string {
	if r.extra == nil {
		return ""
	}
	return r.extra.foreignID
}

// amount is what r costs.
func (s *sale) amount(r *reservation) int64 {
	if r.extra != nil && r.extra.hasAmount {
		return r.extra.amount
	}
	return int64(r.quantity) * s.def.PriceCents
}

// state is a reservation status in a byte (seckill.ReservationStatus is a string).
type state uint8

const (
	stQueued state = iota + 1
	stHeld
	stPaid
	stCancelled
	stExpired
	stRejected
	stRefundRequired
)

var statusNames = [...]seckill.ReservationStatus{
	stQueued: seckill.StatusQueued, stHeld: seckill.StatusHeld, stPaid: seckill.StatusPaid,
	stCancelled: seckill.StatusCancelled, stExpired: seckill.StatusExpired, stRejected: seckill.StatusRejected,
	stRefundRequired: seckill.StatusRefundRequired,
}

func (st state) public() seckill.ReservationStatus { return statusNames[st] }

// stateOf is the state of a valid status.
func stateOf(status seckill.ReservationStatus) state {
	for st, name := range statusNames {
		if name == status && st > 0 {
			return state(st)
		}
	}
	return 0
}

func (e *Engine) sale(id string) (*sale, error) {
	e.mu.RLock()
	s := e.sales[id]
	e.mu.RUnlock()
	if s == nil {
		return nil, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
	}
	return s, nil
}

// saleOf finds and locks the sale of a reservation id: ids are "<sale id>-<32 hex>"
// (seckill.ReservationID), so no global index is needed and the lookup never contends across
// sales. On success the sale's mutex is held and the caller must unlock it. The reservation is
// nil when the sale is released: its reservations are in the archive (release.go).
func (e *Engine) saleOf(resID string) (*sale, *reservation, error) {
	if saleID, ok := seckill.SaleOfReservation(resID); ok {
		if s, err := e.sale(saleID); err == nil {
			s.mu.Lock()
			if s.rel.done {
				return s, nil, nil
			}
			if r := s.find(resID); r != nil {
				return s, r, nil
			}
			s.mu.Unlock()
		}
	}
	return nil, nil, notFound(resID)
}

// errSegments is LoadSale's answer to a sale with segments > 1 (400 invalid_argument on the
// HTTP API: the client asked for what this deployment cannot do, and nothing was created).
func errSegments() error {
	return seckill.Errorf(seckill.CodeInvalidArgument, "segments must be 1 on the memory engine: it has no segments (they spread one sale over several Redis cores; one process has no second one to spread to); use the Redis engine for segments > 1")
}

func notFound(resID string) error {
	return seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", resID)
}

// LoadSale makes def known with sold units already sold. A sale split into segments is
// refused: segments spread one sale over several Redis cores, and one process has no second
// core of that kind to spread to (its sale is one lock already; docs/DECISIONS.md "Segmented
// stock").
func (e *Engine) LoadSale(_ context.Context, def seckill.Sale, sold int) error {
	if def.SegmentCount() > 1 {
		return errSegments()
	}
	// Nothing is sized by stock or queue limit: a sale of a million units that few buy costs
	// what those few cost. Every index grows on demand (chunks, or amortized doubling: the buy
	// path pays O(1) per reservation for it, see BenchmarkBuy), and is made at the first buyer.
	return e.add(&sale{def: def}, sold)
}

// add makes s known with sold units already sold.
func (e *Engine) add(s *sale, sold int) error {
	def := s.def
	if def.Sellable() < 0 || sold < 0 || sold > def.Sellable() {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale %q: sold %d outside 0..%d", def.ID, sold, def.Sellable())
	}
	s.available, s.sold = def.Sellable()-sold, sold
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sales[def.ID]; ok {
		return seckill.Errorf(seckill.CodeConflict, "sale %q already loaded", def.ID)
	}
	e.sales[def.ID] = s
	return nil
}

// Sale returns the definition and live counts, after reclaiming expired holds. A settled sale
// is released here when it is due (release.go), after the answer is taken.
func (e *Engine) Sale(ctx context.Context, id string) (seckill.Sale, seckill.StockState, error) {
	s, err := e.sale(id)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	s.mu.Lock()
	now := e.clock.Now()
	e.reclaim(s, now)
	def, st, due := s.def, s.state(), e.releaseDue(s, now)
	s.mu.Unlock()
	if due {
		e.releaseSale(ctx, s)
	}
	return def, st, nil
}

// Reclaim expires the sale's overdue holds; the sweeper calls it. A settled sale is released
// here when it is due (release.go).
func (e *Engine) Reclaim(ctx context.Context, id string) (int, error) {
	s, err := e.sale(id)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	now := e.clock.Now()
	n := e.reclaim(s, now)
	due := e.releaseDue(s, now)
	s.mu.Unlock()
	if due {
		e.releaseSale(ctx, s)
	}
	return n, nil
}

// Buy runs the buy rules of docs/MODEL.md in one critical section.
func (e *Engine) Buy(_ context.Context, req seckill.BuyRequest) (seckill.BuyResult, error) {
	s, err := e.sale(req.SaleID)
	if err != nil {
		return seckill.BuyResult{}, err
	}
	if req.Quantity < 1 {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "quantity must be at least 1")
	}
	now := e.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e.reclaim(s, now)
	if err := s.windowError(now); err != nil {
		return seckill.BuyResult{}, err
	}
	if req.IdempotencyKey != "" {
		if r := s.idem[idemKey{req.UserID, req.IdempotencyKey}]; r != nil {
			return seckill.BuyResult{Reservation: s.view(r), Replayed: true}, nil
		}
	}
	if req.Quantity > s.def.PerUserLimit {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeLimitExceeded, "quantity %d is over the per-user limit %d", req.Quantity, s.def.PerUserLimit)
	}
	ui, uh, uok := s.users.find(req.UserID)
	if uok && s.users.at(ui)+req.Quantity > s.def.PerUserLimit {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeLimitExceeded, "user %q would hold more than %s", req.UserID, seckill.Units(s.def.PerUserLimit))
	}
	q := req.Quantity
	var status state
	switch {
	case s.queue.len() == 0 && s.available >= q:
		status = stHeld
	case s.available == 0 && s.held == 0:
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "sold out")
	case s.available+s.held < q:
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "only %s left unsold, fewer than the %d asked for", seckill.Units(s.available+s.held), q)
	case s.queue.len() >= s.def.QueueLimit:
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeQueueFull, "every unit is held and the queue is full; try again later")
	default:
		status = stQueued
	}
	s.seq++
	// Fields are set one by one on the zeroed book entry: assigning a whole struct literal
	// would copy it with a bulk write barrier while the collector runs.
	r := s.book.put(s.seq)
	r.random, r.user, r.quantity, r.status = s.random(), req.UserID, q, status
	// created_at is kept in milliseconds, as the order store keeps it: the reservation reads
	// the same from the engine and, once its sale is released, from the store.
	r.createdAt, r.slot = now.UnixMilli()*int64(time.Millisecond), -1
	s.users.addAt(ui, uh, uok, r, q)
	if req.IdempotencyKey != "" {
		r.more().idemKey = req.IdempotencyKey
		s.remember(r)
	}
	if status == stHeld {
		s.hold(r, now)
	} else {
		s.queue.push(r)
	}
	// One view for the event and the answer: nothing changes r in between, and neither the
	// pipeline nor the caller modifies a Reservation it is given.
	v := s.view(r)
	e.send(v, now)
	return seckill.BuyResult{Reservation: v}, nil
}

// Reservation returns a reservation as it is now.
func (e *Engine) Reservation(ctx context.Context, id string) (seckill.Reservation, error) {
	s, r, err := e.saleOf(id)
	if err != nil {
		return seckill.Reservation{}, err
	}
	if r == nil {
		s.mu.Unlock()
		return e.archived(ctx, s, id)
	}
	defer s.mu.Unlock()
	e.reclaim(s, e.clock.Now())
	return s.view(r), nil
}

// Cancel cancels a held or queued reservation of userID.
func (e *Engine) Cancel(ctx context.Context, id, userID string) (seckill.Reservation, error) {
	s, r, err := e.saleOf(id)
	if err != nil {
		return seckill.Reservation{}, err
	}
	if r == nil {
		s.mu.Unlock()
		return e.cancelArchived(ctx, s, id, userID)
	}
	defer s.mu.Unlock()
	now := e.clock.Now()
	e.reclaim(s, now)
	if r.user != userID {
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
	}
	switch r.status {
	case stPaid:
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeConflict, "reservation %q is already paid", id)
	case stHeld:
		s.release(r)
		r.status = stCancelled
		e.emit(s, r, now)
		e.serveQueue(s, now)
	case stQueued:
		s.queue.remove(r)
		s.users.add(r, -r.quantity)
		r.status = stCancelled
		e.emit(s, r, now)
		e.serveQueue(s, now) // a blocked head may have left: the buyers behind it can go
	}
	return s.view(r), nil
}

// ConfirmPayment applies a succeeded payment (docs/MODEL.md "ConfirmPayment").
func (e *Engine) ConfirmPayment(ctx context.Context, p seckill.PaymentConfirmation) (seckill.PaymentResult, seckill.Reservation, error) {
	s, r, err := e.saleOf(p.ReservationID)
	if err != nil {
		return seckill.PaymentRefundRequired, seckill.Reservation{}, nil
	}
	if r == nil {
		s.mu.Unlock()
		return e.confirmArchived(ctx, s, p)
	}
	defer s.mu.Unlock()
	now := e.clock.Now()
	e.reclaim(s, now)
	switch {
	case r.status == stPaid && r.paymentID() == p.PaymentID:
		return seckill.PaymentDuplicate, s.view(r), nil
	case r.status == stPaid:
		return seckill.PaymentRefundRequired, s.view(r), nil
	case p.AmountCents != s.amount(r), !p.InCurrency(s.def.Currency):
		return seckill.PaymentRefundRequired, s.view(r), nil
	case r.status == stHeld:
		s.held -= r.quantity // its hold entry goes stale (see holdSet)
		s.sold += r.quantity
		r.status = stPaid
		r.more().paymentID = p.PaymentID
		e.emit(s, r, now)
		e.serveQueue(s, now) // the last held unit sold: the queue learns it is sold out
		return seckill.PaymentApplied, s.view(r), nil
	case r.status == stExpired || r.status == stCancelled:
		if s.open(now) && s.available >= r.quantity && s.users.units(r.user)+r.quantity <= s.def.PerUserLimit {
			s.available -= r.quantity
			s.sold += r.quantity
			s.users.add(r, r.quantity)
			r.status = stPaid
			r.more().paymentID = p.PaymentID
			e.emitAs(s, r, now, seckill.EventLatePaid)
			e.serveQueue(s, now)
			return seckill.PaymentLateApplied, s.view(r), nil
		}
		r.status = stRefundRequired
		e.emit(s, r, now)
		return seckill.PaymentRefundRequired, s.view(r), nil
	default: // queued, rejected, refund_required
		return seckill.PaymentRefundRequired, s.view(r), nil
	}
}

// AddStock adds units; queued buyers are served first.
func (e *Engine) AddStock(_ context.Context, id string, add int) (seckill.Sale, seckill.StockState, error) {
	s, err := e.sale(id)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	if add < 1 || add > seckill.MaxQuantity {
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeInvalidArgument, "add must be between 1 and %d", seckill.MaxQuantity)
	}
	now := e.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.def.Stock+add > seckill.MaxQuantity {
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeInvalidArgument, "stock would exceed %d", seckill.MaxQuantity)
	}
	e.reclaim(s, now)
	s.def.Stock += add
	s.available += add
	e.serveQueue(s, now)
	return s.def, s.state(), nil
}

// CloseSale ends the sale now.
func (e *Engine) CloseSale(_ context.Context, id string) (seckill.Sale, seckill.StockState, error) {
	s, err := e.sale(id)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	now := e.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e.reclaim(s, now)
	s.closed = true
	// Sale times are kept in milliseconds (seckill.NewSale, the database, the Redis engine),
	// so the new end is too: it reads the same before and after a restart.
	if end := now.Truncate(time.Millisecond); end.Before(s.def.EndsAt) {
		s.def.EndsAt = end
	}
	e.serveQueue(s, now) // rejects the queue: the sale is over
	return s.def, s.state(), nil
}

// RestoreReservation puts back a reservation read from the order store after a restart. Paid
// units are already in the sold count given to LoadSale; a held one takes its units back from
// available (it is restored as expired, with an event for the order store, if they are not
// there); a queued one joins the tail, so restore them in Seq order.
func (e *Engine) RestoreReservation(_ context.Context, in seckill.Reservation) error {
	s, err := e.sale(in.SaleID)
	if err != nil {
		return err
	}
	if in.Quantity < 1 || !in.Status.Valid() {
		return seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: bad quantity or status", in.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sid, ok := seckill.SaleOfReservation(in.ID); !ok || sid != in.SaleID || in.Seq == 0 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: id must be of sale %q and seq at least 1", in.ID, in.SaleID)
	}
	if s.rel.done {
		return seckill.Errorf(seckill.CodeConflict, "sale %q is released: its reservations are read from the order store", in.SaleID)
	}
	if s.find(in.ID) != nil {
		return seckill.Errorf(seckill.CodeConflict, "reservation %q already restored", in.ID)
	}
	if units := s.users.units(in.UserID); int64(units)+int64(in.Quantity) > math.MaxInt32 {
		// Never in data the engines wrote: a user holds at most per_user_limit units.
		return seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: user %q would have more than %d units", in.ID, in.UserID, math.MaxInt32)
	}
	r := s.place(in)
	r.user, r.quantity, r.createdAt, r.slot = in.UserID, in.Quantity, in.CreatedAt.UnixNano(), -1
	r.status = stateOf(in.Status)
	if in.PaymentID != "" {
		r.more().paymentID = in.PaymentID
	}
	if in.IdempotencyKey != "" {
		r.more().idemKey = in.IdempotencyKey
	}
	if in.AmountCents != s.amount(r) {
		x := r.more()
		x.amount, x.hasAmount = in.AmountCents, true
	}
	if r.seq > s.seq {
		s.seq = r.seq
	}
	ended := false
	switch r.status {
	case stHeld:
		if in.ExpiresAt == nil || s.available < r.quantity {
			r.status = stExpired
			ended = true
			break
		}
		s.available -= r.quantity
		s.held += r.quantity
		r.expiresAt = in.ExpiresAt.UnixNano()
		s.holds.push(r)
		s.users.add(r, r.quantity)
	case stQueued:
		s.queue.push(r)
		s.users.add(r, r.quantity)
	case stPaid:
		s.users.add(r, r.quantity)
	}
	if ended { // the order store has it held: the event tells it the hold ended
		e.emit(s, r, e.clock.Now())
	}
	if r.idemKey() != "" {
		s.remember(r)
	}
	return nil
}

// reclaim expires every hold whose expiry has passed, earliest first, then serves the queue.
// Each expired hold costs O(1) (O(log n) if it came out of order) and expires once, so the
// work is amortized over the buys that created the holds; the sweeper keeps the backlog small
// when there is no traffic.
func (e *Engine) reclaim(s *sale, now time.Time) int {
	n := 0
	for s.holds.len() > 0 && s.holds.next().expiresAt <= now.UnixNano() {
		h := s.holds.pop()
		if !h.live() {
			continue // paid or cancelled before it expired
		}
		r := h.r
		s.held -= r.quantity
		s.available += r.quantity
		s.users.add(r, -r.quantity)
		r.status = stExpired
		e.emit(s, r, now)
		n++
	}
	if n > 0 || (s.queue.len() > 0 && !s.open(now)) {
		e.serveQueue(s, now)
	}
	return n
}

// serveQueue hands free units to the earliest queued buyers (docs/MODEL.md "Serving the queue").
func (e *Engine) serveQueue(s *sale, now time.Time) {
	if !s.open(now) {
		e.rejectQueue(s, now)
		return
	}
	for r := s.queue.peek(); r != nil; r = s.queue.peek() {
		switch {
		case s.available >= r.quantity:
			s.queue.remove(r)
			s.hold(r, now)
			e.emitAs(s, r, now, seckill.EventGranted)
		case s.available+s.held < r.quantity:
			s.queue.remove(r)
			s.users.add(r, -r.quantity)
			r.status = stRejected
			e.emit(s, r, now)
		default:
			return
		}
	}
	if s.available == 0 && s.held == 0 {
		e.rejectQueue(s, now)
	}
}

func (e *Engine) rejectQueue(s *sale, now time.Time) {
	for _, r := range s.queue.drain() {
		s.users.add(r, -r.quantity)
		r.status = stRejected
		e.emit(s, r, now)
	}
}

// hold moves r's units from available to held with a fresh expiry.
func (s *sale) hold(r *reservation, now time.Time) {
	r.status = stHeld
	r.expiresAt = now.Add(s.def.HoldDuration()).UnixNano()
	s.available -= r.quantity
	s.held += r.quantity
	s.holds.push(r)
}

// release returns a held reservation's units to available.
func (s *sale) release(r *reservation) {
	s.held -= r.quantity // its hold entry goes stale (see holdSet)
	s.available += r.quantity
	s.users.add(r, -r.quantity)
}

// open reports whether buying is open at now. A closed sale stays closed even if the clock
// steps back before the ends_at that CloseSale set.
func (s *sale) open(now time.Time) bool { return !s.closed && s.def.Open(now) }

// windowError is nil while buying is open, else ended or not_started (a closed sale has ended,
// also when it was closed before its start).
func (s *sale) windowError(now time.Time) error {
	if s.closed {
		return seckill.Errorf(seckill.CodeEnded, "sale %q has ended", s.def.ID)
	}
	return s.def.WindowError(now)
}

func (s *sale) state() seckill.StockState {
	return seckill.StockState{
		Sellable: s.def.Sellable(), Available: s.available, Held: s.held, Sold: s.sold, Queued: s.queue.units,
	}
}

// view renders r as the API shows it: expires_at only while held, position only while queued.
func (s *sale) view(r *reservation) seckill.Reservation {
	v := seckill.Reservation{
		ID: s.id(r), SaleID: s.def.ID, UserID: r.user, Quantity: r.quantity, Status: r.status.public(),
		AmountCents: s.amount(r), CreatedAt: time.Unix(0, r.createdAt).UTC(), Seq: r.seq,
	}
	if r.extra != nil {
		v.PaymentID, v.IdempotencyKey = r.extra.paymentID, r.extra.idemKey
	}
	switch r.status {
	case stHeld:
		t := time.Unix(0, r.expiresAt).UTC()
		v.ExpiresAt = &t
	case stQueued:
		v.Position = s.queue.position(r)
	}
	return v
}

func (e *Engine) emit(s *sale, r *reservation, now time.Time) {
	e.emitAs(s, r, now, "")
}

// emitAs is emit for a change whose status does not tell its type (seckill.Event.Type).
func (e *Engine) emitAs(s *sale, r *reservation, now time.Time, typ string) {
	if e.events == nil {
		return
	}
	e.events <- seckill.Event{Reservation: s.view(r), At: now, Type: typ}
}

// send sends the view v of a reservation that changed at now; call it in the sale's critical
// section, so that the events of one sale keep their order.
func (e *Engine) send(v seckill.Reservation, now time.Time) {
	if e.events == nil {
		return
	}
	e.events <- seckill.Event{Reservation: v, At: now}
}
