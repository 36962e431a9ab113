package seckill

import (
	"time"
)

// Sale is one flash sale: a fixed stock of one product sold in a time window.
// MaxIncarnationBytes bounds Sale.Incarnation.
const MaxIncarnationBytes = 32

type Sale struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	PriceCents   int64     `json:"price_cents"`
	Stock        int       `json:"stock"`
	Holdback     int       `json:"holdback"` // units the operator keeps back on purpose
	StartsAt     time.Time `json:"starts_at"`
	EndsAt       time.Time `json:"ends_at"`
	PerUserLimit int       `json:"per_user_limit"`
	HoldSeconds  int       `json:"hold_seconds"`
	QueueLimit   int       `json:"queue_limit"` // buyers; 0 means no queue
	// Currency is the ISO 4217 code of price_cents' currency, in lower case as on the wire
	// ("usd"): the storefront formats prices with it. It never changes once the sale exists.
	Currency string `json:"currency"`
	// Listed is whether the storefront's list (GET /api/v1/sales) shows the sale. An unlisted
	// sale (one made by `seckill bench`, a test, or one an admin hid) is still reachable by id.
	Listed bool `json:"listed"`
	// Segments is how many parts the engine splits the stock into, each on its own Redis hash
	// tag so that a Cluster spreads one hot sale over several nodes (docs/DECISIONS.md
	// "Segmented stock"); 1 is an unsplit sale. 0, in a sale built in code or read back from a
	// database (which does not keep it), means 1. The memory engine refuses more than 1.
	Segments int `json:"segments"`
	// PreheatSeconds is how long before starts_at the sale becomes hot (HotAt): an engine
	// that loads sales on demand (the Redis engine) loads it then, so that the start's crowd
	// finds it loaded. 0 (a sale built in code, or stored before the setting existed and
	// read back as 0) means hot from starts_at.
	PreheatSeconds int `json:"preheat_seconds"`
	// Room is the sale's waiting room (room.go), nil for none. Set at creation, never changed.
	Room      *RoomPolicy `json:"waiting_room,omitempty"`
	CreatedAt time.Time   `json:"-"`
	// Incarnation tells apart the sales made one after another under one id (one deleted, then
	// another created with its id): service.Service.CreateSale gives each a new random one,
	// the order store keeps it, and the Redis engine writes it into the sale's keys, so that the
	// new sale's state, whose versions start again at 1, is not taken for an older state of the
	// deleted one (docs/MODEL.md "The state's version"). "" is the incarnation of a sale made
	// in code or stored before incarnations existed.
	Incarnation string `json:"-"`
}

// SaleStatus is derived from the clock and the stock state, never stored.
type SaleStatus string

// Sale statuses.
const (
	SaleUpcoming SaleStatus = "upcoming"
	SaleActive   SaleStatus = "active"
	SaleSoldOut  SaleStatus = "sold_out"
	SaleEnded    SaleStatus = "ended"
)

// StockState is the live count of a sale's units. Invariant: Available+Held+Sold == Sellable.
type StockState struct {
	Sellable  int `json:"sellable"`
	Available int `json:"available"`
	Held      int `json:"held"`
	Sold      int `json:"sold"`
	Queued    int `json:"queued"` // units wanted by queued buyers
}

// Sellable is stock minus holdback.
func (s Sale) Sellable() int { return s.Stock - s.Holdback }

// HoldDuration is how long a hold lasts before it expires.
func (s Sale) HoldDuration() time.Duration { return time.Duration(s.HoldSeconds) * time.Second }

// Status derives the sale's status at now from its window and stock state.
func (s Sale) Status(now time.Time, st StockState) SaleStatus {
	switch {
	case !now.Before(s.EndsAt): // first: a sale closed before its start is ended, not upcoming
		return SaleEnded
	case now.Before(s.StartsAt):
		return SaleUpcoming
	case st.Sold >= st.Sellable:
		return SaleSoldOut
	default:
		return SaleActive
	}
}

// Open reports whether buying is open at now: starts_at ≤ now < ends_at.
func (s Sale) Open(now time.Time) bool { return !now.Before(s.StartsAt) && now.Before(s.EndsAt) }

