package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
)

// Archive is where the reservations of a released sale are read from: the order store, which
// the engine's events (WithEvents, through the pipeline) and the payment transaction keep.
// seckill.OrderStore satisfies it.
type Archive interface {
	// Reservation returns one reservation as stored, or a not_found error.
	Reservation(ctx context.Context, id string) (seckill.Reservation, error)
	// Reservations lists a sale's reservations (every status when none is given).
	Reservations(ctx context.Context, saleID string, statuses ...seckill.ReservationStatus) ([]seckill.Reservation, error)
}

// WithArchive lets the engine release settled sales (see releaseSale) and answer for their
// reservations from a. a must be the store that this engine's events (WithEvents) and the
// service's payment records reach; without it the engine keeps every sale whole.
func WithArchive(a Archive) Option { return func(e *Engine) { e.archive = a } }

// A settled sale is first compared with the archive releaseDelay after it was first seen
// settled (the pipeline writes events within milliseconds), then, while they differ, at
// doubling intervals up to releaseRetryMax: each comparison reads every reservation of the sale.
const (
	releaseDelay    = time.Second
	releaseRetryMax = 5 * time.Minute
)

// releaseState is a sale's progress towards release. Guarded by the sale's mu.
type releaseState struct {
	done    bool  // released: the per-reservation state is gone, the archive answers
	running bool  // a comparison with the archive is in flight
	at      int64 // unix ns of the next comparison; 0 until the sale is first seen settled
	fails   int   // comparisons that found a difference (or failed)
	// late holds the reservations that a payment changed after the release (rule 7: an
	// expired or cancelled one becomes refund_required) until the archive shows them so: the
	// payment transaction writes that status a moment after the engine answers.
	late map[string]seckill.Reservation
}

// settled reports whether the sale can no longer change by itself: it has ended (or was
// closed) and has no hold and no queue. What can still reach it is a late payment, which
// rule 7 refuses after the end (refund_required), a duplicate, a cancel of a finished
// reservation (unchanged) and AddStock (counts only).
func (s *sale) settled(now time.Time) bool {
	return (s.closed || !now.Before(s.def.EndsAt)) && s.held == 0 && s.queue.len() == 0
}

// releaseDue reports whether the caller should run releaseSale now, and marks it running.
// Call it with s.mu held, after reclaim.
func (e *Engine) releaseDue(s *sale, now time.Time) bool {
	r := &s.rel
	if e.archive == nil || r.done || r.running || !s.settled(now) {
		return false
	}
	if r.at == 0 {
		r.at = now.Add(releaseDelay).UnixNano()
	}
	if now.UnixNano() < r.at {
		return false
	}
	r.running = true
	return true
}

