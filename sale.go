package seckill

import (
	"time"
)

// Sale is one flash sale: a fixed stock of one product sold in a time window.
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
	CreatedAt    time.Time `json:"-"`
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
	case now.Before(s.StartsAt):
		return SaleUpcoming
	case !now.Before(s.EndsAt):
		return SaleEnded
	case st.Sold >= st.Sellable:
		return SaleSoldOut
	default:
		return SaleActive
	}
}

// Open reports whether buying is open at now: starts_at ≤ now < ends_at.
func (s Sale) Open(now time.Time) bool { return !now.Before(s.StartsAt) && now.Before(s.EndsAt) }

// WindowError is nil while the sale is open, else not_started or ended. It allocates only when
// it refuses, so the hot path can call it on every buy.
func (s Sale) WindowError(now time.Time) error {
	if now.Before(s.StartsAt) {
		return Errorf(CodeNotStarted, "sale %s starts at %s", s.ID, s.StartsAt.Format(time.RFC3339))
	}
	if !now.Before(s.EndsAt) {
		return Errorf(CodeEnded, "sale %s has ended", s.ID)
	}
	return nil
}

// MaxQuantity bounds the fields of a sale so that arithmetic never overflows.
const MaxQuantity = 1_000_000_000

// ValidID reports whether s is a valid sale or user id: 1–64 of [A-Za-z0-9_.-]. It runs several
// times on every buy, so it is a loop over the bytes rather than a regular expression
// (FuzzValidID holds it to ^[A-Za-z0-9_.-]{1,64}$).
func ValidID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// SaleInput is the body of POST /api/v1/sales. Pointers tell omitted from zero.
type SaleInput struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	PriceCents   *int64     `json:"price_cents"`
	Stock        *int       `json:"stock"`
	Holdback     int        `json:"holdback"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	PerUserLimit *int       `json:"per_user_limit"`
	HoldSeconds  *int       `json:"hold_seconds"`
	QueueLimit   *int       `json:"queue_limit"`
}

// Defaults for omitted sale fields.
const (
	DefaultPerUserLimit = 1
	DefaultHoldSeconds  = 60
	DefaultSaleLength   = time.Hour
)

// NewSale validates in and fills defaults: id (random if empty), starts_at (now), ends_at
// (starts_at + 1 h), per_user_limit 1, hold_seconds 60, queue_limit 10 × sellable.
func NewSale(in SaleInput, now time.Time) (Sale, error) {
	s := Sale{ID: in.ID, Name: in.Name, Holdback: in.Holdback, CreatedAt: now}
	if s.ID == "" {
		s.ID = NewID()[:16]
	}
	if !ValidID(s.ID) {
		return Sale{}, Errorf(CodeInvalidArgument, "id must be 1–64 of [A-Za-z0-9_.-]")
	}
	if len(s.Name) > 200 {
		return Sale{}, Errorf(CodeInvalidArgument, "name must be at most 200 bytes")
	}
	if s.Name == "" {
		s.Name = s.ID
	}
	if in.PriceCents == nil || *in.PriceCents < 0 || *in.PriceCents > 1e12 {
		return Sale{}, Errorf(CodeInvalidArgument, "price_cents is required, 0 to 10^12")
	}
	s.PriceCents = *in.PriceCents
	if in.Stock == nil || *in.Stock < 0 || *in.Stock > MaxQuantity {
		return Sale{}, Errorf(CodeInvalidArgument, "stock is required, 0 to %d", MaxQuantity)
	}
	s.Stock = *in.Stock
	if s.Holdback < 0 || s.Holdback > s.Stock {
		return Sale{}, Errorf(CodeInvalidArgument, "holdback must be between 0 and stock")
	}
	s.StartsAt = now
	if in.StartsAt != nil {
		s.StartsAt = *in.StartsAt
	}
	s.StartsAt = s.StartsAt.UTC().Truncate(time.Millisecond)
	s.EndsAt = s.StartsAt.Add(DefaultSaleLength)
	if in.EndsAt != nil {
		s.EndsAt = in.EndsAt.UTC().Truncate(time.Millisecond)
	}
	if !s.EndsAt.After(s.StartsAt) {
		return Sale{}, Errorf(CodeInvalidArgument, "ends_at must be after starts_at")
	}
	s.PerUserLimit = DefaultPerUserLimit
	if in.PerUserLimit != nil {
		s.PerUserLimit = *in.PerUserLimit
	}
	if s.PerUserLimit < 1 || s.PerUserLimit > MaxQuantity {
		return Sale{}, Errorf(CodeInvalidArgument, "per_user_limit must be at least 1")
	}
	s.HoldSeconds = DefaultHoldSeconds
	if in.HoldSeconds != nil {
		s.HoldSeconds = *in.HoldSeconds
	}
	if s.HoldSeconds < 1 || s.HoldSeconds > 7*24*3600 {
		return Sale{}, Errorf(CodeInvalidArgument, "hold_seconds must be between 1 and 604800")
	}
	s.QueueLimit = 10 * s.Sellable()
	if in.QueueLimit != nil {
		s.QueueLimit = *in.QueueLimit
	}
	if s.QueueLimit < 0 || s.QueueLimit > 10*MaxQuantity {
		return Sale{}, Errorf(CodeInvalidArgument, "queue_limit must be 0 or more")
	}
	return s, nil
}
