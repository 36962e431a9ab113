package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/admission"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/pow"
)

// The waiting room's service side (docs/API.md "The waiting room"). The engine keeps each
// room's state (seckill.WaitingRooms); the service alone knows the draw's seed, which it
// derives from the auth secret (roomSeedKey), so that every instance computes the same one and
// a restart keeps it. It computes entrant ids and draw keys, hands out admission tokens, runs
// the admitter, and tells the room the outcome of an admitted entrant's buy (releaseRoom).

// roomSeedKey derives the key of the rooms' seeds from SECKILL_AUTH_SECRET:
// HMAC-SHA256(secret, "seckill waiting room seed v1"), a label of its own so that no other
// use of the secret (JWTs, purchase and admission tokens) reveals it. A sale's seed is
// seckill.RoomSeed(key, sale).
func roomSeedKey(authSecret []byte) []byte {
	mac := hmac.New(sha256.New, authSecret)
	mac.Write([]byte("seckill waiting room seed v1"))
	return mac.Sum(nil)
}

// errNoRooms answers a room call on an engine without waiting rooms.
var errNoRooms = seckill.Errorf(seckill.CodeUnavailable, "this server's engine keeps no waiting rooms")

// roomSale is the definition of a sale with a room: not_found when the sale has none.
func (s *Service) roomSale(ctx context.Context, saleID string) (seckill.Sale, error) {
	if s.rooms == nil {
		return seckill.Sale{}, errNoRooms
	}
	sale, err := s.saleWindow(ctx, saleID)
	if err != nil {
		return seckill.Sale{}, err
	}
	if sale.Room == nil {
		return seckill.Sale{}, seckill.Errorf(seckill.CodeNotFound, "sale %q has no waiting room", saleID)
	}
	if sale.Incarnation == "" {
		// The engine's definition may not carry it (the Redis engine's): the seed is keyed by
		// the stored one, so that a sale made again under the id has a seed of its own.
		if sale.Incarnation, err = s.incarnation(ctx, sale.ID); err != nil {
			return seckill.Sale{}, unavailable(err)
		}
	}
	s.roomDefs.Store(sale.ID, sale)
	return sale, nil
}

// roomSeed is the sale's draw seed.
func (s *Service) roomSeed(sale seckill.Sale) []byte { return seckill.RoomSeed(s.seedKey, sale) }

// RoomView is what GET /api/v1/sales/{id}/waiting-room answers: the room's policy, its
// commitment (the seed from the start on), and its counts.
type RoomView struct {
	SaleID   string    `json:"sale_id"`
	Order    string    `json:"order"`
	OpensAt  time.Time `json:"opens_at"`
	StartsAt time.Time `json:"starts_at"`
	// Commitment is hex(SHA-256(seed)), published from the start of the room; Seed is the
	// seed in hex from starts_at on, null before.
	Commitment string  `json:"commitment"`
	Seed       *string `json:"seed"`
	Entrants   int64   `json:"entrants"`
	PreQueue   int64   `json:"pre_queue"`
	Admitted   int64   `json:"admitted"`
	Waiting    int64   `json:"waiting"`
	Active     int64   `json:"active"`
	// Closed is null while the room admits, else "sold_out" or "ended"; ClosedAt is when it
	// closed (the engine's clock), null while it admits.
	Closed         *string    `json:"closed"`
	ClosedAt       *time.Time `json:"closed_at"`
	AdmitPerSecond int        `json:"admit_per_second"`
	MaxActive      int        `json:"max_active"`
	TokenSeconds   int        `json:"token_seconds"`
	PowBits        int        `json:"pow_bits"`
	ServerTime     time.Time  `json:"server_time"`
}

