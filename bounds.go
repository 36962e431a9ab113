package seckill

import (
	"time"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// The bounds of every value a client can send, defined once: the HTTP edge, every engine and
// every store check against these (docs/API.md lists them, docs/SECURITY.md says what each
// protects, and the OpenAPI document carries them). Each keeps arithmetic exact: counts are
// below 2^31 once summed, and every amount of money fits a float64 exactly (Lua scripts and
// browsers read numbers as doubles).
const (
	// MaxQuantity bounds stock, holdback, per_user_limit and a restock's result.
	MaxQuantity = 1_000_000_000
	// MaxQueueLimit bounds queue_limit (buyers): the default is 10 × sellable.
	MaxQueueLimit = 10 * MaxQuantity
	// MaxPriceCents bounds price_cents.
	MaxPriceCents = 1_000_000_000_000
	// MaxAmountCents bounds the amount of one reservation (quantity × price_cents): 2^53 − 1,
	// the largest integer every consumer of the API holds exactly. A sale is refused when
	// per_user_limit × price_cents exceeds it, so no buy it accepts can overflow.
	MaxAmountCents = 1<<53 - 1
	// MaxHoldSeconds bounds hold_seconds (a week).
	MaxHoldSeconds = 7 * 24 * 3600
	// MaxNameBytes bounds a sale's name.
	MaxNameBytes = 200
	// MaxIDBytes bounds sale and user ids.
	MaxIDBytes = 64
	// CurrencyLen is the length of a sale's currency: an ISO 4217 code, in lower case.
	CurrencyLen = 3
	// MaxSegments bounds segments, the parts a sale's stock is split into so that a Redis
	// Cluster spreads one sale over several nodes (docs/DECISIONS.md "Segmented stock"): more
	// than the nodes of any cluster this serves.
	MaxSegments = 64
	// MaxPreheatSeconds bounds preheat_seconds (a day): how long before its start a sale is
	// loaded into the engine, and so holds the engine's memory and background work.
	MaxPreheatSeconds = 24 * 3600
	// MaxListLimit bounds limit, the sales on one page of GET /api/v1/sales; DefaultListLimit
	// is the page without one.
	MaxListLimit     = 100
	DefaultListLimit = 50
	// MaxListCursor bounds cursor, the opaque position of a list page, in bytes (an id of
	// MaxIDBytes and a time fit with room to spare).
	MaxListCursor = 160
)

// MinTime and MaxTime bound every time of a sale (starts_at, ends_at, and so every hold's
// expiry): MinTime ≤ starts_at < ends_at ≤ MaxTime, checked after defaults are applied. Times
// before 1970 are negative Unix milliseconds, which the Redis engine does not keep; MaxTime
// leaves room for a week-long hold past ends_at and still renders as RFC 3339 (years 0–9999).
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ValidID reports whether s is a valid sale or user id: 1–64 of [A-Za-z0-9_.-], and not "." or
// ".." (they would name a path segment's directories, and routers clean them away). It runs
// several times on every buy, so it is a loop over the bytes rather than a regular expression
// (FuzzValidID holds it to the pattern).
func ValidID(s string) bool {
	if len(s) < 1 || len(s) > MaxIDBytes || s == "." || s == ".." {
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

// ValidName reports whether s may be a sale's name: at most MaxNameBytes of valid UTF-8 with no
// control characters (a NUL is refused by PostgreSQL, and none belongs in a product name).
func ValidName(s string) bool {
	if len(s) > MaxNameBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// ValidCurrency reports whether s may be a sale's currency: an ISO 4217 code in lower case, as
// Stripe's API writes it ("usd", "eur", "jpy"). The list of codes is golang.org/x/text's
// (currency.ParseISO: its CLDR tables, including codes withdrawn since and the funds and
// testing codes such as "xts"); a made-up code ("zzz") would be charged in nothing and is
// refused. A gateway may still refuse a code it does not take.
func ValidCurrency(s string) bool {
	if len(s) != CurrencyLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	_, err := currency.ParseISO(s)
	return err == nil
}

// validTime reports whether t is within [MinTime, MaxTime].
func validTime(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }
