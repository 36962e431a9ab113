// Package memory is the embedded inventory engine: one process, one critical section per sale,
// an expiry heap for holds and a FIFO queue for waiting buyers. It is the default engine
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
	"crypto/rand"
	"encoding/binary"
	"strconv"
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

	reservations []*reservation          // by seq-1: ids carry their seq, so lookup is an index, not a hash
	foreign      map[string]*reservation // restored reservations whose id is not in that format
	users        map[string]int          // units held + queued + paid per user
	idem         map[idemKey]*reservation
	holds        holdHeap
	queue        fifo
	seq          uint64

	idBuf []byte        // random bytes from crypto/rand, consumed 8 per reservation id
	slab  []reservation // preallocated reservations (see alloc)
	slabN int           // size of the last slab: slabs double from 8 to 256

	rel  releaseState // release.go
	room *room        // the waiting room (room.go), made by its first call
}

type idemKey struct{ user, key string }

// seqOf extracts the sequence number from a reservation id "<sale>-<16 hex seq><16 hex random>".
// Finding a reservation by index keeps the hot path free of a second large hash map; the full id
// is still compared, so the random half (64 bits from crypto/rand) makes ids unguessable.
func seqOf(id string) (uint64, bool) {
	if len(id) < 32 {
		return 0, false
	}
	seq, err := strconv.ParseUint(id[len(id)-32:len(id)-16], 16, 64)
	return seq, err == nil && seq > 0
}

// reservation is one reservation's state. It holds few pointers and no time.Time (whose
// location pointer the garbage collector would chase): a hot sale keeps a million of these live.
type reservation struct {
	user      string
	idemKey   string
	paymentID string
	foreignID string // the id, when it is not "<sale>-<seq><random>" (restored from elsewhere)
	random    uint64 // the random half of the id
	seq       uint64
	expiresAt int64 // unix nanoseconds, while held
	createdAt int64 // unix nanoseconds
	amount    int64
	quantity  int
	status    seckill.ReservationStatus
	slot      int // slot in queue, -1 when not queued
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
	// what those few cost. Every index grows on demand (amortized doubling: the buy path pays
	// O(1) per reservation for it, see BenchmarkBuy), and the maps are made at the first buyer.
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
	if s.users[req.UserID]+req.Quantity > s.def.PerUserLimit {
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeLimitExceeded, "user %q would hold more than %s", req.UserID, seckill.Units(s.def.PerUserLimit))
	}
	q := req.Quantity
	var status seckill.ReservationStatus
	switch {
	case s.queue.len() == 0 && s.available >= q:
		status = seckill.StatusHeld
	case s.available == 0 && s.held == 0:
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "sold out")
	case s.available+s.held < q:
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeSoldOut, "only %s left unsold, fewer than the %d asked for", seckill.Units(s.available+s.held), q)
	case s.queue.len() >= s.def.QueueLimit:
		return seckill.BuyResult{}, seckill.Errorf(seckill.CodeQueueFull, "every unit is held and the queue is full; try again later")
	default:
		status = seckill.StatusQueued
	}
	s.seq++
	// Fields are set one by one on the zeroed slab entry: assigning a whole struct literal
	// would copy it with a bulk write barrier while the collector runs.
	r := s.alloc()
	r.random, r.user, r.quantity, r.status = s.random(), req.UserID, q, status
	// created_at is kept in milliseconds, as the order store keeps it: the reservation reads
	// the same from the engine and, once its sale is released, from the store.
	r.amount, r.createdAt, r.seq = int64(q)*s.def.PriceCents, now.UnixMilli()*int64(time.Millisecond), s.seq
	r.idemKey, r.slot = req.IdempotencyKey, -1
	s.store(r)
	s.addUnits(r.user, q)
	if r.idemKey != "" {
		s.remember(r)
	}
	if status == seckill.StatusHeld {
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
	case seckill.StatusPaid:
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeConflict, "reservation %q is already paid", id)
	case seckill.StatusHeld:
		s.release(r)
		r.status = seckill.StatusCancelled
		e.emit(s, r, now)
		e.serveQueue(s, now)
	case seckill.StatusQueued:
		s.queue.remove(r)
		s.addUnits(r.user, -r.quantity)
		r.status = seckill.StatusCancelled
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
	case r.status == seckill.StatusPaid && r.paymentID == p.PaymentID:
		return seckill.PaymentDuplicate, s.view(r), nil
	case r.status == seckill.StatusPaid:
		return seckill.PaymentRefundRequired, s.view(r), nil
	case p.AmountCents != r.amount, !p.InCurrency(s.def.Currency):
		return seckill.PaymentRefundRequired, s.view(r), nil
	case r.status == seckill.StatusHeld:
		s.held -= r.quantity // its heap entry goes stale (see holdHeap)
		s.sold += r.quantity
		r.status, r.paymentID = seckill.StatusPaid, p.PaymentID
		e.emit(s, r, now)
		e.serveQueue(s, now) // the last held unit sold: the queue learns it is sold out
		return seckill.PaymentApplied, s.view(r), nil
	case r.status == seckill.StatusExpired || r.status == seckill.StatusCancelled:
		if s.open(now) && s.available >= r.quantity && s.users[r.user]+r.quantity <= s.def.PerUserLimit {
			s.available -= r.quantity
			s.sold += r.quantity
			s.addUnits(r.user, r.quantity)
			r.status, r.paymentID = seckill.StatusPaid, p.PaymentID
			e.emitAs(s, r, now, seckill.EventLatePaid)
			e.serveQueue(s, now)
			return seckill.PaymentLateApplied, s.view(r), nil
		}
		r.status = seckill.StatusRefundRequired
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
	r := &reservation{
		foreignID: in.ID, user: in.UserID, quantity: in.Quantity, status: in.Status,
		amount: in.AmountCents, paymentID: in.PaymentID, createdAt: in.CreatedAt.UnixNano(),
		seq: in.Seq, idemKey: in.IdempotencyKey, slot: -1,
	}
	if r.seq > s.seq {
		s.seq = r.seq
	}
	ended := false
	switch r.status {
	case seckill.StatusHeld:
		if in.ExpiresAt == nil || s.available < r.quantity {
			r.status = seckill.StatusExpired
			ended = true
			break
		}
		s.available -= r.quantity
		s.held += r.quantity
		r.expiresAt = in.ExpiresAt.UnixNano()
		s.holds.push(r)
		s.addUnits(r.user, r.quantity)
	case seckill.StatusQueued:
		s.queue.push(r)
		s.addUnits(r.user, r.quantity)
	case seckill.StatusPaid:
		s.addUnits(r.user, r.quantity)
	}
	s.store(r)
	if ended { // the order store has it held: the event tells it the hold ended
		e.emit(s, r, e.clock.Now())
	}
	if r.idemKey != "" {
		s.remember(r)
	}
	return nil
}

// reclaim expires every hold whose expiry has passed, earliest first, then serves the queue.
// Each expired hold costs O(log n) and expires once, so the work is amortized over the buys
// that created the holds; the sweeper keeps the backlog small when there is no traffic.
func (e *Engine) reclaim(s *sale, now time.Time) int {
	n := 0
	for len(s.holds) > 0 && s.holds[0].expiresAt <= now.UnixNano() {
		h := s.holds.pop()
		if !h.live() {
			continue // paid or cancelled before it expired
		}
		r := h.r
		s.held -= r.quantity
		s.available += r.quantity
		s.addUnits(r.user, -r.quantity)
		r.status = seckill.StatusExpired
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
			s.addUnits(r.user, -r.quantity)
			r.status = seckill.StatusRejected
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
		s.addUnits(r.user, -r.quantity)
		r.status = seckill.StatusRejected
		e.emit(s, r, now)
	}
}

// hold moves r's units from available to held with a fresh expiry.
func (s *sale) hold(r *reservation, now time.Time) {
	r.status = seckill.StatusHeld
	r.expiresAt = now.Add(s.def.HoldDuration()).UnixNano()
	s.available -= r.quantity
	s.held += r.quantity
	s.holds.push(r)
}

// release returns a held reservation's units to available.
func (s *sale) release(r *reservation) {
	s.held -= r.quantity // its heap entry goes stale (see holdHeap)
	s.available += r.quantity
	s.addUnits(r.user, -r.quantity)
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
		ID: s.id(r), SaleID: s.def.ID, UserID: r.user, Quantity: r.quantity, Status: r.status,
		AmountCents: r.amount, PaymentID: r.paymentID, CreatedAt: time.Unix(0, r.createdAt).UTC(), Seq: r.seq,
		IdempotencyKey: r.idemKey,
	}
	switch r.status {
	case seckill.StatusHeld:
		t := time.Unix(0, r.expiresAt).UTC()
		v.ExpiresAt = &t
	case seckill.StatusQueued:
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

// random returns 8 bytes of crypto/rand output for a reservation id. They are read up to 4 KiB
// at a time (64 bytes for a sale's first buyers, doubling), so a rush pays for one system call
// per 512 reservations and a quiet sale does not keep 4 KiB.
func (s *sale) random() uint64 {
	if len(s.idBuf) < 8 {
		s.idBuf = make([]byte, min(max(2*cap(s.idBuf), 64), 4096))
		_, _ = rand.Read(s.idBuf)
	}
	v := binary.BigEndian.Uint64(s.idBuf)
	s.idBuf = s.idBuf[8:]
	return v
}

// id renders r's id: the sale id, then its seq and its random half in hex. It is built when
// shown rather than stored, which keeps a pointer per reservation away from the collector.
func (s *sale) id(r *reservation) string {
	if r.foreignID != "" {
		return r.foreignID
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], r.seq)
	binary.BigEndian.PutUint64(b[8:], r.random)
	return seckill.ReservationID(s.def.ID, b[:])
}

