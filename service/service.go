// Package service applies the domain rules of the flash sale across the inventory engine, the
// order store and the payment gateway (the interfaces of package seckill, the vocabulary). It
// does no I/O of its own: every effect goes through one of those interfaces. httpapi serves it;
// cmd/seckill wires it to the engine, the store and the gateway it is configured with.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/admission"
	"github.com/seckill-go/seckill/internal/logsummary"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/internal/wait"
	"golang.org/x/sync/singleflight"
)

// Service applies the domain rules across the inventory, the order store and the payment
// gateway. It does no I/O of its own: every effect goes through one of those interfaces.
type Service struct {
	inv      seckill.Inventory
	store    seckill.OrderStore
	payments seckill.Payments
	windows  seckill.SaleWindows  // nil: inv.Sale
	settled  seckill.SettledSales // nil: every sale restored whole
	clock    seckill.Clock
	pathKey  []byte
	// starts caches each known sale's saleFacts (sale id → saleFacts: starts_at, whether it
	// has a waiting room, its hold) for the purchase-token
	// check on the buy path. starts_at never changes once a sale exists (restock and close
	// change stock and ends_at only), so the cache is never stale, and it holds one entry per
	// sale that exists.
	starts sync.Map
	// paying joins the concurrent POST /pay calls of one hold (by reservation id) into one
	// gateway call, so that a buyer's burst costs the shop's gateway rate limit one request.
	paying singleflight.Group
	// onDemand: CreateSale does not load a sale created before its hot window (Config).
	onDemand bool
	// list caches the sale list's pages (salelist.go), and the definitions LiveSaleIDs reads.
	list *saleList
	// rooms is the engine's waiting rooms (nil: it has none); seedKey derives their seeds and
	// admitKey signs their admission tokens (room.go); rates observes their admissions.
	rooms    seckill.WaitingRooms
	seedKey  []byte
	admitKey []byte
	rates    *roomRates
	roomDefs sync.Map     // sale id → seckill.Sale: the room sales this instance read (room.go)
	journal  *roomJournal // the rooms' journal (roomjournal.go); nil: not kept
	// incarnations caches the stored incarnation of room sales whose engine definition lacks
	// it (roomjournal.go incarnation): the draw's seed and the journal are keyed by it.
	incarnations sync.Map
	// powKey signs the rooms' proof-of-work challenges (room.go); troubles summarises what
	// the service logs.
	powKey   []byte
	troubles *logsummary.Summarizer
}

// Config wires a Service. Inventory and Store are required; Payments may be nil (POST /pay then
// answers unavailable). Windows and Settled are the engine's optional capabilities, given
// explicitly where the engine has them (cmd/seckill wires them): each only makes a call cheaper,
// and the service answers the same without it.
type Config struct {
	Inventory seckill.Inventory
	Store     seckill.OrderStore
	Payments  seckill.Payments
	// Windows reads a sale's definition without its counts, for the purchase path, the payment
	// start and the refund reason (the Redis engine); nil: Inventory.Sale.
	Windows seckill.SaleWindows
	// Settled loads a settled sale as released on Recover (the memory engine with an archive);
	// nil: Recover restores every sale whole.
	Settled seckill.SettledSales
	// LoadOnDemand says that the engine loads a sale from the store on first use (the Redis
	// engine, whose rebuild does it): CreateSale then stores a sale created before its hot
	// window without loading it, and the engine loads it at its preheat time (the sweeper's
	// reconcile of LiveSaleIDs) or when something changes it first (docs/MODEL.md "Hot and
	// cold sales"). Without it every sale is loaded when created.
	LoadOnDemand bool
	Clock        seckill.Clock
	// AuthSecret is SECKILL_AUTH_SECRET; the purchase-path key is derived from it, so every
	// instance that shares the secret accepts every other's purchase tokens.
	AuthSecret []byte
	// ListTTL bounds how stale the sale list may be (default DefaultListTTL): salelist.go.
	ListTTL time.Duration
	// Rooms keeps the sales' waiting rooms; nil: the Inventory's, when it has them (both
	// engines do). Their seeds and admission tokens are keyed from AuthSecret (room.go).
	Rooms seckill.WaitingRooms
	// RoomJournal keeps the rooms' journal, what a lost room is restored from; nil: the
	// Store's, when it keeps one (sqlstore does).
	RoomJournal seckill.RoomJournal
	// Logger receives what the service logs: failed room releases (default: discarded).
	Logger *slog.Logger
}