// RoomView returns the sale's room as anyone may see it.
func (s *Service) RoomView(ctx context.Context, saleID string) (RoomView, error) {
	sale, err := s.roomSale(ctx, saleID)
	if err != nil {
		return RoomView{}, err
	}
	st, err := s.rooms.Room(ctx, saleID)
	if err != nil {
		return RoomView{}, err
	}
	now := s.clock.Now()
	s.rates.observe(saleID, st.Admitted, now)
	seed := s.roomSeed(sale)
	p := sale.Room
	v := RoomView{SaleID: sale.ID, Order: p.Order, OpensAt: sale.RoomOpensAt(), StartsAt: sale.StartsAt,
		Commitment: seckill.RoomCommitment(seed), Entrants: st.Entrants, PreQueue: st.PreQueue, Admitted: st.Admitted,
		Waiting: st.Waiting, Active: st.Active, AdmitPerSecond: p.AdmitPerSecond, MaxActive: p.MaxActive,
		TokenSeconds: p.TokenSeconds, PowBits: p.PowBits, ServerTime: now}
	if !now.Before(sale.StartsAt) {
		h := hex.EncodeToString(seed)
		v.Seed = &h
	}
	if st.Closed != "" {
		c := st.Closed
		v.Closed = &c
		if !st.ClosedAt.IsZero() {
			at := st.ClosedAt
			v.ClosedAt = &at
		}
	}
	return v, nil
}

// RoomEntrants is the room's draw entrants after the cursor after, in entrant id order, at
// most limit of them (1..MaxEntrantsPage), and the cursor of the next page ("" at the end). It
// answers only once the sale has started (not_started before): the list is complete then.
func (s *Service) RoomEntrants(ctx context.Context, saleID, after string, limit int) ([]string, string, error) {
	if limit < 1 || limit > MaxEntrantsPage {
		return nil, "", seckill.Errorf(seckill.CodeInvalidArgument, "limit must be 1 to %d", MaxEntrantsPage)
	}
	if after != "" && !seckill.ValidEntrant(after) {
		return nil, "", seckill.Errorf(seckill.CodeInvalidArgument, "after must be an entrant id (32 lower-case hex digits)")
	}
	sale, err := s.roomSale(ctx, saleID)
	if err != nil {
		return nil, "", err
	}
	if s.clock.Now().Before(sale.StartsAt) {
		return nil, "", seckill.Errorf(seckill.CodeNotStarted, "the draw's entrants are published at the start, %s", sale.StartsAt.Format(time.RFC3339))
	}
	ids, err := s.rooms.DrawEntrants(ctx, saleID, after, limit)
	if err != nil {
		return nil, "", err
	}
	next := "" // a full page has a next one, which may be empty
	if len(ids) == limit {
		next = ids[limit-1]
	}
	return ids, next, nil
}

// MaxEntrantsPage bounds a page of GET /api/v1/sales/{id}/waiting-room/entrants (and is its
// default): the engine's page.
const MaxEntrantsPage = seckill.MaxDrawEntrantsPage

// TicketView is a user's ticket as GET /api/v1/sales/{id}/waiting-room/ticket answers it.
type TicketView struct {
	SaleID  string `json:"sale_id"`
	Entrant string `json:"entrant"`
	State   string `json:"state"`
	// Index is the fixed place in the room's order (0 in the pre-queue); Position is Ahead+1
	// while waiting, else 0.
	Index    int64      `json:"index"`
	Position int64      `json:"position"`
	Ahead    int64      `json:"ahead"`
	Drawn    bool       `json:"drawn"`
	JoinedAt time.Time  `json:"joined_at"`
	Admitted *time.Time `json:"admitted_at,omitempty"`
	// WaitP50 and WaitP90 estimate the wait in seconds (Service.estimate); null when there is
	// nothing to wait for or no rate to estimate from.
	WaitP50 *float64 `json:"wait_p50_seconds"`
	WaitP90 *float64 `json:"wait_p90_seconds"`
	// AdmissionToken and AdmissionExpiresAt: while admitted and the admission lasts.
	AdmissionToken     string     `json:"admission_token,omitempty"`
	AdmissionExpiresAt *time.Time `json:"admission_expires_at,omitempty"`
	ServerTime         time.Time  `json:"server_time"`
}

// RoomProof is a join's proof of work (required when the room's pow_bits is above 0).
type RoomProof struct {
	Challenge string `json:"challenge"`
	Solution  string `json:"solution"`
}

