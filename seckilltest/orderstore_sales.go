// OrderStore conformance cases: sales (create, read, update, delete, bounds). TestOrderStore
// in orderstore.go runs them.

package seckilltest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func osSaleRoundTrip(t *testing.T, s seckill.OrderStore) {
	want := osSale("s1", 1000, 20)
	want.QueueLimit = 0       // zero is a real value (no queue), not "unset"
	want.PreheatSeconds = 450 // neither the default (300) nor a column's 0
	osCreate(t, s, want)
	got, sold, err := s.Sale(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	osSameSale(t, got, want)
	if sold != 0 {
		t.Fatalf("new sale: sold = %d, want 0", sold)
	}
}

// osSaleListedCurrency: listed and currency are kept as given (an empty currency too, for a
// sale built in code), listed changes with UpdateSale and currency does not, and a currency
// that is not 3 lower-case letters is refused before anything is stored.
func osSaleListedCurrency(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	hidden := osSale("hidden", 5, 0)
	hidden.Listed, hidden.Currency = false, "eur"
	shown := osSale("shown", 5, 0)
	shown.Listed, shown.Currency, shown.CreatedAt = true, "jpy", osT0.Add(time.Second)
	bare := osSale("bare", 5, 0)
	bare.Listed, bare.CreatedAt = true, osT0.Add(2*time.Second)
	for _, sale := range []seckill.Sale{hidden, shown, bare} {
		osCreate(t, s, sale)
		got, _, err := s.Sale(ctx, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, sale)
	}
	sales, _, err := s.Sales(ctx)
	if err != nil || len(sales) != 3 {
		t.Fatalf("Sales = %v, %v; want 3 sales", sales, err)
	}
	for i, want := range []seckill.Sale{hidden, shown, bare} {
		osSameSale(t, sales[i], want)
	}

	listed, unlisted := hidden, shown
	listed.Listed, unlisted.Listed = true, false
	listed.Currency, unlisted.Currency = "gbp", "" // UpdateSale keeps the stored currency
	for _, u := range []seckill.Sale{listed, unlisted} {
		if err := s.UpdateSale(ctx, u); err != nil {
			t.Fatalf("UpdateSale(%s): %v", u.ID, err)
		}
	}
	hidden.Listed, shown.Listed = true, false
	for _, want := range []seckill.Sale{hidden, shown} {
		got, _, err := s.Sale(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, want)
	}

	for _, c := range []string{"EUR", "eu", "euro", "e1r", "€"} {
		bad := osSale("badcur", 5, 0)
		bad.Currency = c
		osWantCode(t, fmt.Sprintf("CreateSale with currency %q", c), s.CreateSale(ctx, bad), seckill.CodeInvalidArgument)
	}
	osWantCode(t, "Sale of a sale refused for its currency", func() error { _, _, err := s.Sale(ctx, "badcur"); return err }(), seckill.CodeNotFound)
}

// osSalePreheat: preheat_seconds is kept as created, at its bounds too (0: hot from the start;
// seckill.MaxPreheatSeconds), by Sale and by Sales. UpdateSale keeps the stored one: it never
// changes once the sale exists, and the definitions passed to UpdateSale come from the engine,
// whose answer may not carry it (the Redis engine's does not: it would read 0).
func osSalePreheat(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	var want []seckill.Sale
	for i, p := range []int{0, 1, seckill.DefaultPreheatSeconds, seckill.MaxPreheatSeconds} {
		sale := osSale(fmt.Sprintf("pre%d", i), 5, 0)
		sale.PreheatSeconds, sale.CreatedAt = p, osT0.Add(time.Duration(i)*time.Second)
		osCreate(t, s, sale)
		got, _, err := s.Sale(ctx, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, sale)
		want = append(want, sale)
	}
	sales, _, err := s.Sales(ctx)
	if err != nil || len(sales) != len(want) {
		t.Fatalf("Sales = %v, %v; want %d sales", sales, err, len(want))
	}
	for i := range want {
		osSameSale(t, sales[i], want[i])
	}

	changed := want[2]
	changed.Stock, changed.PreheatSeconds = 9, 0 // as the Redis engine answers it
	if err := s.UpdateSale(ctx, changed); err != nil {
		t.Fatalf("UpdateSale: %v", err)
	}
	changed.PreheatSeconds = want[2].PreheatSeconds
	got, _, err := s.Sale(ctx, changed.ID)
	if err != nil {
		t.Fatal(err)
	}
	osSameSale(t, got, changed)
}

// osSaleRoom: the waiting room (seckill.Sale.Room) is kept as created, by Sale and by Sales:
// none, one with the defaults NewSale fills, and one with every field away from its default and
// at a bound. UpdateSale keeps the stored one whatever it is given (none, or another policy):
// the room never changes once the sale exists, and the definitions passed to UpdateSale come
// from the engine, whose answer may not carry it.
func osSaleRoom(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	rooms := []*seckill.RoomPolicy{
		nil,
		{Order: seckill.RoomDraw, OpensSeconds: seckill.DefaultPreheatSeconds, AdmitPerSecond: 500,
			TokenSeconds: seckill.DefaultTokenSeconds},
		{Order: seckill.RoomFIFO, OpensSeconds: 0, AdmitPerSecond: seckill.MaxAdmitPerSecond,
			MaxActive: seckill.MaxQuantity, TokenSeconds: seckill.MaxTokenSeconds, PowBits: seckill.MaxPowBits},
		{Order: seckill.RoomDraw, OpensSeconds: seckill.MaxPreheatSeconds, MaxActive: 1,
			TokenSeconds: seckill.MinTokenSeconds, PowBits: 1},
	}
	var want []seckill.Sale
	for i, room := range rooms {
		sale := osSale(fmt.Sprintf("room%d", i), 5, 0)
		sale.PreheatSeconds, sale.CreatedAt = seckill.MaxPreheatSeconds, osT0.Add(time.Duration(i)*time.Second)
		if room != nil {
			r := *room // the store must not keep the caller's pointer
			sale.Room = &r
		}
		osCreate(t, s, sale)
		if sale.Room != nil {
			sale.Room.PowBits += 100 // a store that kept the pointer would now read this
			sale.Room = room
		}
		got, _, err := s.Sale(ctx, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, sale)
		want = append(want, sale)
	}
	sales, _, err := s.Sales(ctx)
	if err != nil || len(sales) != len(want) {
		t.Fatalf("Sales = %v, %v; want %d sales", sales, err, len(want))
	}
	for i := range want {
		osSameSale(t, sales[i], want[i])
	}

	for i, w := range want {
		changed := w
		changed.Stock = 9
		changed.Room = rooms[(i+1)%len(rooms)] // none for a sale with one, another for the others
		if err := s.UpdateSale(ctx, changed); err != nil {
			t.Fatalf("UpdateSale(%s): %v", w.ID, err)
		}
		changed.Room = w.Room
		got, _, err := s.Sale(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, changed)
	}
}

func osSalesOldestFirst(t *testing.T, s seckill.OrderStore) {
	sales, sold, err := s.Sales(t.Context())
	if err != nil || len(sales) != 0 || len(sold) != 0 {
		t.Fatalf("empty store: Sales = %v, %v, %v", sales, sold, err)
	}
	for i, id := range []string{"b", "a", "c"} {
		sale := osSale(id, 10, 0)
		sale.CreatedAt = osT0.Add(time.Duration([]int{2, 1, 3}[i]) * time.Second)
		osCreate(t, s, sale)
	}
	r := osRes("b", "rb", "u", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "pb", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	sales, sold, err = s.Sales(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sale := range sales {
		ids = append(ids, sale.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) || !slices.Equal(sold, []int{0, 2, 0}) {
		t.Fatalf("Sales = %v with sold %v, want [a b c] with [0 2 0]", ids, sold)
	}
}

func osDuplicateSale(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("dup", 10, 0))
	again := osSale("dup", 99, 0)
	again.Name = "second"
	osWantCode(t, "CreateSale of an existing id", s.CreateSale(t.Context(), again), seckill.CodeConflict)
	got, _, err := s.Sale(t.Context(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Sale dup" || got.Stock != 10 {
		t.Fatalf("a refused duplicate changed the sale: %+v", got)
	}
}

func osUpdateSale(t *testing.T, s seckill.OrderStore) {
	sale := osCreate(t, s, osSale("u", 10, 0))
	r := osRes("u", "r1", "alice", 3, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)

	sale.Stock, sale.Holdback, sale.EndsAt = 20, 1, osT0.Add(2*time.Hour)
	if err := s.UpdateSale(t.Context(), sale); err != nil {
		t.Fatalf("UpdateSale: %v", err)
	}
	got, sold, err := s.Sale(t.Context(), "u")
	if err != nil {
		t.Fatal(err)
	}
	osSameSale(t, got, sale)
	if sold != 3 {
		t.Fatalf("UpdateSale changed sold to %d, want 3", sold)
	}
	if err := s.UpdateSale(t.Context(), sale); err != nil {
		t.Fatalf("UpdateSale with no change: %v", err)
	}

	shrunk := sale
	shrunk.Stock, shrunk.Holdback = 4, 2 // sellable 2 < 3 sold
	osWantCode(t, "UpdateSale below the units sold", s.UpdateSale(t.Context(), shrunk), seckill.CodeConflict)
	got, sold, _ = s.Sale(t.Context(), "u")
	if got.Stock != 20 || sold != 3 {
		t.Fatalf("a refused update changed the sale: stock %d, sold %d", got.Stock, sold)
	}
}

// osDeleteSale: DeleteSale removes a sale nothing refers to, and refuses one with a reservation
// or a payment (it undoes a create whose engine load failed, never a sale in use).
func osDeleteSale(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	osCreate(t, s, osSale("gone", 5, 0))
	if err := s.DeleteSale(ctx, "gone"); err != nil {
		t.Fatalf("DeleteSale of an unused sale: %v", err)
	}
	_, _, err := s.Sale(ctx, "gone")
	osWantCode(t, "Sale after DeleteSale", err, seckill.CodeNotFound)
	osWantCode(t, "DeleteSale of an unknown sale", s.DeleteSale(ctx, "gone"), seckill.CodeNotFound)
	osCreate(t, s, osSale("gone", 5, 0)) // the id is free again

	osCreate(t, s, osSale("used", 5, 0))
	osApply(t, s, osEv(osRes("used", "used-1", "u1", 1, seckill.StatusHeld, 1), osT0))
	osWantCode(t, "DeleteSale of a sale with a reservation", s.DeleteSale(ctx, "used"), seckill.CodeConflict)
	osCreate(t, s, osSale("paid", 5, 0))
	osWantPay(t, s, "p-late", osRes("paid", "paid-1", "bob", 1, seckill.StatusRefundRequired, 1),
		seckill.PaymentRefundRequired, seckill.PaymentRefundRequired, osT0)
	osWantCode(t, "DeleteSale of a sale with a payment", s.DeleteSale(ctx, "paid"), seckill.CodeConflict)
	for _, id := range []string{"used", "paid"} {
		if _, _, err := s.Sale(ctx, id); err != nil {
			t.Fatalf("a refused DeleteSale removed %s: %v", id, err)
		}
	}
}

// osSaleBounds: the store refuses a sale outside the bounds every engine keeps (seckill.Sale.Validate),
// so no row is written that an engine would refuse.
func osSaleBounds(t *testing.T, s seckill.OrderStore) {
	bad := map[string]func(*seckill.Sale){
		"before 1970":    func(x *seckill.Sale) { x.StartsAt = seckill.MinTime.Add(-time.Millisecond) },
		"past MaxTime":   func(x *seckill.Sale) { x.EndsAt = seckill.MaxTime.Add(time.Millisecond) },
		"amount":         func(x *seckill.Sale) { x.PriceCents, x.PerUserLimit = seckill.MaxPriceCents, 10_000 },
		"NUL in name":    func(x *seckill.Sale) { x.Name = "a\x00b" },
		"dot id":         func(x *seckill.Sale) { x.ID = ".." },
		"ends <= starts": func(x *seckill.Sale) { x.EndsAt = x.StartsAt },
		"preheat < 0":    func(x *seckill.Sale) { x.PreheatSeconds = -1 },
		"preheat > day":  func(x *seckill.Sale) { x.PreheatSeconds = seckill.MaxPreheatSeconds + 1 },
		"room without a bound": func(x *seckill.Sale) {
			x.Room = &seckill.RoomPolicy{Order: seckill.RoomDraw, TokenSeconds: seckill.DefaultTokenSeconds}
		},
		"room opens before preheat": func(x *seckill.Sale) {
			x.PreheatSeconds = 10
			x.Room = &seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 11, MaxActive: 1, TokenSeconds: seckill.DefaultTokenSeconds}
		},
	}
	for what, mutate := range bad {
		sale := osSale("bounds", 5, 0)
		mutate(&sale)
		osWantCode(t, "CreateSale with "+what, s.CreateSale(t.Context(), sale), seckill.CodeInvalidArgument)
	}
	if _, _, err := s.Sale(t.Context(), "bounds"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("a refused sale was stored: %v", err)
	}
}

func osNotFound(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	_, _, err := s.Sale(ctx, "nope")
	osWantCode(t, "Sale", err, seckill.CodeNotFound)
	osWantCode(t, "UpdateSale", s.UpdateSale(ctx, osSale("nope", 1, 0)), seckill.CodeNotFound)
	_, err = s.Counts(ctx, "nope")
	osWantCode(t, "Counts", err, seckill.CodeNotFound)
	_, err = s.Reservations(ctx, "nope")
	osWantCode(t, "Reservations", err, seckill.CodeNotFound)
	_, err = s.PaymentResult(ctx, "nope")
	osWantCode(t, "PaymentResult", err, seckill.CodeNotFound)
	orders, err := s.Orders(ctx, "nobody")
	if err != nil || len(orders) != 0 {
		t.Fatalf("Orders of a user without payments = %v, %v; want none", orders, err)
	}
}
