package seckill

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill/internal/background"
	"golang.org/x/sync/singleflight"
)

// Service applies the domain rules across the inventory, the order store and the payment
// gateway. It does no I/O of its own: every effect goes through one of those interfaces.
type Service struct {
	inv      Inventory
	store    OrderStore
	payments Payments
	clock    Clock
	pathKey  []byte
	// starts caches each known sale's starts_at (sale id → time.Time) for the purchase-token
	// check on the buy path. starts_at never changes once a sale exists (restock and close
	// change stock and ends_at only), so the cache is never stale, and it holds one entry per
	// sale that exists.
	starts sync.Map
	// paying joins the concurrent POST /pay calls of one hold (by reservation id) into one
	// gateway call, so that a buyer's burst costs the shop's gateway rate limit one request.
	paying singleflight.Group
}

// ServiceConfig wires a Service.
type ServiceConfig struct {
	Inventory Inventory
	Store     OrderStore
	Payments  Payments
	Clock     Clock
	// AuthSecret is SECKILL_AUTH_SECRET; the purchase-path key is derived from it, so every
	// instance that shares the secret accepts every other's purchase tokens.
	AuthSecret []byte
}

// NewService returns a Service. Clock defaults to SystemClock.
func NewService(cfg ServiceConfig) *Service {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	return &Service{inv: cfg.Inventory, store: cfg.Store, payments: cfg.Payments, clock: cfg.Clock, pathKey: PurchaseKey(cfg.AuthSecret)}
}

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.clock.Now() }

// SaleView is a sale with its live stock and derived status, as GET /sales shows it.
type SaleView struct {
	Sale
	Status     SaleStatus `json:"status"`
	StockState StockState `json:"stock_state"`
	ServerTime time.Time  `json:"server_time"`
}

func (s *Service) view(sale Sale, st StockState) SaleView {
	now := s.clock.Now()
	sale.Segments = sale.SegmentCount() // an engine that has no segments shows 1

	return SaleView{Sale: sale, Status: sale.Status(now, st), StockState: st, ServerTime: now}
}