// New returns a Service. Clock defaults to seckill.SystemClock.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = seckill.SystemClock{}
	}
	list := newSaleList(cfg.ListTTL)
	if cfg.Rooms == nil {
		cfg.Rooms, _ = cfg.Inventory.(seckill.WaitingRooms)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RoomJournal == nil {
		cfg.RoomJournal, _ = cfg.Store.(seckill.RoomJournal)
	}
	var journal *roomJournal
	if cfg.RoomJournal != nil && cfg.Rooms != nil {
		journal = &roomJournal{j: cfg.RoomJournal}
	}
	return &Service{journal: journal, inv: cfg.Inventory, store: listStore{cfg.Store, list}, payments: cfg.Payments, windows: cfg.Windows, settled: cfg.Settled,
		onDemand: cfg.LoadOnDemand, clock: cfg.Clock, pathKey: purchasetoken.Key(cfg.AuthSecret), list: list,
		rooms: cfg.Rooms, seedKey: roomSeedKey(cfg.AuthSecret), admitKey: admission.Key(cfg.AuthSecret), rates: newRoomRates(),
		powKey: powKey(cfg.AuthSecret), troubles: logsummary.New(cfg.Logger, 0)}
}

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.clock.Now() }

// SaleView is a sale with its live stock and derived status, as GET /sales shows it.
type SaleView struct {
	seckill.Sale
	Status     seckill.SaleStatus `json:"status"`
	StockState seckill.StockState `json:"stock_state"`
	ServerTime time.Time          `json:"server_time"`
}