// JoinRoom puts the user in the sale's room, once (joining again answers the same ticket).
// A room with pow_bits needs proof (checkProof) from a first join; a user who has joined
// already is answered their ticket without one.
func (s *Service) JoinRoom(ctx context.Context, saleID, userID string, proof *RoomProof) (TicketView, error) {
	sale, err := s.roomSale(ctx, saleID)
	if err != nil {
		return TicketView{}, err
	}
	entrant := seckill.EntrantID(sale.ID, userID)
	if sale.Room.PowBits > 0 {
		if t, err := s.rooms.Ticket(ctx, sale.ID, entrant); err == nil {
			return s.ticketView(ctx, sale, userID, t, nil)
		}
		if err := s.checkProof(sale, userID, proof); err != nil {
			return TicketView{}, err
		}
	}
	var key uint64
	if sale.Room.Order == seckill.RoomDraw {
		key = seckill.DrawKey(s.roomSeed(sale), entrant)
	}
	t, err := s.rooms.Join(ctx, sale, entrant, key)
	if err != nil {
		return TicketView{}, err
	}
	s.journalJoin(ctx, sale, t)
	return s.ticketView(ctx, sale, userID, t, nil)
}

// RoomTicket is the user's ticket in the sale's room: not_found before they joined.
func (s *Service) RoomTicket(ctx context.Context, saleID, userID string) (TicketView, error) {
	sale, err := s.roomSale(ctx, saleID)
	if err != nil {
		return TicketView{}, err
	}
	t, err := s.rooms.Ticket(ctx, sale.ID, seckill.EntrantID(sale.ID, userID))
	if err != nil {
		if seckill.ErrorCode(err) == seckill.CodeNotFound {
			return TicketView{}, seckill.Errorf(seckill.CodeNotFound, "you have not joined the waiting room of sale %q", saleID)
		}
		return TicketView{}, err
	}
	return s.ticketView(ctx, sale, userID, t, nil)
}

// RoomFollow is what a live stream of a ticket needs from the service: the sale (policy,
// start) and the ticket it follows; TicketAt and Due then work from the room's counts alone.
type RoomFollow struct {
	Sale   seckill.Sale
	User   string
	Ticket seckill.Ticket
	// entrants is the most entrants the room's counts have shown since Ticket was read (Saw).
	// Fewer later means the room was restored from its journal with rows lost, which
	// renumbers the places: Ticket's Index then no longer says where the entrant is, and the
	// ticket is Due until it is read again.
	entrants int64
}

// Saw records the room's counts st as seen by the follow (Due compares the next ones with them).
func (f RoomFollow) Saw(st seckill.RoomState) RoomFollow {
	f.entrants = max(f.entrants, st.Entrants)
	return f
}

// FollowTicket reads the user's ticket for a live stream.
func (s *Service) FollowTicket(ctx context.Context, saleID, userID string) (RoomFollow, TicketView, error) {
	sale, err := s.roomSale(ctx, saleID)
	if err != nil {
		return RoomFollow{}, TicketView{}, err
	}
	t, err := s.rooms.Ticket(ctx, sale.ID, seckill.EntrantID(sale.ID, userID))
	if err != nil {
		if seckill.ErrorCode(err) == seckill.CodeNotFound {
			return RoomFollow{}, TicketView{}, seckill.Errorf(seckill.CodeNotFound, "you have not joined the waiting room of sale %q", saleID)
		}
		return RoomFollow{}, TicketView{}, err
	}
	v, err := s.ticketView(ctx, sale, userID, t, nil)
	return RoomFollow{Sale: sale, User: userID, Ticket: t}, v, err
}

// Refresh re-reads a followed ticket (its turn came, the room closed, the sale started).
func (s *Service) Refresh(ctx context.Context, f RoomFollow, st seckill.RoomState) (RoomFollow, TicketView, error) {
	t, err := s.rooms.Ticket(ctx, f.Sale.ID, f.Ticket.Entrant)
	if err != nil {
		return f, TicketView{}, err
	}
	f.Ticket, f.entrants = t, st.Entrants
	v, err := s.ticketView(ctx, f.Sale, f.User, t, &st)
	return f, v, err
}