// WindowError is nil while the sale is open, else ended or not_started, in that order: a sale
// closed before its start has ended (its ends_at is before its starts_at). It allocates only
// when it refuses, so the hot path can call it on every buy.
func (s Sale) WindowError(now time.Time) error {
	if !now.Before(s.EndsAt) {
		return Errorf(CodeEnded, "sale %s has ended", s.ID)
	}
	if now.Before(s.StartsAt) {
		return Errorf(CodeNotStarted, "sale %s starts at %s", s.ID, s.StartsAt.Format(time.RFC3339))
	}
	return nil
}

// SaleInput is the body of POST /api/v1/sales. Pointers tell omitted from zero.
type SaleInput struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	PriceCents     *int64     `json:"price_cents"`
	Stock          *int       `json:"stock"`
	Holdback       int        `json:"holdback"`
	StartsAt       *time.Time `json:"starts_at"`
	EndsAt         *time.Time `json:"ends_at"`
	PerUserLimit   *int       `json:"per_user_limit"`
	HoldSeconds    *int       `json:"hold_seconds"`
	QueueLimit     *int       `json:"queue_limit"`
	Currency       *string    `json:"currency"`
	Listed         *bool      `json:"listed"`
	Segments       *int       `json:"segments"`
	PreheatSeconds *int       `json:"preheat_seconds"`
	WaitingRoom    *RoomInput `json:"waiting_room"`
	// IDGiven says the client sent id, even empty: NewSale then validates it as given (an
	// empty one is refused) rather than choosing a random id, which is for an omitted id.
	IDGiven bool `json:"-"`
}

// Defaults for omitted sale fields.
const (
	DefaultPerUserLimit = 1
	DefaultHoldSeconds  = 60
	DefaultSaleLength   = time.Hour
	DefaultCurrency     = "usd"
	DefaultSegments     = 1
	// DefaultPreheatSeconds is how long before its start a sale becomes hot (PreheatSeconds).
	DefaultPreheatSeconds = 300
)

// NewSale validates in and fills defaults: id (random if empty and not given), starts_at (now), ends_at
// (starts_at + 1 h), per_user_limit 1, hold_seconds 60, queue_limit 10 × sellable, currency
// "usd", listed true, segments 1, preheat_seconds 300. Every bound
// (bounds.go) is checked after the defaults are applied, so a default can never carry a value
// out of range; a sale it returns is one every engine and store accepts.
func NewSale(in SaleInput, now time.Time) (Sale, error) {
	s := Sale{ID: in.ID, Name: in.Name, Holdback: in.Holdback, CreatedAt: now}
	if s.ID == "" && !in.IDGiven {
		s.ID = NewID()[:16]
	}
	if s.Name == "" {
		s.Name = s.ID
	}
	if in.PriceCents == nil || in.Stock == nil {
		return Sale{}, Errorf(CodeInvalidArgument, "price_cents and stock are required")
	}
	s.PriceCents, s.Stock = *in.PriceCents, *in.Stock
	s.StartsAt = now
	if in.StartsAt != nil {
		s.StartsAt = *in.StartsAt
	}
	s.StartsAt = s.StartsAt.UTC().Truncate(time.Millisecond)
	s.EndsAt = s.StartsAt.Add(DefaultSaleLength)
	if in.EndsAt != nil {
		s.EndsAt = in.EndsAt.UTC().Truncate(time.Millisecond)
	}
	s.PerUserLimit = DefaultPerUserLimit
	if in.PerUserLimit != nil {
		s.PerUserLimit = *in.PerUserLimit
	}
	s.HoldSeconds = DefaultHoldSeconds
	if in.HoldSeconds != nil {
		s.HoldSeconds = *in.HoldSeconds
	}
	s.QueueLimit = 10 * s.Sellable()
	if in.QueueLimit != nil {
		s.QueueLimit = *in.QueueLimit
	}
	s.Currency = DefaultCurrency
	if in.Currency != nil {
		if !ValidCurrency(*in.Currency) {
			return Sale{}, errCurrency()
		}
		s.Currency = *in.Currency
	}
	s.Listed = in.Listed == nil || *in.Listed
	s.Segments = DefaultSegments
	if in.Segments != nil {
		if *in.Segments < 1 {
			return Sale{}, errSegments()
		}
		s.Segments = *in.Segments
	}
	s.PreheatSeconds = DefaultPreheatSeconds
	if in.PreheatSeconds != nil {
		s.PreheatSeconds = *in.PreheatSeconds
	}
	if in.WaitingRoom != nil {
		p := in.WaitingRoom.policy(s)
		s.Room = &p
	}
	if err := s.Validate(); err != nil {
		return Sale{}, err
	}
	return s, nil
}

