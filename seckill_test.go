package seckill_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func TestNewSaleDefaultsAndValidation(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	ptr := func(v int) *int { return &v }
	price := int64(100)
	s, err := seckill.NewSale(seckill.SaleInput{PriceCents: &price, Stock: ptr(100), Holdback: 20}, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sellable() != 80 || s.QueueLimit != 800 || s.PerUserLimit != 1 || s.HoldSeconds != 60 || s.Segments != 1 {
		t.Fatalf("defaults: %+v", s)
	}
	if !s.StartsAt.Equal(now.Truncate(time.Millisecond)) || s.EndsAt.Sub(s.StartsAt) != time.Hour || !seckill.ValidID(s.ID) {
		t.Fatalf("window/id defaults: %+v", s)
	}
	zero := 0
	if s, err := seckill.NewSale(seckill.SaleInput{PriceCents: &price, Stock: ptr(5), QueueLimit: &zero}, now); err != nil || s.QueueLimit != 0 {
		t.Fatalf("queue_limit 0 must mean no queue: %+v %v", s, err)
	}
	bad := []seckill.SaleInput{
		{Stock: ptr(1)},                                  // no price
		{PriceCents: &price},                             // no stock
		{PriceCents: &price, Stock: ptr(-1)},             // negative stock
		{PriceCents: &price, Stock: ptr(1), Holdback: 2}, // holdback > stock
		{PriceCents: &price, Stock: ptr(1), HoldSeconds: ptr(0)},
		{PriceCents: &price, Stock: ptr(1), PerUserLimit: ptr(0)},
		{PriceCents: &price, Stock: ptr(1), QueueLimit: ptr(-1)},
		{PriceCents: &price, Stock: ptr(1), ID: "has space"},
		{PriceCents: &price, Stock: ptr(1), StartsAt: &now, EndsAt: &now},
		// Times are bounded after defaults: a far-future start whose default end (+1 h) lands in
		// year 10000 would be stored and then break every list that renders it.
		{PriceCents: &price, Stock: ptr(1), StartsAt: tp(time.Date(9999, 12, 31, 23, 30, 0, 0, time.UTC))},
		{PriceCents: &price, Stock: ptr(1), StartsAt: tp(seckill.MaxTime.Add(-time.Minute))},
		{PriceCents: &price, Stock: ptr(1), StartsAt: tp(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC))},
		{PriceCents: &price, Stock: ptr(1), StartsAt: tp(seckill.MinTime.Add(-time.Millisecond))},
		{PriceCents: &price, Stock: ptr(1), ID: "."},
		{PriceCents: &price, Stock: ptr(1), ID: ".."},
		{PriceCents: &price, Stock: ptr(1), Name: "a\x00b"},
		{PriceCents: &price, Stock: ptr(1), Name: "tab\there"},
		{PriceCents: &price, Stock: ptr(1), Name: "\xff\xfe"},
		{PriceCents: &price, Stock: ptr(1), Name: strings.Repeat("a", seckill.MaxNameBytes+1)},
		{PriceCents: i64p(seckill.MaxPriceCents + 1), Stock: ptr(1)},
		{PriceCents: &price, Stock: ptr(seckill.MaxQuantity + 1)},
		{PriceCents: &price, Stock: ptr(1), HoldSeconds: ptr(seckill.MaxHoldSeconds + 1)},
		{PriceCents: &price, Stock: ptr(1), QueueLimit: ptr(seckill.MaxQueueLimit + 1)},
		{PriceCents: &price, Stock: ptr(1), Segments: ptr(0)},
		{PriceCents: &price, Stock: ptr(1), Segments: ptr(-1)},
		{PriceCents: &price, Stock: ptr(1), Segments: ptr(seckill.MaxSegments + 1)},
		// Money: per_user_limit × price_cents must fit MaxAmountCents, so that no accepted buy
		// can overflow (10^12 × 10^9 wrapped on the memory engine).
		{PriceCents: i64p(seckill.MaxPriceCents), Stock: ptr(1), PerUserLimit: ptr(seckill.MaxQuantity)},
		{PriceCents: i64p(seckill.MaxPriceCents), Stock: ptr(1), PerUserLimit: ptr(seckill.MaxAmountCents/seckill.MaxPriceCents + 1)},
	}
	for i, in := range bad {
		if _, err := seckill.NewSale(in, now); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Errorf("case %d: got %v, want invalid_argument", i, err)
		}
	}
}

func tp(t time.Time) *time.Time { return &t }
func i64p(v int64) *int64       { return &v }

// TestNewSaleBoundsAreInclusive: the documented bounds themselves are accepted.
func TestNewSaleBoundsAreInclusive(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	stock, limit, hold, ql := seckill.MaxQuantity, int(seckill.MaxAmountCents/seckill.MaxPriceCents), seckill.MaxHoldSeconds, seckill.MaxQueueLimit
	maxSegs, oneSeg := seckill.MaxSegments, 1
	for i, in := range []seckill.SaleInput{
		{PriceCents: i64p(seckill.MaxPriceCents), Stock: &stock, PerUserLimit: &limit, HoldSeconds: &hold, QueueLimit: &ql,
			Name: strings.Repeat("é", seckill.MaxNameBytes/2), ID: strings.Repeat("z", seckill.MaxIDBytes)},
		{PriceCents: i64p(0), Stock: &stock, PerUserLimit: &stock}, // free: any limit fits
		{PriceCents: i64p(1), Stock: &stock, StartsAt: tp(seckill.MinTime), EndsAt: tp(seckill.MaxTime)},
		{PriceCents: i64p(1), Stock: &stock, StartsAt: tp(seckill.MaxTime.Add(-time.Hour)), ID: "..."},
		{PriceCents: i64p(1), Stock: &stock, Segments: &maxSegs},
		{PriceCents: i64p(1), Stock: &stock, Segments: &oneSeg},
	} {
		if _, err := seckill.NewSale(in, now); err != nil {
			t.Errorf("case %d: %v; want accepted", i, err)
		}
	}
}

func TestSaleStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := seckill.Sale{StartsAt: t0, EndsAt: t0.Add(time.Hour)}
	st := seckill.StockState{Sellable: 2, Sold: 1}
	for _, c := range []struct {
		at   time.Time
		st   seckill.StockState
		want seckill.SaleStatus
	}{
		{t0.Add(-time.Nanosecond), st, seckill.SaleUpcoming},
		{t0, st, seckill.SaleActive},
		{t0, seckill.StockState{Sellable: 2, Sold: 2}, seckill.SaleSoldOut},
		{t0.Add(time.Hour), st, seckill.SaleEnded},
	} {
		if got := s.Status(c.at, c.st); got != c.want {
			t.Errorf("Status(%v, %+v) = %s, want %s", c.at, c.st, got, c.want)
		}
	}
	// Closed before its start (ends_at = the close, before starts_at): ended, and buying
	// answers ended, not not_started.
	closed := seckill.Sale{StartsAt: t0, EndsAt: t0.Add(-time.Hour)}
	if got := closed.Status(t0.Add(-time.Minute), st); got != seckill.SaleEnded {
		t.Errorf("status of a sale closed before its start = %s, want ended", got)
	}
	if code := seckill.ErrorCode(closed.WindowError(t0.Add(-time.Minute))); code != seckill.CodeEnded {
		t.Errorf("window of a sale closed before its start = %s, want ended", code)
	}
}

// TestErrorCodeAndMessage: a foreign error is internal and its text is not the client's. (The
// codes' HTTP statuses are httpapi's table, tested there.)
func TestErrorCodeAndMessage(t *testing.T) {
	if seckill.ErrorCode(nil) != "" || seckill.ErrorCode(http.ErrBodyNotAllowed) != seckill.CodeInternal {
		t.Error("ErrorCode of nil / foreign errors")
	}
	if seckill.ErrorMessage(http.ErrBodyNotAllowed) != "internal error" {
		t.Error("internal errors must not leak their text")
	}
}

func TestReservationIDCarriesSale(t *testing.T) {
	random := make([]byte, 16)
	for _, sale := range []string{"s", "a-b-c", "x.y_z"} {
		id := seckill.ReservationID(sale, random)
		got, ok := seckill.SaleOfReservation(id)
		if !ok || got != sale {
			t.Errorf("SaleOfReservation(%q) = %q, %v; want %q", id, got, ok, sale)
		}
	}
	for _, bad := range []string{"", "-", "nodash", "s-short", "-00000000000000000000000000000000"} {
		if _, ok := seckill.SaleOfReservation(bad); ok {
			t.Errorf("SaleOfReservation(%q) accepted a malformed id", bad)
		}
	}
}

func TestStatusRankOnlyMovesForward(t *testing.T) {
	order := []seckill.ReservationStatus{seckill.StatusQueued, seckill.StatusHeld, seckill.StatusExpired, seckill.StatusPaid}
	for i := 1; i < len(order); i++ {
		if order[i-1].Rank() >= order[i].Rank() {
			t.Errorf("%s must rank below %s", order[i-1], order[i])
		}
	}
	if seckill.StatusPaid.Rank() != seckill.StatusRefundRequired.Rank() || seckill.ReservationStatus("x").Valid() {
		t.Error("paid and refund_required are both final; unknown statuses are invalid")
	}
}

// FuzzValidID holds ValidID to the documented pattern.
func FuzzValidID(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	for _, s := range []string{"", "a", "alice_1.x-y", strings.Repeat("a", 64), strings.Repeat("a", 65), "a b", "é", "a\n", "\x00", "../x", ".", "..", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := pattern.MatchString(s) && s != "." && s != ".."
		if got := seckill.ValidID(s); got != want {
			t.Fatalf("ValidID(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

// TestUnits: a count of one unit is singular in every message ("more than 1 units" was one).
func TestUnits(t *testing.T) {
	for n, want := range map[int]string{0: "0 units", 1: "1 unit", 2: "2 units"} {
		if got := seckill.Units(n); got != want {
			t.Errorf("Units(%d) = %q, want %q", n, got, want)
		}
	}
	if got := seckill.Units(int64(1)); got != "1 unit" {
		t.Errorf("Units(int64(1)) = %q", got)
	}
}

// A sale's currency is an ISO 4217 code, in lower case (issue 26: "zzz" was accepted, and a
// sale nobody can be charged in was created). The list is golang.org/x/text's.
func TestValidCurrencyIsISO4217(t *testing.T) {
	for _, ok := range []string{"usd", "eur", "jpy", "vnd", "gbp", "chf", "xts"} {
		if !seckill.ValidCurrency(ok) {
			t.Errorf("ValidCurrency(%q) = false, want true", ok)
		}
	}
	for _, bad := range []string{"zzz", "abc", "qqq", "USD", "Usd", "us", "usdd", "", "u$d", "ūsd"} {
		if seckill.ValidCurrency(bad) {
			t.Errorf("ValidCurrency(%q) = true, want false", bad)
		}
		price, stock, cur := int64(100), 1, bad
		in := seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock, Currency: &cur}
		if _, err := seckill.NewSale(in, time.Unix(1_900_000_000, 0)); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Errorf("NewSale with currency %q: %v, want invalid_argument", bad, err)
		}
	}
}