// Due reports whether a followed ticket must be read again from the engine, given the room's
// counts st: its turn has come (Index at or below the serving counter), it has no place yet
// (Index 0), a pre-queue ticket's sale has started (the draw places it) or closed after some
// admissions (it may be among them), or the room was restored with rows lost since the
// ticket was read (fewer entrants than the follow saw: its place may have moved). Otherwise
// TicketAt derives it.
//
// A closed room alone does not make a ticket due: once a room closes its serving counter never
// moves again (no admission after the close, invariant 13, and a tell after it tells nobody),
// until a restore reopens it, so a ticket placed beyond it, or a pre-queue ticket of a room
// that admitted nobody, was never admitted, and the engine would answer it the closing state.
// Reading each one instead made the close cost one engine call per live stream at the very
// moment the whole crowd must be told (docs/BENCHMARKS.md, "The waiting room at the start
// instant").
func (s *Service) Due(f RoomFollow, st seckill.RoomState) bool {
	if st.Entrants < f.entrants {
		return true
	}
	switch f.Ticket.State {
	case seckill.TicketWaiting:
		return f.Ticket.Index <= st.Admitted
	case seckill.TicketPreQueue:
		if st.Closed != "" {
			return st.Admitted > 0
		}
		return !s.clock.Now().Before(f.Sale.StartsAt)
	}
	return false
}

// TicketAt is a followed ticket that is not Due as the room's counts st place it, without an
// engine call: a waiting ticket's Index is fixed, so Ahead is Index − Admitted − 1 (entrants
// are admitted from the head, in Index order); in a closed room it has the closing state, as
// the engines answer a ticket never admitted (no place, nobody ahead).
func (s *Service) TicketAt(f RoomFollow, st seckill.RoomState) TicketView {
	t := f.Ticket
	switch {
	case st.Closed != "" && (t.State == seckill.TicketWaiting || t.State == seckill.TicketPreQueue):
		t.State, t.Index, t.Ahead = st.Closed, 0, 0
	case t.State == seckill.TicketWaiting && t.Index > 0:
		t.Ahead = max(t.Index-st.Admitted-1, 0)
	}
	v, _ := s.ticketView(context.Background(), f.Sale, f.User, t, &st)
	return v
}

// ticketView renders a ticket: its position and wait estimate, and while the admission lasts
// its token. st is the room's counts when the caller has them; a pre-queue ticket without
// them reads them for its estimate.
func (s *Service) ticketView(ctx context.Context, sale seckill.Sale, userID string, t seckill.Ticket, st *seckill.RoomState) (TicketView, error) {
	now := s.clock.Now()
	v := TicketView{SaleID: sale.ID, Entrant: t.Entrant, State: t.State, Index: t.Index, Ahead: t.Ahead, Drawn: t.Drawn,
		JoinedAt: t.JoinedAt, ServerTime: now}
	switch t.State {
	case seckill.TicketWaiting:
		v.Position = t.Ahead + 1
		v.WaitP50, v.WaitP90 = s.estimate(sale, now, float64(t.Ahead+1), 0, 0)
	case seckill.TicketPreQueue:
		if st == nil {
			if got, err := s.rooms.Room(ctx, sale.ID); err == nil {
				st = &got
			}
		}
		if st != nil && st.PreQueue > 0 {
			// The draw places the entrant uniformly among the pre-queue: its median place is
			// half of it, its 90th percentile 0.9 of it, after the time left to the start.
			n := float64(st.PreQueue)
			v.WaitP50, v.WaitP90 = s.estimate(sale, now, math.Max(1, n/2), math.Max(1, 0.9*n), sale.StartsAt.Sub(now).Seconds())
		}
	case seckill.TicketAdmitted:
		at := t.AdmittedAt
		v.Admitted = &at
		exp := at.Add(time.Duration(sale.Room.TokenSeconds) * time.Second).Truncate(time.Millisecond)
		if now.Before(exp) {
			v.AdmissionToken = admission.New(s.admitKey, sale.ID, userID, exp)
			v.AdmissionExpiresAt = &exp
		}
	}
	return v, nil
}