// Validate checks every field of a new sale against the bounds (bounds.go): the one definition,
// which NewSale runs before anything is written. (A sale closed before its start later has
// ends_at before starts_at: that is a closed sale, not a new one.)
func (s Sale) Validate() error {
	bad := func(format string, args ...any) error { return Errorf(CodeInvalidArgument, format, args...) }
	switch {
	case !ValidID(s.ID):
		return bad("id must be 1–%d of [A-Za-z0-9_.-], not . or ..", MaxIDBytes)
	case !ValidName(s.Name):
		return bad("name must be at most %d bytes of UTF-8 without control characters", MaxNameBytes)
	case s.PriceCents < 0 || s.PriceCents > MaxPriceCents:
		return bad("price_cents must be 0 to %d", int64(MaxPriceCents))
	case s.Stock < 0 || s.Stock > MaxQuantity:
		return bad("stock must be 0 to %d", MaxQuantity)
	case s.Holdback < 0 || s.Holdback > s.Stock:
		return bad("holdback must be between 0 and stock")
	case !validTime(s.StartsAt) || !validTime(s.EndsAt):
		return bad("starts_at and ends_at (default: starts_at + 1 h) must be between %s and %s",
			MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !s.EndsAt.After(s.StartsAt):
		return bad("ends_at must be after starts_at")
	case s.PerUserLimit < 1 || s.PerUserLimit > MaxQuantity:
		return bad("per_user_limit must be 1 to %d", MaxQuantity)
	case int64(s.PerUserLimit) > MaxAmountCents/max(s.PriceCents, 1):
		return bad("per_user_limit × price_cents must be at most %d cents (the largest amount of one reservation)", int64(MaxAmountCents))
	case s.HoldSeconds < 1 || s.HoldSeconds > MaxHoldSeconds:
		return bad("hold_seconds must be between 1 and %d", MaxHoldSeconds)
	case s.QueueLimit < 0 || s.QueueLimit > MaxQueueLimit:
		return bad("queue_limit must be 0 to %d", int64(MaxQueueLimit))
	case s.Currency != "" && !ValidCurrency(s.Currency):
		return errCurrency()
	case s.Segments < 0 || s.Segments > MaxSegments:
		return errSegments()
	case s.PreheatSeconds < 0 || s.PreheatSeconds > MaxPreheatSeconds:
		return bad("preheat_seconds must be 0 to %d", MaxPreheatSeconds)
	case len(s.Incarnation) > MaxIncarnationBytes || !ValidID(s.Incarnation) && s.Incarnation != "":
		return bad("incarnation must be at most %d of [A-Za-z0-9_.-]", MaxIncarnationBytes)
	case s.Room != nil:
		return s.Room.validate(s)
	}
	return nil
}

// errCurrency refuses a currency. Validate lets an empty one through, for sales built in code
// without one (every engine and store keeps it as given); a client's sale always has one, since
// NewSale fills the default and refuses an empty value sent on purpose.
func errCurrency() error {
	return Errorf(CodeInvalidArgument, "currency must be an ISO 4217 code in %d lower-case letters, such as %q", CurrencyLen, DefaultCurrency)
}

// errSegments refuses a number of segments. Validate lets 0 through (it means 1: a sale built
// in code, or read back from a database, which does not keep segments); a client's sale always
// has at least 1, since NewSale fills the default and refuses a 0 sent on purpose.
func errSegments() error {
	return Errorf(CodeInvalidArgument, "segments must be 1 to %d", MaxSegments)
}

// SegmentCount is the number of segments the sale's stock is split into: Segments, with 0 read
// as 1.
func (s Sale) SegmentCount() int { return max(s.Segments, 1) }