// releaseSale drops a settled sale's per-reservation state (reservations, holds, queue,
// per-user units, idempotency keys) once the archive holds every one of its reservations
// exactly as the engine does; from then on the archive answers for them. The comparison is
// what makes this safe: events reach the store asynchronously, and a payment is recorded a
// moment after the engine applied it, so a store that lags shows a difference and the release
// waits. Once they agree nothing is in flight that could change a row (statuses only move
// forward in the store), and the only change left, a late payment's refund_required, is kept
// in rel.late until the store shows it. Call it without s.mu held: the store read runs
// outside the critical section.
func (e *Engine) releaseSale(ctx context.Context, s *sale) {
	rows, err := e.archive.Reservations(ctx, s.def.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := e.clock.Now()
	e.reclaim(s, now)
	s.rel.running = false
	if err == nil && s.settled(now) && s.archivedAsIs(rows) {
		s.drop()
		return
	}
	s.rel.fails++
	backoff := min(releaseDelay<<min(s.rel.fails, 12), releaseRetryMax)
	s.rel.at = now.Add(backoff).UnixNano()
}

// archivedAsIs reports whether rows are exactly the sale's reservations as the engine shows
// them: the same set, and every field a read shows equal.
func (s *sale) archivedAsIs(rows []seckill.Reservation) bool {
	if len(rows) != s.book.n+len(s.foreign) {
		return false
	}
	for _, row := range rows {
		r := s.find(row.ID)
		if r == nil || !sameReservation(s.view(r), row) {
			return false
		}
	}
	return true
}

func sameReservation(a, b seckill.Reservation) bool {
	return a.ID == b.ID && a.SaleID == b.SaleID && a.UserID == b.UserID && a.Quantity == b.Quantity &&
		a.Status == b.Status && a.AmountCents == b.AmountCents && a.PaymentID == b.PaymentID &&
		a.CreatedAt.Equal(b.CreatedAt) && a.Seq == b.Seq && a.IdempotencyKey == b.IdempotencyKey &&
		a.ExpiresAt == nil && b.ExpiresAt == nil && a.Position == 0 && b.Position == 0
}

// drop releases the sale: it keeps the definition and the counts. It is closed from now on,
// so that a clock stepping back before ends_at cannot reopen a sale whose buyers are gone.
func (s *sale) drop() {
	s.book, s.foreign, s.users, s.idem = book{}, nil, userUnits{}, nil
	s.holds, s.queue = holdSet{}, fifo{}
	s.idBuf, s.idPos = nil, 0
	s.closed = true
	s.rel.done = true
}

var _ seckill.SettledSales = (*Engine)(nil)

// LoadSettledSale makes a sale known as released, with sold units already sold: the restart
// path for a sale that has ended and whose stored reservations are all finished (none held or
// queued), so that they are not read into memory. It loads nothing and reports false when the
// engine has no archive or the sale has not ended; the caller then loads it with LoadSale and
// RestoreReservation.
func (e *Engine) LoadSettledSale(_ context.Context, def seckill.Sale, sold int) (bool, error) {
	if e.archive == nil || e.clock.Now().Before(def.EndsAt) {
		return false, nil
	}
	s := &sale{def: def, closed: true, rel: releaseState{done: true}}
	return true, e.add(s, sold)
}

// archived reads a reservation of the released sale s from the archive, or from rel.late
// if a payment changed it since and the archive does not show that yet.
func (e *Engine) archived(ctx context.Context, s *sale, id string) (seckill.Reservation, error) {
	r, err := e.archive.Reservation(ctx, id)
	switch code := seckill.ErrorCode(err); {
	case err == nil:
	case code == seckill.CodeNotFound:
		return seckill.Reservation{}, notFound(id)
	case code == seckill.CodeInternal:
		return seckill.Reservation{}, fmt.Errorf("%w: %w",
			seckill.Errorf(seckill.CodeUnavailable, "the order store is unavailable; retry shortly"), err)
	default:
		return seckill.Reservation{}, err
	}
	if r.ID != id || r.SaleID != s.def.ID {
		return seckill.Reservation{}, notFound(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.rel.late[id]; ok {
		if r.Status != v.Status {
			return v, nil
		}
		delete(s.rel.late, id) // the store has caught up
	}
	return r, nil
}

// cancelArchived is Cancel for a released sale: every reservation is finished, so it is
// returned unchanged, except that a paid one is a conflict and another user's is not found.
func (e *Engine) cancelArchived(ctx context.Context, s *sale, id, userID string) (seckill.Reservation, error) {
	r, err := e.archived(ctx, s, id)
	switch {
	case err != nil:
		return seckill.Reservation{}, err
	case r.UserID != userID:
		return seckill.Reservation{}, notFound(id)
	case r.Status == seckill.StatusPaid:
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeConflict, "reservation %q is already paid", id)
	}
	return r, nil
}

// confirmArchived is ConfirmPayment for a released sale (docs/MODEL.md "ConfirmPayment"): the
// sale has ended and holds nothing, so no payment can be applied; an expired or cancelled
// reservation becomes refund_required (rule 7), with its event.
func (e *Engine) confirmArchived(ctx context.Context, s *sale, p seckill.PaymentConfirmation) (seckill.PaymentResult, seckill.Reservation, error) {
	r, err := e.archived(ctx, s, p.ReservationID)
	if seckill.ErrorCode(err) == seckill.CodeNotFound {
		return seckill.PaymentRefundRequired, seckill.Reservation{}, nil
	}
	if err != nil {
		return "", seckill.Reservation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.rel.late[r.ID]; ok {
		r = v // a payment since the read above
	}
	switch {
	case r.Status == seckill.StatusPaid && r.PaymentID == p.PaymentID:
		return seckill.PaymentDuplicate, r, nil
	case r.Status == seckill.StatusPaid, p.AmountCents != r.AmountCents, !p.InCurrency(s.def.Currency):
		return seckill.PaymentRefundRequired, r, nil
	case r.Status == seckill.StatusExpired || r.Status == seckill.StatusCancelled:
		r.Status = seckill.StatusRefundRequired
		if s.rel.late == nil {
			s.rel.late = make(map[string]seckill.Reservation)
		}
		s.rel.late[r.ID] = r
		e.send(r, e.clock.Now())
		return seckill.PaymentRefundRequired, r, nil
	default: // rejected, refund_required
		return seckill.PaymentRefundRequired, r, nil
	}
}