// estimate is the wait's p50 and p90 in seconds for an entrant with k admissions to wait for
// (k90 for the p90 when the place itself is uncertain, else 0: the same k), after lead
// seconds (the time to the start for the pre-queue). The rate r is the room's admissions per
// second observed on this instance over the last roomRateWindow (roomRates), or, without such
// an observation (before the start, a stalled room), admit_per_second; without either the
// wait is not estimated (nil). Admissions are taken as a Poisson process of rate r: the time
// to k of them has mean k/r and deviation √k/r, so p50 ≈ k/r and p90 ≈ (k + 1.28·√k)/r.
func (s *Service) estimate(sale seckill.Sale, now time.Time, k, k90, lead float64) (p50, p90 *float64) {
	r := s.rates.rate(sale.ID, now)
	if r <= 0 {
		r = float64(sale.Room.AdmitPerSecond)
	}
	if r <= 0 {
		return nil, nil
	}
	if k90 == 0 {
		k90 = k
	}
	lead = math.Max(lead, 0)
	a := round1(lead + k/r)
	b := round1(lead + (k90+1.2816*math.Sqrt(k90))/r)
	return &a, &b
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// PurchasePathAdmitted is PurchasePath for a buyer who presents an admission token (the
// header Seckill-Admission): a sale with a waiting room hands its purchase path only to the
// user its room admitted, until the admission expires (admission_required otherwise); a sale
// without one ignores the token.
func (s *Service) PurchasePathAdmitted(ctx context.Context, saleID, userID, token string) (PurchasePath, error) {
	sale, err := s.saleWindow(ctx, saleID)
	if err != nil {
		return PurchasePath{}, err
	}
	now := s.clock.Now()
	if err := sale.WindowError(now); err != nil {
		return PurchasePath{}, err
	}
	if sale.Room != nil {
		if token == "" {
			return PurchasePath{}, seckill.Errorf(seckill.CodeAdmissionRequired, "sale %q has a waiting room: join it, and send the admission token it gives you in Seckill-Admission", saleID)
		}
		if _, ok := admission.Check(s.admitKey, sale.ID, userID, token, now); !ok {
			return PurchasePath{}, seckill.Errorf(seckill.CodeAdmissionRequired, "the admission token is not valid for this user and sale, or it has expired")
		}
	}
	return PurchasePath{SaleID: sale.ID, Token: s.purchaseToken(sale, userID), ExpiresAt: sale.EndsAt}, nil
}

// releaseRoom tells the sale's room the outcome of an admitted entrant's buy (req, answered
// res or err), so that its place stops counting against max_active when it should: a hold
// counts until it expires, a queue place for hold_seconds, a refusal (sold_out,
// limit_exceeded, queue_full, ended) not at all. A replayed buy changes nothing; other errors
// (a bad request, an unavailable engine) are no outcome. A failed Release is logged and never
// fails the buy: the place then counts until its admission's token_seconds run out.
func (s *Service) releaseRoom(ctx context.Context, req seckill.BuyRequest, res seckill.BuyResult, err error) {
	now := s.clock.Now()
	var until time.Time
	switch seckill.ErrorCode(err) {
	case "":
		if res.Replayed {
			return
		}
		switch {
		case res.Reservation.Status == seckill.StatusHeld && res.Reservation.ExpiresAt != nil:
			until = *res.Reservation.ExpiresAt
		case res.Reservation.Status == seckill.StatusQueued:
			f, ferr := s.facts(ctx, req.SaleID)
			if ferr != nil {
				return
			}
			until = now.Add(f.hold)
		default:
			until = now
		}
	case seckill.CodeSoldOut, seckill.CodeLimitExceeded, seckill.CodeQueueFull, seckill.CodeEnded:
		until = now
	default:
		return
	}
	s.release(ctx, req.SaleID, req.UserID, until)
}

// releaseOutcome tells a room sale's room that reservation r has its outcome (paid,
// cancelled): its entrant's place stops counting now.
func (s *Service) releaseOutcome(ctx context.Context, r seckill.Reservation) {
	if s.rooms == nil || r.SaleID == "" || r.UserID == "" {
		return
	}
	if f, err := s.facts(ctx, r.SaleID); err != nil || !f.room {
		return
	}
	s.release(ctx, r.SaleID, r.UserID, s.clock.Now())
}

// release calls the engine's Release, logging (summarised) a failure.
func (s *Service) release(ctx context.Context, saleID, userID string, until time.Time) {
	if err := s.rooms.Release(ctx, saleID, seckill.EntrantID(saleID, userID), until); err != nil {
		s.troubles.Log(ctx, slog.LevelWarn, "room release", "waiting room: release of an admitted entrant failed; its place counts until its admission expires",
			"sale", saleID, "err", err)
	}
}

// roomRateWindow is how far back the admission rate of a room is observed for estimates.
const roomRateWindow = 10 * time.Second

// roomRates observes each room's serving counter over time, on this instance (the admitter
// and the room reads feed it), for the wait estimates.
type roomRates struct {
	mu    sync.Mutex
	rooms map[string]*rateSamples
}

// rateSamples is one room's samples, oldest first, at most one per roomSampleEvery.
type rateSamples struct {
	at       []time.Time
	admitted []int64
	seen     time.Time // last observed: rooms unseen for a window are forgotten
}

const roomSampleEvery = 250 * time.Millisecond

func newRoomRates() *roomRates { return &roomRates{rooms: map[string]*rateSamples{}} }

// observe records a room's serving counter at now.
func (r *roomRates) observe(saleID string, admitted int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.rooms[saleID]
	if rs == nil {
		rs = &rateSamples{}
		r.rooms[saleID] = rs
	}
	rs.seen = now
	if n := len(rs.at); n > 0 && now.Sub(rs.at[n-1]) < roomSampleEvery {
		rs.admitted[n-1] = max(rs.admitted[n-1], admitted)
		return
	}
	rs.at = append(rs.at, now)
	rs.admitted = append(rs.admitted, admitted)
	drop := 0
	for drop < len(rs.at)-1 && now.Sub(rs.at[drop]) > roomRateWindow {
		drop++
	}
	rs.at, rs.admitted = rs.at[drop:], rs.admitted[drop:]
}

// rate is the room's admissions per second over the window, 0 when fewer than one second of
// samples shows any.
func (r *roomRates) rate(saleID string, now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.rooms[saleID]
	if rs == nil || len(rs.at) < 2 || now.Sub(rs.seen) > roomRateWindow {
		return 0
	}
	n := len(rs.at) - 1
	span := rs.at[n].Sub(rs.at[0]).Seconds()
	if span < 1 {
		return 0
	}
	return float64(rs.admitted[n]-rs.admitted[0]) / span
}

// forget drops the rooms not observed for a window (the admitter calls it once per pass).
func (r *roomRates) forget(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, rs := range r.rooms {
		if now.Sub(rs.seen) > roomRateWindow {
			delete(r.rooms, id)
		}
	}
}

// Admitter returns the waiting rooms' admitter, a background.Service named "admitter": every
// interval until it is stopped it asks the engine to admit (seckill.WaitingRooms.Admit) in the
// room of every hot sale that has one, from its start until the room closes. Every instance
// runs one: the engine's Admit is atomic and bounded by the room's policy, so several
// admitters at once admit no more than one would, and a room keeps admitting while any
// instance is up. Its exit is immediate (Run returns nil). A failed listing or admission is
// reported (background.Report) and tried again at the next tick; a sale the engine does not
// have (not loaded yet) is not an error. Without rooms in the engine it does nothing.
func (s *Service) Admitter(interval time.Duration) background.Service {
	return &admitter{s: s, interval: interval, closed: map[string]string{}}
}

type admitter struct {
	s        *Service
	interval time.Duration
	// closed remembers the rooms found closed (by sale id and incarnation): never admitted again.
	closed map[string]string
}

func (a *admitter) Name() string { return "admitter" }

func (a *admitter) Run(ctx context.Context) error {
	if a.s.rooms == nil {
		<-ctx.Done()
		return nil
	}
	wait.Every(ctx, a.interval, a.pass)
	return nil
}

// pass admits once in every open room.
func (a *admitter) pass(ctx context.Context) {
	sales, err := a.s.list.definitions(ctx, a.s.store)
	if err != nil {
		background.Report(ctx, fmt.Errorf("list sales: %w", err))
		return
	}
	now := a.s.clock.Now()
	// The rooms are the stored definitions' (the cached list, at most ListTTL old) and those
	// this instance read from the engine since (roomDefs): a sale created on another instance
	// a moment ago is admitted from as soon as a buyer joined or looked here.
	rooms := make([]seckill.Sale, 0, 8)
	stored := map[string]bool{} // the sales whose stored definition has a room
	for _, sale := range sales {
		if sale.Room != nil {
			stored[sale.ID] = true
			rooms = append(rooms, sale)
		}
	}
	a.s.roomDefs.Range(func(k, v any) bool {
		sale := v.(seckill.Sale)
		switch {
		case !sale.HotAt(now):
			a.s.roomDefs.Delete(k)
		case !stored[sale.ID]:
			rooms = append(rooms, sale)
		}
		return true
	})
	live := map[string]bool{}
	for _, sale := range rooms {
		if now.Before(sale.StartsAt) || !sale.HotAt(now) {
			continue
		}
		live[sale.ID] = true
		if inc, ok := a.closed[sale.ID]; ok && inc == sale.Incarnation {
			continue
		}
		st, err := a.s.admit(ctx, sale, now)
		if err != nil {
			if seckill.ErrorCode(err) != seckill.CodeNotFound {
				background.Report(ctx, fmt.Errorf("admit in the room of sale %s: %w", sale.ID, err))
			}
			continue
		}
		a.s.rates.observe(sale.ID, st.Admitted, now)
		if st.Closed != "" {
			a.closed[sale.ID] = sale.Incarnation
		}
	}
	for id := range a.closed {
		if !live[id] {
			delete(a.closed, id)
		}
	}
	a.s.rates.forget(now)
}

// powMaxAge is how long a proof-of-work challenge may be solved and sent: long enough for a
// slow phone at the recommended difficulty (docs/SECURITY.md), short enough that a solved
// challenge is not a stock to spend later (it is bound to its user and sale besides).
const powMaxAge = 2 * time.Minute

// powKey derives the proof-of-work key from SECKILL_AUTH_SECRET: HMAC-SHA256(secret, "seckill
// waiting room pow v1"), so that every instance verifies the others' challenges.
func powKey(authSecret []byte) []byte {
	mac := hmac.New(sha256.New, authSecret)
	mac.Write([]byte("seckill waiting room pow v1"))
	return mac.Sum(nil)
}

// RoomChallenge is what GET /api/v1/sales/{id}/waiting-room/challenge answers.
type RoomChallenge struct {
	Challenge string    `json:"challenge"`
	Bits      int       `json:"bits"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Challenge issues the user a proof-of-work challenge for joining the sale's room; a room
// without pow_bits needs none (invalid_argument).
func (s *Service) Challenge(ctx context.Context, saleID, userID string) (RoomChallenge, error) {
	sale, err := s.roomSale(ctx, saleID)
	if err != nil {
		return RoomChallenge{}, err
	}
	if sale.Room.PowBits == 0 {
		return RoomChallenge{}, seckill.Errorf(seckill.CodeInvalidArgument, "the waiting room of sale %q needs no proof of work", saleID)
	}
	if !seckill.ValidID(userID) {
		return RoomChallenge{}, seckill.Errorf(seckill.CodeInvalidArgument, "a user id must be 1-64 of [A-Za-z0-9_.-] for a challenge")
	}
	c, err := pow.Issue(s.powKey, sale.ID, userID, sale.Room.PowBits, s.clock.Now())
	if err != nil {
		return RoomChallenge{}, err
	}
	return RoomChallenge{Challenge: c.String(), Bits: c.Bits, ExpiresAt: c.Issued.Add(powMaxAge)}, nil
}

// checkProof checks a first join's proof of work for a room with pow_bits: none is
// pow_required (403), a wrong or expired one invalid_pow (400).
func (s *Service) checkProof(sale seckill.Sale, userID string, proof *RoomProof) error {
	if proof == nil || proof.Challenge == "" {
		return seckill.Errorf(seckill.CodePowRequired, "joining this waiting room needs a proof of work: GET its challenge, solve it, and send {\"pow\":{\"challenge\",\"solution\"}}")
	}
	err := pow.Verify(s.powKey, proof.Challenge, proof.Solution, sale.ID, userID, s.clock.Now(), powMaxAge)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pow.ErrExpired):
		return seckill.Errorf(seckill.CodeInvalidPow, "the proof-of-work challenge has expired: get a new one")
	case errors.Is(err, pow.ErrInsufficientWork):
		return seckill.Errorf(seckill.CodeInvalidPow, "the solution does not do the challenge's work")
	case errors.Is(err, pow.ErrInvalid):
		return seckill.Errorf(seckill.CodeInvalidPow, "the proof of work is not a solution of a challenge issued to you for this sale: get a new one")
	}
	return err // the server's own configuration
}

// RoomState is the room's counts (for the live streams: one read per sale and tick on this
// instance, however many streams follow it).
func (s *Service) RoomState(ctx context.Context, saleID string) (seckill.RoomState, error) {
	if s.rooms == nil {
		return seckill.RoomState{}, errNoRooms
	}
	st, err := s.rooms.Room(ctx, saleID)
	if err == nil {
		s.rates.observe(saleID, st.Admitted, s.clock.Now())
	}
	return st, err
}