// Recover rebuilds the inventory from the order store: every sale with its sold units, then
// its reservations in arrival order. It is how the memory engine survives a restart; paid
// orders come from the database's synchronous payment records, so none is ever lost.
//
// A sale that has ended and has no held or queued reservation stored is settled: nothing but a
// late payment (refused after the end) can reach it. An engine that can (the memory engine
// with an archive) loads it as released, with its definition and sold units only, and answers
// for its reservations from the store; they are not read into memory. Any other sale is
// restored whole, and the engine releases it once it settles.
func (s *Service) Recover(ctx context.Context) error {
	sales, sold, err := s.store.Sales(ctx)
	if err != nil {
		return fmt.Errorf("recover: list sales: %w", err)
	}
	settled, _ := s.inv.(interface {
		LoadSettledSale(ctx context.Context, sale Sale, sold int) (bool, error)
	})
	for i, sale := range sales {
		if settled != nil && !s.clock.Now().Before(sale.EndsAt) {
			live, err := s.store.Reservations(ctx, sale.ID, StatusHeld, StatusQueued)
			if err != nil {
				return fmt.Errorf("recover: reservations of %s: %w", sale.ID, err)
			}
			if len(live) == 0 {
				loaded, err := settled.LoadSettledSale(ctx, sale, sold[i])
				if err != nil {
					return fmt.Errorf("recover: load sale %s: %w", sale.ID, err)
				}
				if loaded {
					continue
				}
			}
		}
		if err := s.inv.LoadSale(ctx, sale, sold[i]); err != nil {
			return fmt.Errorf("recover: load sale %s: %w", sale.ID, err)
		}
		rs, err := s.store.Reservations(ctx, sale.ID)
		if err != nil {
			return fmt.Errorf("recover: reservations of %s: %w", sale.ID, err)
		}
		for _, r := range rs {
			if err := s.inv.RestoreReservation(ctx, r); err != nil {
				return fmt.Errorf("recover: reservation %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// CreateSale validates in, stores the sale and loads it into the inventory.
func (s *Service) CreateSale(ctx context.Context, in SaleInput) (SaleView, error) {
	sale, err := NewSale(in, s.clock.Now())
	if err != nil {
		return SaleView{}, err
	}
	if err := s.store.CreateSale(ctx, sale); err != nil {
		return SaleView{}, unavailable(err)
	}
	// A conflict here means the engine has the sale already: on a shared engine, another call
	// found it in the database between the insert above and this line and loaded it (a
	// rebuild). The definition is the one just stored, so the sale exists as asked.
	if err := s.inv.LoadSale(ctx, sale, 0); err != nil && ErrorCode(err) != CodeConflict {
		// All or nothing: take the row back, so that no sale exists that the engine did not
		// take (the client may retry the same id). If the database cannot take it back now,
		// the row stays, and the engine loads it from there on first use (a rebuild).
		if derr := s.store.DeleteSale(ctx, sale.ID); derr != nil {
			err = errors.Join(err, fmt.Errorf("undo create sale %s: %w", sale.ID, derr))
		}
		return SaleView{}, err
	}
	// The sale exists now. A call that found it in the database before this load may have
	// started loading it in the engine itself (a rebuild, above): while that runs, the engine
	// answers unavailable for a moment. The creation succeeded, so wait that moment out rather
	// than answer 503 for a sale that was created (a client retrying would get 409).
	view, err := s.Sale(ctx, sale.ID)
	for wait := time.Duration(0); ErrorCode(err) == CodeUnavailable && wait < createSettle; wait += createSettleStep {
		select {
		case <-ctx.Done():
			return SaleView{}, err
		case <-time.After(createSettleStep):
		}
		view, err = s.Sale(ctx, sale.ID)
	}
	return view, err
}

// createSettle bounds how long CreateSale waits for a rebuild of the sale it just created
// (started by a concurrent read) before it answers; it polls every createSettleStep.
const (
	createSettle     = 3 * time.Second
	createSettleStep = 50 * time.Millisecond
)

// Sale returns one sale with live counts.
func (s *Service) Sale(ctx context.Context, id string) (SaleView, error) {
	sale, st, err := s.inv.Sale(ctx, id)
	if err != nil {
		return SaleView{}, err
	}
	return s.view(sale, st), nil
}

// Sales lists every sale with live counts, oldest first.
func (s *Service) Sales(ctx context.Context) ([]SaleView, error) {
	return s.sales(ctx, false)
}

// ListedSales lists the sales the storefront shows (listed), with live counts, oldest first.
// Unlisted sales are left out before the engine is asked about them, so that the many sales a
// load test leaves behind cost the storefront's list nothing.
func (s *Service) ListedSales(ctx context.Context) ([]SaleView, error) {
	return s.sales(ctx, true)
}

func (s *Service) sales(ctx context.Context, listedOnly bool) ([]SaleView, error) {
	sales, _, err := s.store.Sales(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]SaleView, 0, len(sales))
	var down error
	for _, sale := range sales {
		if listedOnly && !sale.Listed {
			continue
		}
		v, err := s.Sale(ctx, sale.ID)
		switch ErrorCode(err) {
		case "":
			if listedOnly && !v.Listed { // taken off in the engine, the store not told yet
				continue
			}
			out = append(out, v)
		case CodeNotFound:
			// Created by another instance and not loaded into this one's engine yet.
		case CodeUnavailable:
			// Missing from Redis and being rebuilt, or Redis is down: the list shows the
			// sales it can show, and fails only if it can show none of them.
			down = err
		default:
			return nil, err
		}
	}
	if len(out) == 0 && down != nil {
		return nil, down
	}
	return out, nil
}

// SaleIDs lists the ids of every sale.
func (s *Service) SaleIDs(ctx context.Context) ([]string, error) {
	return s.saleIDs(ctx, func(Sale) bool { return true })
}

// liveMargin is how long after its last hold could have expired a sale still counts as live.
const liveMargin = time.Minute

// LiveSaleIDs lists the sales that can still change by themselves: not ended, or ended less
// than hold_seconds (plus a minute) ago, so that a hold taken at the end may still expire. The
// sweeper and the Redis stream consumers work on these only, so that their work does not grow
// with every sale ever held. A later change (a late payment of an old sale) is still applied by
// the call that makes it; only its stream event, which is of no use to the order store (late
// payments are recorded by the payment transaction), waits for the sale's next consumer.
func (s *Service) LiveSaleIDs(ctx context.Context) ([]string, error) {
	now := s.clock.Now()
	return s.saleIDs(ctx, func(sale Sale) bool {
		return now.Before(sale.EndsAt.Add(sale.HoldDuration() + liveMargin))
	})
}

func (s *Service) saleIDs(ctx context.Context, keep func(Sale) bool) ([]string, error) {
	sales, _, err := s.store.Sales(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	ids := make([]string, 0, len(sales))
	for _, sale := range sales {
		if keep(sale) {
			ids = append(ids, sale.ID)
		}
	}
	return ids, nil
}

// PurchasePath is the answer of GET /sales/{id}/path.
type PurchasePath struct {
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PurchasePath returns the user's secret buy URL, only once the sale is active.
func (s *Service) PurchasePath(ctx context.Context, saleID, userID string) (PurchasePath, error) {
	sale, err := s.saleWindow(ctx, saleID)
	if err != nil {
		return PurchasePath{}, err
	}
	if err := sale.WindowError(s.clock.Now()); err != nil {
		return PurchasePath{}, err
	}
	return PurchasePath{
		Path:      "/api/v1/sales/" + sale.ID + "/buy/" + s.purchaseToken(sale, userID),
		ExpiresAt: sale.EndsAt,
	}, nil
}

// saleWindow is the sale's definition for a caller that needs no counts: the inventory's
// SaleWindow when it has one (cheaper), else Sale.
func (s *Service) saleWindow(ctx context.Context, saleID string) (Sale, error) {
	if w, ok := s.inv.(SaleWindows); ok {
		return w.SaleWindow(ctx, saleID)
	}
	sale, _, err := s.inv.Sale(ctx, saleID)
	return sale, err
}

// purchaseToken is the user's purchase token for the sale.
func (s *Service) purchaseToken(sale Sale, userID string) string {
	return PurchaseToken(s.pathKey, sale.ID, userID, sale.StartsAt)
}

// PurchaseKey derives the purchase-path key from SECKILL_AUTH_SECRET:
// HMAC-SHA256(secret, "seckill purchase path v1"). Every instance that shares the secret
// derives the same key, so each accepts the others' tokens.
func PurchaseKey(authSecret []byte) []byte {
	mac := hmac.New(sha256.New, authSecret)
	mac.Write([]byte("seckill purchase path v1"))
	return mac.Sum(nil)
}

// PurchaseToken is the token of the purchase path /api/v1/sales/{sale}/buy/{token}:
// base64url(HMAC-SHA256(key, sale id ‖ 0 ‖ user id ‖ 0 ‖ starts_at in ms)), without padding,
// bound to its user and sale. A load generator that knows the auth secret computes it to skip
// the /path round trip.
func PurchaseToken(key []byte, saleID, userID string, startsAt time.Time) string {
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(purchaseMAC(key, saleID, userID, startsAt, sum[:0]))
}

// purchaseTokenLen is the length of every purchase token: 32 bytes in unpadded base64url.
var purchaseTokenLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// validPurchaseToken reports, in constant time, whether token is PurchaseToken(key, saleID,
// userID, startsAt). It allocates nothing: it runs on every buy.
func validPurchaseToken(key []byte, saleID, userID string, startsAt time.Time, token string) bool {
	var sum [sha256.Size]byte
	var want [64]byte
	base64.RawURLEncoding.Encode(want[:], purchaseMAC(key, saleID, userID, startsAt, sum[:0]))
	if len(token) != purchaseTokenLen {
		return false
	}
	var diff byte
	for i := range purchaseTokenLen {
		diff |= want[i] ^ token[i]
	}
	return diff == 0
}

// keyedMAC is an HMAC-SHA256 keyed with key (crypto/hmac resets it to its keyed state without
// hashing the key again) and a buffer for the message.
type keyedMAC struct {
	key []byte
	mac hash.Hash
	msg []byte
}

// purchaseMACs pools keyedMACs: a process has one purchase key (tests a few), and a pooled MAC
// spares every buy an HMAC's allocation and key schedule.
var purchaseMACs sync.Pool

// purchaseMAC appends to sum the HMAC of a purchase token's message.
func purchaseMAC(key []byte, saleID, userID string, startsAt time.Time, sum []byte) []byte {
	m, _ := purchaseMACs.Get().(*keyedMAC)
	if m == nil || !hmac.Equal(m.key, key) {
		k := bytes.Clone(key)
		m = &keyedMAC{key: k, mac: hmac.New(sha256.New, k)}
	}
	defer purchaseMACs.Put(m)
	m.mac.Reset()
	b := append(m.msg[:0], saleID...)
	b = append(b, 0)
	b = append(b, userID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, startsAt.UnixMilli(), 10)
	m.msg = b
	m.mac.Write(b)
	return m.mac.Sum(sum)
}

// CheckPurchaseToken verifies that token is the purchase token of this user and sale. It runs
// before the body is read, so a forged URL costs no parsing (docs/API.md's check order).
//
// The sale's starts_at is cached after the first lookup, so that a buy costs one engine call
// (the buy itself) rather than two: on the Redis engine each is a round trip and a script.
func (s *Service) CheckPurchaseToken(ctx context.Context, saleID, token, userID string) error {
	var sale Sale
	if v, ok := s.starts.Load(saleID); ok {
		sale = Sale{ID: saleID, StartsAt: v.(time.Time)}
	} else {
		var err error
		if sale, _, err = s.inv.Sale(ctx, saleID); err != nil {
			return err
		}
		s.starts.Store(saleID, sale.StartsAt)
	}
	if !validPurchaseToken(s.pathKey, saleID, userID, sale.StartsAt, token) {
		return Errorf(CodeInvalidToken, "purchase token is not valid for this user and sale")
	}
	return nil
}

// Buy reserves units for a user whose purchase token has been checked.
func (s *Service) Buy(ctx context.Context, req BuyRequest) (BuyResult, error) {
	return s.inv.Buy(ctx, req)
}

// Reservation returns the user's reservation; another user's reads as not found.
func (s *Service) Reservation(ctx context.Context, id, userID string) (Reservation, error) {
	r, err := s.inv.Reservation(ctx, id)
	if err != nil {
		return Reservation{}, err
	}
	if r.UserID != userID {
		return Reservation{}, Errorf(CodeNotFound, "reservation %q not found", id)
	}
	return r, nil
}

// Cancel cancels the user's reservation.
//
// A payment started for the hold is then due for closing at the gateway at once rather than
// at the hold's expiry. If that cannot be written (the database is down) the cancel stands
// all the same: the close comes at the expiry the record already has, and a payment made
// before it follows the late rule.
func (s *Service) Cancel(ctx context.Context, id, userID string) (Reservation, error) {
	r, err := s.inv.Cancel(ctx, id, userID)
	if err != nil {
		return r, err
	}
	if ops, ok := s.store.(OpenPaymentStore); ok {
		_ = ops.CloseSoon(ctx, id, s.clock.Now())
	}
	return r, nil
}

// Pay starts a payment with the gateway for a held reservation; a free hold is confirmed at
// once instead (confirmFree), and confirming it again answers the same.
func (s *Service) Pay(ctx context.Context, id, userID string) (PaymentIntent, error) {
	r, err := s.Reservation(ctx, id, userID)
	if err != nil {
		return PaymentIntent{}, err
	}
	switch r.Status {
	case StatusHeld:
		if free(r) {
			return s.confirmFree(ctx, r)
		}
	case StatusPaid:
		if free(r) && r.PaymentID == FreePaymentID(r.ID) {
			// Confirmed before: answered the same, and recorded if the database missed it.
			return s.confirmFree(ctx, r)
		}
		return PaymentIntent{}, Errorf(CodeConflict, "reservation %s is already paid", id)
	case StatusQueued:
		return PaymentIntent{}, Errorf(CodeConflict, "reservation %s is still queued; pay once it is held", id)
	default:
		return PaymentIntent{}, Errorf(CodeHoldExpired, "reservation %s is %s; its hold is gone", id, r.Status)
	}
	if s.payments == nil {
		return PaymentIntent{}, Errorf(CodeUnavailable, "no payment gateway is configured")
	}
	ops, _ := s.store.(OpenPaymentStore)
	if ops != nil {
		// A hold has one payment: while it is open its page is answered again, and the gateway
		// (whose rate limit is the whole shop's) is not asked. Only calls that find no record
		// reach the gateway: the first, joined with those of this instance that come while it
		// runs (paying), and the first of each other instance; the gateway's idempotency key
		// (the reservation id) makes them one payment.
		p, err := ops.OpenPaymentOf(ctx, r.ID)
		if err == nil {
			return PaymentIntent{PaymentID: p.PaymentID, RedirectURL: p.RedirectURL, Gateway: p.Gateway}, nil
		}
		if ErrorCode(err) != CodeNotFound {
			return PaymentIntent{}, unavailable(err)
		}
	}
	v, err, _ := s.paying.Do(r.ID, func() (any, error) {
		// The call is shared by every caller that joined it, so it must not end with the first
		// caller's request (a buyer who closed the tab would fail the others): it keeps ctx's
		// values but not its cancellation, bounded by paymentStartWait.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), paymentStartWait)
		defer cancel()
		return s.startPayment(sctx, r, ops)
	})
	if err != nil {
		return PaymentIntent{}, err
	}
	return v.(PaymentIntent), nil
}

// startPayment asks the gateway for the hold's payment and records it (Pay).
func (s *Service) startPayment(ctx context.Context, r Reservation, ops OpenPaymentStore) (PaymentIntent, error) {
	var (
		intent PaymentIntent
		err    error
	)
	if sp, ok := s.payments.(SalePayments); ok {
		sale, serr := s.saleWindow(ctx, r.SaleID) // currency, name and hold_seconds
		if serr != nil {
			return PaymentIntent{}, serr
		}
		intent, err = sp.CreatePaymentFor(ctx, r, sale)
	} else {
		intent, err = s.payments.CreatePayment(ctx, r)
	}
	if err != nil {
		return PaymentIntent{}, fmt.Errorf("create payment: %w", err)
	}
	// The payment page is handed out only once the payment is recorded for closing when the
	// hold ends; if that fails the buyer is answered 503 and retries, and the gateway, asked
	// again with the same idempotency key, starts no second payment.
	if ops != nil && intent.Gateway != "" && r.ExpiresAt != nil {
		err := ops.RecordOpenPayment(ctx, OpenPayment{PaymentID: intent.PaymentID, ReservationID: r.ID,
			Gateway: intent.Gateway, RedirectURL: intent.RedirectURL, Status: PaymentOpen, CloseAt: *r.ExpiresAt}, s.clock.Now())
		if err != nil {
			return PaymentIntent{}, unavailable(err)
		}
	}
	return intent, nil
}

// paymentStartWait bounds a payment start shared by the /pay calls of one hold (Pay): the
// gateway's call and the record of the open payment.
const paymentStartWait = 30 * time.Second

// paymentLookupWait bounds ApplyPayment's look-up of an earlier record of the payment. A
// database that hangs (a stopped server, a partition) rather than refusing must not keep a
// payment from the engine while its hold runs out; a healthy one answers in milliseconds, and
// a look-up cut short costs nothing but the guard described at ApplyPayment.
const paymentLookupWait = 250 * time.Millisecond

// ApplyPayment handles a verified webhook delivery. A failed payment changes nothing. A
// succeeded one is confirmed in the engine, then recorded in one SQL transaction that guards
// sales.sold; only after that commits may the webhook answer 200.
//
// The engine is asked even while the database is down, so that a payment delivered before
// its hold expired is honoured however long the outage lasts: the engine settles the hold at
// once (it remembers which payment paid it) and the delivery is answered 503. The gateway's
// retry, once the database is back, finds the engine answering duplicate and records the
// payment as applied. The paid event the engine emits meanwhile cannot get ahead of the
// record: events never write paid rows (OrderStore.ApplyEvents).
//
// First the database is asked whether the payment is recorded already (for at most
// paymentLookupWait): a recorded payment is a duplicate and the engine is not asked again, so
// that a refund_required record stays final even if its reservation could now be paid (a
// payment that arrived while it was queued). A look-up that fails or is slow is no answer; the
// engine goes on, and RecordPayment's own check of the payment id still records it once.
func (s *Service) ApplyPayment(ctx context.Context, p PaymentConfirmation, succeeded bool) (PaymentResult, error) {
	if !succeeded {
		return PaymentIgnored, nil
	}
	if s.paymentRecorded(ctx, p.PaymentID) {
		return PaymentDuplicate, nil
	}
	result, r, err := s.inv.ConfirmPayment(ctx, p)
	if err != nil {
		return "", err
	}
	if result == PaymentDuplicate {
		// The engine applied this payment before but the database has no record of it: an
		// earlier delivery reached the engine while the database was down or failed (and the
		// gateway retried). Record it now, so engine and database agree on sold units.
		result = PaymentApplied
	}
	var reason string
	if result == PaymentRefundRequired {
		reason = s.refundReason(ctx, p, r)
	}
	if r.ID == "" {
		r = Reservation{ID: p.ReservationID}
	}
	recorded, err := s.store.RecordPayment(ctx, PaymentRecord{
		PaymentID: p.PaymentID, Reservation: r, AmountCents: p.AmountCents, Result: result, At: s.clock.Now(),
		Gateway: p.Gateway, Reason: reason,
	})
	return recorded, unavailable(err)
}

// refundReason says why the engine answered refund_required for p (r as the engine returned
// it; no id when it knows no such reservation), for the operator who reads the refund: the
// engine answers only the result, and these are its rules' cases (MODEL.md) in their order. A
// sale that cannot be read leaves the currency unchecked here.
func (s *Service) refundReason(ctx context.Context, p PaymentConfirmation, r Reservation) string {
	if r.ID == "" {
		return fmt.Sprintf("no reservation %q is known", p.ReservationID)
	}
	if sale, err := s.saleWindow(ctx, r.SaleID); err == nil && !p.InCurrency(sale.Currency) {
		currency := sale.Currency
		if currency == "" {
			currency = DefaultCurrency
		}
		return fmt.Sprintf("paid in %s; the sale is in %s", strings.ToLower(p.Currency), currency)
	}
	if p.AmountCents != r.AmountCents {
		return fmt.Sprintf("paid %d cents; the reservation's amount is %d", p.AmountCents, r.AmountCents)
	}
	if r.PaymentID != "" && r.PaymentID != p.PaymentID {
		return "the reservation is paid by another payment"
	}
	return fmt.Sprintf("paid after the hold ended (the reservation is %s) and the late rule could not honour it: no unit free, or the buyer at the limit", r.Status)
}

// paymentRecorded reports whether the database answers, within paymentLookupWait, that the
// payment is recorded. Any failure reports false: see ApplyPayment.
func (s *Service) paymentRecorded(ctx context.Context, paymentID string) bool {
	ctx, cancel := context.WithTimeout(ctx, paymentLookupWait)
	defer cancel()
	prev, err := s.store.PaymentResult(ctx, paymentID)
	return err == nil && prev != ""
}

// Orders lists the user's paid orders and refunds owed, from the database.
func (s *Service) Orders(ctx context.Context, userID string) ([]Order, error) {
	orders, err := s.store.Orders(ctx, userID)
	return orders, unavailable(err)
}

// AddStock restocks a running sale; queued buyers are served first.
func (s *Service) AddStock(ctx context.Context, saleID string, add int) (SaleView, error) {
	sale, st, err := s.inv.AddStock(ctx, saleID, add)
	if err != nil {
		return SaleView{}, err
	}
	if err := s.store.UpdateSale(ctx, sale); err != nil {
		return SaleView{}, unavailable(err)
	}
	return s.view(sale, st), nil
}

// CloseSale ends a sale now.
func (s *Service) CloseSale(ctx context.Context, saleID string) (SaleView, error) {
	sale, st, err := s.inv.CloseSale(ctx, saleID)
	if err != nil {
		return SaleView{}, err
	}
	if err := s.store.UpdateSale(ctx, sale); err != nil {
		return SaleView{}, unavailable(err)
	}
	return s.view(sale, st), nil
}

// Sweeper returns the memory engine's sweeper, a background.Service named "sweeper": every
// interval until it is stopped it reclaims the expired holds of every live sale, so counts stay
// fresh without traffic (250 ms, invariant 8 of docs/MODEL.md). Correctness never depends on
// it: every engine call reclaims first. Its exit is immediate (Run returns nil). A failed
// listing or reclaim is reported (background.Report) and tried again at the next tick; a sale
// the engine does not have (created a moment ago, not yet loaded) is not an error. The Redis
// engine has its own, leader-elected sweeper (redisinv.Engine.Sweeper).
func (s *Service) Sweeper(interval time.Duration) background.Service {
	return &sweeper{s: s, interval: interval}
}

type sweeper struct {
	s        *Service
	interval time.Duration
}

func (w *sweeper) Name() string { return "sweeper" }

func (w *sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ids, err := w.s.LiveSaleIDs(ctx)
		if err != nil {
			background.Report(ctx, fmt.Errorf("list sales: %w", err))
			continue
		}
		for _, id := range ids {
			if _, err := w.s.inv.Reclaim(ctx, id); err != nil && ErrorCode(err) != CodeNotFound {
				background.Report(ctx, fmt.Errorf("sweep sale %s: %w", id, err))
			}
		}
	}
}

// Audit is the result of checking the invariants of docs/MODEL.md for one sale.
type Audit struct {
	OK         bool       `json:"ok"`
	Violations []string   `json:"violations"`
	Engine     StockState `json:"engine"`
	Database   DBCounts   `json:"database"`
}

// Audit checks the invariants that can be checked from outside the engine: counts add up,
// nothing is oversold in the engine or the database, engine and database agree on sold units,
// paid reservations match paid payments, and no user holds more than the limit.
func (s *Service) Audit(ctx context.Context, saleID string) (Audit, error) {
	sale, st, err := s.inv.Sale(ctx, saleID)
	if err != nil {
		return Audit{}, err
	}
	db, err := s.store.Counts(ctx, saleID)
	if err != nil {
		return Audit{}, unavailable(err)
	}
	a := Audit{Engine: st, Database: db, Violations: []string{}}
	bad := func(format string, args ...any) { a.Violations = append(a.Violations, fmt.Sprintf(format, args...)) }
	if st.Available < 0 || st.Held < 0 || st.Sold < 0 || st.Queued < 0 {
		bad("negative engine count: %+v", st)
	}
	if st.Available+st.Held+st.Sold != st.Sellable {
		bad("available %d + held %d + sold %d != sellable %d", st.Available, st.Held, st.Sold, st.Sellable)
	}
	if st.Sold > st.Sellable {
		bad("engine oversold: sold %d > sellable %d", st.Sold, st.Sellable)
	}
	if db.Sold > sale.Sellable() {
		bad("database oversold: sales.sold %d > sellable %d", db.Sold, sale.Sellable())
	}
	if db.Sold != st.Sold {
		bad("engine sold %d != database sold %d", st.Sold, db.Sold)
	}
	if db.PaidUnits != db.Sold {
		bad("paid reservation units %d != sales.sold %d", db.PaidUnits, db.Sold)
	}
	paid, err := s.store.Reservations(ctx, saleID, StatusPaid)
	if err != nil {
		return Audit{}, unavailable(err)
	}
	perUser := map[string]int{}
	for _, r := range paid {
		perUser[r.UserID] += r.Quantity
	}
	for u, n := range perUser {
		if n > sale.PerUserLimit {
			bad("user %s paid for %d units, limit %d", u, n, sale.PerUserLimit)
		}
	}
	a.OK = len(a.Violations) == 0
	return a, nil
}

// readyWait bounds Ready, so that /readyz answers within a load balancer's probe timeout
// even when the database hangs rather than refusing.
const readyWait = time.Second

// Ready reports whether the database answers within readyWait. It is the database check of
// /readyz, which reports it without failing on it: buys need only the engine, and payments
// delivered meanwhile are settled in the engine and recorded on the gateway's retry
// (ApplyPayment).
func (s *Service) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return errors.Join(Errorf(CodeUnavailable, "database is not reachable"), err)
	}
	return nil
}

// unavailable turns an uncoded store error (a driver or connection failure) into a coded
// `unavailable` one, so the client gets 503 with Retry-After and the gateway retries, while the
// driver's text stays in the log. Coded errors (not_found, conflict, …) pass through unchanged.
func unavailable(err error) error {
	if err == nil || ErrorCode(err) != CodeInternal {
		return err
	}
	return fmt.Errorf("%w: %w", Errorf(CodeUnavailable, "the database is unavailable; retry shortly"), err)
}

// maxHoldChecks bounds the engine reads of one ExpiringHolds call.
const maxHoldChecks = 64

// ExpiringHolds returns up to n of the sale's holds with the soonest expires_at, as the engine
// has them now. Candidates come from the order store (which the events reach a moment after
// the engine), soonest first, and each is read from the engine, so a hold that has ended since
// is left out and one granted a moment ago may be missing; at most maxHoldChecks are read.
func (s *Service) ExpiringHolds(ctx context.Context, saleID string, n int) ([]Reservation, error) {
	if _, _, err := s.inv.Sale(ctx, saleID); err != nil {
		return nil, err
	}
	stored, err := s.store.Reservations(ctx, saleID, StatusHeld)
	if err != nil {
		return nil, unavailable(err)
	}
	sort.Slice(stored, func(i, j int) bool { return expiry(stored[i]).Before(expiry(stored[j])) })
	holds := []Reservation{}
	for i := 0; i < len(stored) && i < maxHoldChecks && len(holds) < n; i++ {
		r, err := s.inv.Reservation(ctx, stored[i].ID)
		if err != nil {
			if ErrorCode(err) == CodeNotFound {
				continue
			}
			return nil, err
		}
		if r.Status == StatusHeld {
			holds = append(holds, r)
		}
	}
	sort.Slice(holds, func(i, j int) bool { return expiry(holds[i]).Before(expiry(holds[j])) })
	return holds, nil
}

// expiry is a hold's expires_at; the zero time for a reservation without one.
func expiry(r Reservation) time.Time {
	if r.ExpiresAt == nil {
		return time.Time{}
	}
	return *r.ExpiresAt
}
