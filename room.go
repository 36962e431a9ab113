package seckill

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// A sale's waiting room (docs/MODEL.md "The waiting room"): a sale may put its crowd in a room
// before the purchase path. Joining opens OpensSeconds before starts_at (the pre-queue); at
// the start the pre-queue is in the draw's order (DrawOrder, a published function of the
// seed that the commitment fixed when the room opened), and whoever joins later is behind, in
// order of arrival. The room admits from its head at most AdmitPerSecond (with a burst of
// RoomBurst) and at most MaxActive admitted entrants without an outcome; an admitted entrant
// gets an admission token for the purchase path. When the stock is gone for good (every unit
// sold, or the sale over) the room admits no one more and tells everyone still waiting.

// Room orders.
const (
	// RoomDraw: the pre-queue is put in the draw's order at the start; later arrivals FIFO.
	RoomDraw = "draw"
	// RoomFIFO: everyone in order of arrival, the pre-queue included.
	RoomFIFO = "fifo"
)

// Bounds of a room policy (bounds.go has the rest of the one definition).
const (
	// MaxAdmitPerSecond bounds admit_per_second.
	MaxAdmitPerSecond = 1_000_000
	// MinTokenSeconds and MaxTokenSeconds bound token_seconds, an admission's lifetime.
	MinTokenSeconds = 10
	MaxTokenSeconds = 3600
	// DefaultTokenSeconds is token_seconds when omitted.
	DefaultTokenSeconds = 120
	// MaxPowBits bounds pow_bits: 2^28 hashes is tens of seconds on a phone.
	MaxPowBits = 28
	// RoomAdmitBatch bounds the entrants one WaitingRooms.Admit call admits (bounded work per
	// call, as a reclaim's); the rest wait for the next call.
	RoomAdmitBatch = 1000
	// MaxDrawEntrantsPage bounds the limit of WaitingRooms.DrawEntrants (and its HTTP page).
	MaxDrawEntrantsPage = 1000
	// MaxRoomEntrants bounds the entrants of one room on every engine: a new join beyond it is
	// refused queue_full (each entrant holds a few hundred bytes of the engine's memory).
	MaxRoomEntrants = 2_000_000
)

// RoomPolicy is a sale's waiting room. A sale without one (nil) sends its crowd straight to
// the purchase path. It is set when the sale is made and never changes.
type RoomPolicy struct {
	// Order is RoomDraw (default) or RoomFIFO.
	Order string `json:"order"`
	// OpensSeconds is how long before starts_at joining opens (the pre-queue). At most the
	// sale's preheat_seconds: a room lives in the engine, which holds the sale from then.
	// Default: preheat_seconds.
	OpensSeconds int `json:"opens_seconds"`
	// AdmitPerSecond bounds the admission rate (0: no bound on rate).
	AdmitPerSecond int `json:"admit_per_second"`
	// MaxActive bounds the admitted entrants without an outcome (0: no bound). At least one
	// of AdmitPerSecond and MaxActive is set.
	MaxActive int `json:"max_active"`
	// TokenSeconds is how long an admission lasts: its token's lifetime, and the time its
	// place counts as active when the entrant buys nothing.
	TokenSeconds int `json:"token_seconds"`
	// PowBits is the proof of work a join costs (0: none): the leading zero bits a
	// hashcash-style solution must have.
	PowBits int `json:"pow_bits"`
}

// RoomBurst is how many entrants a room may admit at once beyond its rate: a tenth of a
// second's worth, at least 1. In any interval of w seconds a room admits at most
// AdmitPerSecond·w + RoomBurst entrants (docs/MODEL.md, invariant of the waiting room).
func (p RoomPolicy) RoomBurst() int { return max(1, (p.AdmitPerSecond+9)/10) }

// RoomOpensAt is when the sale's room opens for joining (starts_at without a room).
func (s Sale) RoomOpensAt() time.Time {
	if s.Room == nil {
		return s.StartsAt
	}
	return s.StartsAt.Add(-time.Duration(max(s.Room.OpensSeconds, 0)) * time.Second)
}