// alloc hands out reservations from slabs of up to 256, so a rush costs one allocation per 256
// buys and the collector tracks far fewer objects. Slabs start at 8 and double, so a sale with a
// few buyers does not keep 256 entries.
func (s *sale) alloc() *reservation {
	if len(s.slab) == 0 {
		s.slabN = min(max(2*s.slabN, 8), 256)
		s.slab = make([]reservation, s.slabN)
	}
	r := &s.slab[0]
	s.slab = s.slab[1:]
	return r
}

// addUnits adds q (negative: takes) to user's held + queued + paid units, making the map at
// the sale's first buyer and dropping a user whose units are back to none.
func (s *sale) addUnits(user string, q int) {
	if s.users == nil {
		s.users = make(map[string]int)
	}
	if n := s.users[user] + q; n != 0 {
		s.users[user] = n
	} else {
		delete(s.users, user) // the entry's slot is reused by the next buyer
	}
}

// remember indexes r by its buyer's idempotency key.
func (s *sale) remember(r *reservation) {
	if s.idem == nil {
		s.idem = make(map[idemKey]*reservation)
	}
	s.idem[idemKey{r.user, r.idemKey}] = r
}

// lookup returns the reservation with sequence seq, or nil.
func (s *sale) lookup(seq uint64) *reservation {
	if seq == 0 || seq > uint64(len(s.reservations)) {
		return nil
	}
	return s.reservations[seq-1]
}

// find returns the reservation with this id, or nil.
func (s *sale) find(id string) *reservation {
	if seq, ok := seqOf(id); ok {
		if r := s.lookup(seq); r != nil && r.foreignID == "" && s.id(r) == id {
			return r
		}
	}
	return s.foreign[id]
}

// store indexes r: at its sequence's slot when its id carries that sequence (growing the slice
// with holes for reservations that were never persisted), otherwise in the foreign map (ids made
// by another engine, restored after a switch).
func (s *sale) store(r *reservation) {
	if r.foreignID != "" {
		own := *r
		if seq, ok := seqOf(r.foreignID); ok && seq == r.seq && s.lookup(seq) == nil {
			own.random, _ = strconv.ParseUint(r.foreignID[len(r.foreignID)-16:], 16, 64)
			own.foreignID = ""
		}
		if own.foreignID == "" && s.id(&own) == r.foreignID {
			// The id is in our own format: index it by seq; it renders exactly as stored.
			r.random, r.foreignID = own.random, ""
		} else {
			if s.foreign == nil {
				s.foreign = make(map[string]*reservation)
			}
			s.foreign[r.foreignID] = r
			return
		}
	}
	if n := r.seq; n > uint64(cap(s.reservations)) {
		// Doubling, as for the hold heap: append grows a large slice by a quarter only.
		grown := make([]*reservation, len(s.reservations), max(n, 2*uint64(cap(s.reservations)), 16))
		copy(grown, s.reservations)
		s.reservations = grown
	}
	for uint64(len(s.reservations)) < r.seq {
		s.reservations = append(s.reservations, nil)
	}
	s.reservations[r.seq-1] = r
}