func (s *Service) view(sale seckill.Sale, st seckill.StockState) SaleView {
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
	for i, sale := range sales {
		if s.settled != nil && !s.clock.Now().Before(sale.EndsAt) {
			live, err := s.store.Reservations(ctx, sale.ID, seckill.StatusHeld, seckill.StatusQueued)
			if err != nil {
				return fmt.Errorf("recover: reservations of %s: %w", sale.ID, err)
			}
			if len(live) == 0 {
				loaded, err := s.settled.LoadSettledSale(ctx, sale, sold[i])
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
		if err := s.restoreRoom(ctx, sale); err != nil {
			return fmt.Errorf("recover: waiting room of %s: %w", sale.ID, err)
		}
	}
	return nil
}

// CreateSale validates in, stores the sale and loads it into the inventory.
func (s *Service) CreateSale(ctx context.Context, in seckill.SaleInput) (SaleView, error) {
	sale, err := seckill.NewSale(in, s.clock.Now())
	if err != nil {
		return SaleView{}, err
	}
	sale.Incarnation = seckill.NewID()[:16] // a new sale, even under the id of a deleted one
	if err := s.store.CreateSale(ctx, sale); err != nil {
		return SaleView{}, unavailable(err)
	}
	if s.onDemand && !sale.HotAt(s.clock.Now()) {
		// Cold until its preheat: the engine loads it then, or at its first change, and
		// answers its reads from the store meanwhile, as this answer does: nothing is sold.
		return s.view(sale, seckill.StockState{Sellable: sale.Sellable(), Available: sale.Sellable()}), nil
	}
	// A conflict here means the engine has the sale already: on a shared engine, another call
	// found it in the database between the insert above and this line and loaded it (a
	// rebuild). The definition is the one just stored, so the sale exists as asked.
	if err := s.inv.LoadSale(ctx, sale, 0); err != nil && seckill.ErrorCode(err) != seckill.CodeConflict {
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
	for waited := time.Duration(0); seckill.ErrorCode(err) == seckill.CodeUnavailable && waited < createSettle; waited += createSettleStep {
		if !wait.Sleep(ctx, createSettleStep) {
			return SaleView{}, err
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
		switch seckill.ErrorCode(err) {
		case "":
			if listedOnly && !v.Listed { // taken off in the engine, the store not told yet
				continue
			}
			out = append(out, v)
		case seckill.CodeNotFound:
			// Created by another instance and not loaded into this one's engine yet.
		case seckill.CodeUnavailable:
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
	return s.saleIDs(ctx, func(seckill.Sale) bool { return true })
}

// LiveSaleIDs lists the hot sales (seckill.Sale.HotAt, docs/MODEL.md "Hot and cold sales"):
// from their preheat time until their last hold could have expired and a margin has passed.
// The sweeper and the Redis stream consumers work on these only, so that their work follows
// the sales that can change by themselves, not every sale ever made: a sale that is not live
// yet is loaded by the sweeper's reconcile once it is (the preheat), and one that is no longer
// live is cooled. A later change (a late payment of an old sale) is still applied by the call
// that makes it; only its stream event, which is of no use to the order store (late payments
// are recorded by the payment transaction), waits for the sale's next consumer. Every loop of
// the instance shares the list's cached definitions (salelist.go), read at most once per
// ListTTL.
func (s *Service) LiveSaleIDs(ctx context.Context) ([]string, error) {
	sales, err := s.list.definitions(ctx, s.store)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	ids := make([]string, 0, 64)
	for _, sale := range sales {
		if sale.HotAt(now) {
			ids = append(ids, sale.ID)
		}
	}
	return ids, nil
}

func (s *Service) saleIDs(ctx context.Context, keep func(seckill.Sale) bool) ([]string, error) {
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
		return errors.Join(seckill.Errorf(seckill.CodeUnavailable, "database is not reachable"), err)
	}
	return nil
}

// unavailable turns an uncoded store error (a driver or connection failure) into a coded
// `unavailable` one, so the client gets 503 with Retry-After and the gateway retries, while the
// driver's text stays in the log. Coded errors (not_found, conflict, …) pass through unchanged.
func unavailable(err error) error {
	if err == nil || seckill.ErrorCode(err) != seckill.CodeInternal {
		return err
	}
	return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable, "the database is unavailable; retry shortly"), err)
}

// maxHoldChecks bounds the engine reads of one ExpiringHolds call.
const maxHoldChecks = 64

// ExpiringHolds returns up to n of the sale's holds with the soonest expires_at, as the engine
// has them now. Candidates come from the order store (which the events reach a moment after
// the engine), soonest first, and each is read from the engine, so a hold that has ended since
// is left out and one granted a moment ago may be missing; at most maxHoldChecks are read.
func (s *Service) ExpiringHolds(ctx context.Context, saleID string, n int) ([]seckill.Reservation, error) {
	if _, _, err := s.inv.Sale(ctx, saleID); err != nil {
		return nil, err
	}
	stored, err := s.store.Reservations(ctx, saleID, seckill.StatusHeld)
	if err != nil {
		return nil, unavailable(err)
	}
	sort.Slice(stored, func(i, j int) bool { return expiry(stored[i]).Before(expiry(stored[j])) })
	holds := []seckill.Reservation{}
	for i := 0; i < len(stored) && i < maxHoldChecks && len(holds) < n; i++ {
		r, err := s.inv.Reservation(ctx, stored[i].ID)
		if err != nil {
			if seckill.ErrorCode(err) == seckill.CodeNotFound {
				continue
			}
			return nil, err
		}
		if r.Status == seckill.StatusHeld {
			holds = append(holds, r)
		}
	}
	sort.Slice(holds, func(i, j int) bool { return expiry(holds[i]).Before(expiry(holds[j])) })
	return holds, nil
}

// expiry is a hold's expires_at; the zero time for a reservation without one.
func expiry(r seckill.Reservation) time.Time {
	if r.ExpiresAt == nil {
		return time.Time{}
	}
	return *r.ExpiresAt
}