// withDefaults fills a policy's omitted values for sale s.
func (p RoomPolicy) withDefaults(s Sale, opensGiven, tokenGiven bool) RoomPolicy {
	if p.Order == "" {
		p.Order = RoomDraw
	}
	if !opensGiven {
		p.OpensSeconds = s.PreheatSeconds
	}
	if !tokenGiven {
		p.TokenSeconds = DefaultTokenSeconds
	}
	return p
}

// RoomInput is the waiting_room object of POST /api/v1/sales. Pointers tell omitted from zero.
type RoomInput struct {
	Order          string `json:"order"`
	OpensSeconds   *int   `json:"opens_seconds"`
	AdmitPerSecond int    `json:"admit_per_second"`
	MaxActive      int    `json:"max_active"`
	TokenSeconds   *int   `json:"token_seconds"`
	PowBits        int    `json:"pow_bits"`

	// emptyOrder: the JSON gave "order": "", which is refused as any order that is neither
	// draw nor fifo (the OpenAPI document's enum), where an omitted order is draw.
	emptyOrder bool
}

// UnmarshalJSON reads a waiting_room object as encoding/json would, unknown fields refused
// (the API's bodies refuse them), telling an order given as "" from one omitted.
func (in *RoomInput) UnmarshalJSON(b []byte) error {
	type plain RoomInput
	var w struct {
		plain
		Order *string `json:"order"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*in = RoomInput(w.plain)
	if w.Order != nil {
		in.Order, in.emptyOrder = *w.Order, *w.Order == ""
	}
	return nil
}

// policy is the RoomPolicy in asks for sale s, defaults filled (validated by Sale.Validate).
func (in RoomInput) policy(s Sale) RoomPolicy {
	p := RoomPolicy{Order: in.Order, AdmitPerSecond: in.AdmitPerSecond, MaxActive: in.MaxActive, PowBits: in.PowBits}
	if in.OpensSeconds != nil {
		p.OpensSeconds = *in.OpensSeconds
	}
	if in.TokenSeconds != nil {
		p.TokenSeconds = *in.TokenSeconds
	}
	p = p.withDefaults(s, in.OpensSeconds != nil, in.TokenSeconds != nil)
	if in.emptyOrder {
		p.Order = "" // refused by validate
	}
	return p
}

// validate checks p against the bounds, for sale s.
func (p RoomPolicy) validate(s Sale) error {
	bad := func(format string, args ...any) error { return Errorf(CodeInvalidArgument, format, args...) }
	switch {
	case p.Order != RoomDraw && p.Order != RoomFIFO:
		return bad("waiting_room.order must be %q or %q", RoomDraw, RoomFIFO)
	case p.OpensSeconds < 0 || p.OpensSeconds > s.PreheatSeconds:
		return bad("waiting_room.opens_seconds must be 0 to preheat_seconds (%d): the room lives in the engine, which holds the sale from preheat_seconds before its start", s.PreheatSeconds)
	case p.AdmitPerSecond < 0 || p.AdmitPerSecond > MaxAdmitPerSecond:
		return bad("waiting_room.admit_per_second must be 0 to %d", MaxAdmitPerSecond)
	case p.MaxActive < 0 || p.MaxActive > MaxQuantity:
		return bad("waiting_room.max_active must be 0 to %d", MaxQuantity)
	case p.AdmitPerSecond == 0 && p.MaxActive == 0:
		return bad("waiting_room needs admit_per_second or max_active (or both) above 0")
	case p.TokenSeconds < MinTokenSeconds || p.TokenSeconds > MaxTokenSeconds:
		return bad("waiting_room.token_seconds must be %d to %d", MinTokenSeconds, MaxTokenSeconds)
	case p.PowBits < 0 || p.PowBits > MaxPowBits:
		return bad("waiting_room.pow_bits must be 0 to %d", MaxPowBits)
	case s.SegmentCount() > 1:
		return bad("a sale with a waiting_room has 1 segment: the room bounds the rate at which buyers reach it, which is what segments are for")
	}
	return nil
}

// The draw (docs/API.md "Verifying the draw"). Everything here is what a buyer recomputes.

// EntrantID is the name the room gives a user of a sale: hex of the first 16 bytes of
// SHA-256("seckill-room" 0 sale 0 user). The published entrant list carries these, not user
// ids; a buyer finds themself in it by computing their own.
func EntrantID(saleID, userID string) string {
	h := sha256.New()
	h.Write([]byte("seckill-room\x00" + saleID + "\x00" + userID))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// RoomSeed is the sale's draw seed: HMAC-SHA256(secret, "seckill-room-seed" 0 sale 0
// incarnation). It is derived rather than stored, so every instance has the same one and a
// restart keeps it; it is secret until the start, when the room publishes it.
func RoomSeed(secret []byte, s Sale) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("seckill-room-seed\x00" + s.ID + "\x00" + s.Incarnation))
	return m.Sum(nil)
}

// RoomCommitment is hex(SHA-256(seed)): published from the moment the room opens, so that the
// seed revealed at the start can be checked against it.
func RoomCommitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// DrawKey is an entrant's place in the draw: the first 6 bytes of HMAC-SHA256(seed, entrant
// id) as a big-endian integer (below 2^48, so that a Redis sorted set's double score holds it
// exactly). The draw's order is by DrawKey, then by entrant id (DrawOrder).
func DrawKey(seed []byte, entrant string) uint64 {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(entrant))
	var b [8]byte
	copy(b[2:], m.Sum(nil)[:6])
	return binary.BigEndian.Uint64(b[:])
}

// DrawOrder returns the pre-queue's entrants in the draw's order: by DrawKey, ties by entrant
// id (byte order).
func DrawOrder(seed []byte, entrants []string) []string {
	type keyed struct {
		key uint64
		id  string
	}
	ks := make([]keyed, len(entrants))
	for i, e := range entrants {
		ks[i] = keyed{DrawKey(seed, e), e}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.id
	}
	return out
}

// Ticket states.
const (
	TicketPreQueue = "pre_queue" // joined before the start: the draw places it at the start
	TicketWaiting  = "waiting"   // in the queue, Ahead others before it
	TicketAdmitted = "admitted"  // admitted at AdmittedAt (once: an entrant is admitted at most once)
	TicketSoldOut  = "sold_out"  // never admitted, and every unit is sold
	TicketEnded    = "ended"     // never admitted, and the sale is over
)

// Ticket is one entrant's place in a sale's room.
type Ticket struct {
	Entrant string
	State   string
	// Index is the entrant's 1-based place in the room's order (the draw's, then arrival's),
	// fixed once the sale has started; 0 in the pre-queue, whose order the start draws.
	Index int64
	// Ahead is how many entrants still wait before this one (0 unless waiting).
	Ahead int64
	// Drawn is whether the entrant joined before the start (its place is the draw's).
	Drawn bool
	// Arrival is the entrant's arrival number in the room: 1 for its first entrant, then one
	// more for each (what orders those placed at arrival when the room is restored).
	Arrival    int64
	JoinedAt   time.Time
	AdmittedAt time.Time // zero unless admitted
	// ActiveUntil is when the admitted entrant's place stops counting against max_active
	// (zero unless admitted; at or before now once it has an outcome).
	ActiveUntil time.Time
}

// RoomState is a room's counts.
type RoomState struct {
	Entrants int64 // joined so far
	PreQueue int64 // joined before the start: the draw's entrants
	Admitted int64 // admitted so far: the serving counter
	Waiting  int64 // joined, not yet admitted (0 once sold out or ended: they were told)
	Active   int64 // admitted, place still counting against max_active
	// Closed is "" while the room admits, else TicketSoldOut or TicketEnded.
	Closed string
	// ClosedAt is when the room closed, on the engine's clock (zero while it admits; the time
	// of the Admit that closed it again after a restore).
	ClosedAt time.Time
}

// WaitingRooms keeps sales' waiting rooms (docs/MODEL.md "The waiting room"): every engine
// has it, and the rooms suite (seckilltest.TestWaitingRooms) holds each to one behaviour.
// Every method is atomic per sale, with the engine's own clock (a room's times and the sale's
// are one clock). A room exists once its first entrant joined; its sale must be loaded.
type WaitingRooms interface {
	// Join puts the entrant in sale's room, once: joining again answers the same ticket.
	// Before starts_at the entrant joins the pre-queue at drawKey (DrawKey, computed by the
	// caller, who alone knows the seed; ignored for RoomFIFO); from starts_at, behind everyone.
	// Errors: not_found (sale), invalid_argument (no room, or an entrant id that is not 32 hex
	// digits), not_started (before the room opens), ended (the sale is over: a sold-out
	// room still answers a ticket, TicketSoldOut, so that its entrant learns why).
	Join(ctx context.Context, sale Sale, entrant string, drawKey uint64) (Ticket, error)
	// Ticket reads an entrant's ticket: not_found when it never joined.
	Ticket(ctx context.Context, saleID, entrant string) (Ticket, error)
	// Admit admits from the head as many as sale's policy allows now (none before starts_at),
	// closes the room when the stock is gone for good, and returns its counts after.
	Admit(ctx context.Context, sale Sale) (RoomState, error)
	// Release sets when an admitted entrant's place stops counting against max_active: until
	// (a hold's expiry when it bought a hold), or now when until is not after now (an outcome:
	// paid, cancelled, refused). It never revives a place that has ended, and ignores an
	// entrant that was not admitted.
	Release(ctx context.Context, saleID, entrant string, until time.Time) error
	// Room returns the room's counts (zero counts when nobody joined yet).
	Room(ctx context.Context, saleID string) (RoomState, error)
	// DrawEntrants lists the entrants who joined before the start (the draw's), in entrant id
	// order, at most limit of them after the id after ("" for the first page): the list a
	// buyer recomputes the draw from. It is complete once the sale has started.
	DrawEntrants(ctx context.Context, saleID, after string, limit int) ([]string, error)
}

// ValidEntrant reports whether s has the form of an EntrantID: 32 lower-case hex digits.
func ValidEntrant(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Recovering a room (docs/MODEL.md "The waiting room", docs/DECISIONS.md "Rooms recover from
// the database"). A room's state lives in the engine; what rebuilds it after the engine lost it
// (a restart of the memory engine, a FLUSHALL of Redis) is journaled in the order store
// (RoomJournal) by the service: every entrant as it joined, and the room's count of admissions.
// Admission is strictly from the head of an order that those facts and the seed determine, so
// the first Admitted of the recomputed order are the admitted ones.

// RoomEntrant is one entrant as the room journal keeps it: enough to put it back in its place.
type RoomEntrant struct {
	SaleID      string
	Incarnation string // the sale's (Sale.Incarnation): a sale made again under the id starts empty
	Entrant     string
	// Arrival is the entrant's arrival number (Ticket.Arrival): the order of those placed at
	// their arrival (after the start, or in a FIFO room).
	Arrival int64
	// Drawn: joined a draw room before the start; its place is the draw's (DrawKey).
	Drawn    bool
	JoinedAt time.Time
}

// RoomAdmissions is a room's journaled count of admissions: Count entrants were admitted by
// At (the time the count was last raised).
type RoomAdmissions struct {
	Count int64
	At    time.Time
}

// MaxRoomJournalBatch bounds the entrants of one RoomJournal.AddRoomEntrants call.
const MaxRoomJournalBatch = 1000

// RoomJournal is the order store's optional journal of the waiting rooms (sqlstore has it):
// what RoomRestorer.RestoreRoom rebuilds a lost room from.
type RoomJournal interface {
	// AddRoomEntrants stores entrants (at most MaxRoomJournalBatch, of any sales): an entrant
	// stored before (same sale, incarnation and entrant) is left as it is.
	AddRoomEntrants(ctx context.Context, entrants []RoomEntrant) error
	// RoomEntrants returns the entrants of the sale's incarnation, by arrival.
	RoomEntrants(ctx context.Context, saleID, incarnation string) ([]RoomEntrant, error)
	// SetRoomAdmitted raises the room's count of admissions to n, at: never lowers it (several
	// admitters report it, in any order).
	SetRoomAdmitted(ctx context.Context, saleID, incarnation string, n int64, at time.Time) error
	// RoomAdmitted returns the room's count (zero when none was set).
	RoomAdmitted(ctx context.Context, saleID, incarnation string) (RoomAdmissions, error)
}

// RestoredEntrant is a journaled entrant with its draw key (DrawKey from the seed, which only
// the service knows; ignored unless Drawn).
type RestoredEntrant struct {
	RoomEntrant
	DrawKey uint64
}

// RoomRestorer is the engines' restore of a room from its journal (both engines have it).
type RoomRestorer interface {
	// RestoreRoom replaces the sale's room (which must be loaded) with the one entrants (in
	// any order) and admitted make: the drawn ones in the draw's order (from the start), the
	// others after them by arrival, the first admitted.Count of that order admitted at
	// admitted.At, their places active until At + token_seconds (the journal keeps no
	// releases: conservative for max_active), the admission bucket empty at the restore
	// (conservative for the rate). Arrivals after it are numbered after the largest restored.
	// It closes nothing: the next Admit does, from the sale's stock and window.
	RestoreRoom(ctx context.Context, sale Sale, entrants []RestoredEntrant, admitted RoomAdmissions) error
}

// Telling an admission (docs/MODEL.md invariant 14, docs/DECISIONS.md "An admission is told
// once it is journaled"). The journal must hold every admission anyone was told of, or a room
// restored after a loss would admit that entrant again. So an admitter with a journal admits
// without telling (AdmitUntold), writes the admitted entrants and the count to the journal, and
// then tells them (TellAdmitted): an entrant's ticket reads admitted, with its admission token,
// only from then on; before, it reads waiting, first in line.

// UntoldAdmissions are a room's admitted entrants nobody has been told of yet, in the order of
// their admission: Entrants[i] is the room's admission First+i (its Ticket.Index).
type UntoldAdmissions struct {
	First int64
	// Entrants carry the journal's facts (SaleID, Entrant, Arrival, Drawn, JoinedAt); the
	// engine does not know the incarnation, which the caller sets.
	Entrants []RoomEntrant
}

// Last is the index of the last untold admission (First−1 when there is none).
func (u UntoldAdmissions) Last() int64 { return u.First + int64(len(u.Entrants)) - 1 }

// RoomTeller is the engines' admission that waits for the journal (both engines have it).
// Admit is AdmitUntold followed by TellAdmitted of everything admitted.
type RoomTeller interface {
	// AdmitUntold admits as Admit does but tells no one: the entrants it admits read waiting
	// (Ahead 0 for the first) until TellAdmitted covers them, and the room's counts count them
	// as waiting, not admitted. It admits no more while RoomAdmitBatch admitted entrants are
	// untold, and answers every untold admission, this call's and earlier calls' (at most
	// RoomAdmitBatch). A closed room answers none: its untold entrants read the closing state.
	AdmitUntold(ctx context.Context, sale Sale) (RoomState, UntoldAdmissions, error)
	// TellAdmitted tells the room's admissions up to index n (at most those admitted): it
	// raises the told count, never lowers it.
	TellAdmitted(ctx context.Context, saleID string, n int64) error
}
