package sqlstore

import (
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestSaleVersion: ApplyEvents records the highest Version of each sale's events in the same
// transaction, and never lowers it (entries stored again, an older batch after a newer one);
// RaiseSaleVersion only raises; events without a version (the memory engine) record nothing;
// a version on the sale's row (written before sale_versions) is read too; an unknown sale reads
// 0 and records nothing; a deleted sale's version goes with it. On every dialect.
func TestSaleVersion(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openT(t, fresh(t))
		now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
		price := int64(0)
		def, err := seckill.NewSale(seckill.SaleInput{ID: "v", PriceCents: &price, Stock: ptrInt(5), StartsAt: &now}, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSale(ctx, def); err != nil {
			t.Fatal(err)
		}
		want := func(step string, w uint64) {
			t.Helper()
			if got, err := s.SaleVersion(ctx, "v"); err != nil || got != w {
				t.Fatalf("%s: SaleVersion = %d, %v; want %d", step, got, err, w)
			}
		}
		want("new sale", 0)
		ev := func(seq int, v uint64) seckill.Event {
			exp := now.Add(time.Minute)
			id := seckill.ReservationID("v", []byte{15: byte(seq)})
			return seckill.Event{Reservation: seckill.Reservation{ID: id, SaleID: "v", UserID: "u", Quantity: 1,
				Status: seckill.StatusHeld, Seq: uint64(seq), AmountCents: 0, CreatedAt: now, ExpiresAt: &exp}, At: now, Version: v}
		}
		if err := s.ApplyEvents(ctx, []seckill.Event{ev(1, 3), ev(2, 7), ev(3, 5)}); err != nil {
			t.Fatal(err)
		}
		want("after a batch", 7)
		if err := s.ApplyEvents(ctx, []seckill.Event{ev(1, 3)}); err != nil {
			t.Fatal(err)
		}
		want("after an older batch", 7)
		if err := s.ApplyEvents(ctx, []seckill.Event{ev(4, 0)}); err != nil {
			t.Fatal(err)
		}
		want("after events without a version", 7)
		if err := s.RaiseSaleVersion(ctx, "v", 1<<32); err != nil {
			t.Fatal(err)
		}
		want("raised", 1<<32)
		if err := s.RaiseSaleVersion(ctx, "v", 9); err != nil {
			t.Fatal(err)
		}
		want("not lowered", 1<<32)
		// A version an instance before sale_versions recorded on the sale's row still counts.
		if _, err := s.db.ExecContext(ctx, s.q(`UPDATE sales SET redis_version = ? WHERE id = ?`), int64(1)<<33, "v"); err != nil {
			t.Fatal(err)
		}
		want("recorded on the sale's row", 1<<33)
		if err := s.RaiseSaleVersion(ctx, "nope", 5); err != nil {
			t.Fatalf("RaiseSaleVersion of an unknown sale: %v; want nothing recorded, no error", err)
		}
		if got, err := s.SaleVersion(ctx, "nope"); err != nil || got != 0 {
			t.Fatalf("unknown sale: %d, %v; want 0", got, err)
		}
		// The version goes with its sale (sales that never sold can be deleted).
		if err := s.CreateSale(ctx, testSale("gone", 1, 0)); err != nil {
			t.Fatal(err)
		}
		if err := s.RaiseSaleVersion(ctx, "gone", 5); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSale(ctx, "gone"); err != nil {
			t.Fatalf("DeleteSale of a sale with a version: %v", err)
		}
		if err := s.CreateSale(ctx, testSale("gone", 1, 0)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.SaleVersion(ctx, "gone"); err != nil || got != 0 {
			t.Fatalf("a sale created again: SaleVersion = %d, %v; want 0", got, err)
		}
	})
}

func ptrInt(n int) *int { return &n }

// TestSaleIncarnationAndSegments: a sale keeps its incarnation and the number of segments it was
// created with (migration sale_incarnation); a sale deleted and created again under its id has
// the new one's; a sale created without them reads "" and 1; an unknown sale is not found. The
// definition that Sale returns leaves Segments at 0.
func TestSaleIncarnationAndSegments(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openT(t, fresh(t))
		now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
		price := int64(0)
		def, err := seckill.NewSale(seckill.SaleInput{ID: "inc", PriceCents: &price, Stock: ptrInt(5), StartsAt: &now, Segments: ptrInt(4)}, now)
		if err != nil {
			t.Fatal(err)
		}
		check := func(step, inc string, segs int) {
			t.Helper()
			got, _, err := s.Sale(ctx, "inc")
			if err != nil || got.Incarnation != inc || got.Segments != 0 {
				t.Fatalf("%s: Sale = %+v, %v; want incarnation %q, segments 0", step, got, err, inc)
			}
			if n, err := s.SaleSegments(ctx, "inc"); err != nil || n != segs {
				t.Fatalf("%s: SaleSegments = %d, %v; want %d", step, n, err, segs)
			}
		}
		def.Incarnation = "first"
		if err := s.CreateSale(ctx, def); err != nil {
			t.Fatal(err)
		}
		check("created", "first", 4)
		if err := s.DeleteSale(ctx, "inc"); err != nil {
			t.Fatal(err)
		}
		def.Incarnation, def.Segments = "", 0
		if err := s.CreateSale(ctx, def); err != nil {
			t.Fatal(err)
		}
		check("made again without", "", 1)
		if _, err := s.SaleSegments(ctx, "nope"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("SaleSegments of an unknown sale: %v; want not_found", err)
		}
		bad := def
		bad.ID, bad.Incarnation = "bad", "has space"
		if err := s.CreateSale(ctx, bad); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Fatalf("CreateSale with a bad incarnation: %v; want invalid_argument", err)
		}
	})
}
