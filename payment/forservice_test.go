package payment

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// startRecorder is a Gateway that records the StartRequests it gets.
type startRecorder struct{ got []StartRequest }

func (g *startRecorder) Name() string { return "recorder" }
func (g *startRecorder) Start(_ context.Context, req StartRequest) (seckill.PaymentIntent, error) {
	g.got = append(g.got, req)
	return seckill.PaymentIntent{PaymentID: "p-" + req.ReservationID}, nil
}
func (g *startRecorder) Parse(http.Header, []byte, time.Time) (Notification, error) {
	return Notification{}, nil
}
func (g *startRecorder) ClosePayment(context.Context, string) error { return nil }
func (g *startRecorder) Refund(context.Context, RefundRequest) (RefundResult, error) {
	return RefundResult{}, nil
}
func (g *startRecorder) State(context.Context, string) (State, error) { return StateUnknown, nil }

// TestForServiceChargesTheSaleCurrency: the adapter starts the payment in the sale's currency
// (the default when none is given), keyed by the reservation, bound to the hold's expiry and
// start (expires_at − hold_seconds), naming the sale and its name, and names its gateway on the
// intent so that the open payment is recorded with it.
func TestForServiceChargesTheSaleCurrency(t *testing.T) {
	g := &startRecorder{}
	p := ForService(g)
	exp := time.Unix(1_800_000_000, 0)
	r := seckill.Reservation{ID: "s-r1", SaleID: "s", UserID: "u", AmountCents: 700, ExpiresAt: &exp}
	sale := seckill.Sale{ID: "s", Name: "Desk lamp", Currency: "eur", HoldSeconds: 90}
	intent, err := p.CreatePaymentFor(context.Background(), r, sale)
	if err != nil || intent.Gateway != "recorder" || intent.PaymentID != "p-s-r1" {
		t.Fatalf("CreatePaymentFor: %+v, %v", intent, err)
	}
	if _, err := p.CreatePaymentFor(context.Background(), r, seckill.Sale{ID: "s"}); err != nil { // a sale of no currency or name
		t.Fatal(err)
	}
	want := []StartRequest{
		{ReservationID: "s-r1", UserID: "u", AmountCents: 700, Currency: "eur", ExpiresAt: exp, IdempotencyKey: "s-r1",
			SaleID: "s", SaleName: "Desk lamp", HeldAt: exp.Add(-90 * time.Second)},
		{ReservationID: "s-r1", UserID: "u", AmountCents: 700, Currency: DefaultCurrency, ExpiresAt: exp, IdempotencyKey: "s-r1", SaleID: "s"},
	}
	if len(g.got) != 2 || g.got[0] != want[0] || g.got[1] != want[1] {
		t.Fatalf("start requests %+v; want %+v", g.got, want)
	}
}
