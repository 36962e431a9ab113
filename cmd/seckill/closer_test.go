package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/payment"
)

// TestServeClosesPaymentOfExpiredHold: a buyer starts a payment through the mock (POST /pay)
// and does not pay it before the hold ends (the mock's webhook is an hour away). Once the hold
// has expired the server's closer closes the payment at the mock: the buyer can no longer pay
// it, no webhook was sent for it, and the unit goes to the next buyer. Nothing here depends on
// timing but a generous deadline for the closer (which passes every second) to act.
func TestServeClosesPaymentOfExpiredHold(t *testing.T) {
	cfg := config{Dev: true, Gateway: "mock", Addr: "127.0.0.1:0", Engine: "memory",
		DB: "sqlite://" + filepath.Join(t.TempDir(), "c.db")}
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1,
		gatewayDelay: func(seckill.Reservation) time.Duration { return time.Hour }}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The webhook is an hour away: cancel it rather than wait for it (close would).
		_ = a.gateway.Close()
		_ = a.close(context.Background())
	})
	ctx := t.Context()
	price, stock, hold := int64(700), 1, 1
	if _, err := a.svc.CreateSale(ctx, seckill.SaleInput{ID: "c", Name: "c", PriceCents: &price, Stock: &stock, HoldSeconds: &hold}); err != nil {
		t.Fatal(err)
	}
	alice, err := a.svc.Buy(ctx, seckill.BuyRequest{SaleID: "c", UserID: "alice", Quantity: 1})
	if err != nil || alice.Reservation.Status != seckill.StatusHeld {
		t.Fatalf("alice's buy: %+v, %v; want held", alice.Reservation, err)
	}
	tok, err := httpapi.MintToken([]byte(cfg.AuthSecret), "alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	intent, err := client.New(a.url, client.WithToken(tok)).Pay(ctx, alice.Reservation.ID)
	pid := intent.PaymentID
	if err != nil || pid == "" {
		t.Fatalf("/pay: %+v %v", intent, err)
	}
	if st, _ := a.gateway.State(ctx, pid); st != payment.StateOpen {
		t.Fatalf("payment %s is %s at the mock right after /pay, want open", pid, st)
	}

	// The closer closes it once the hold has expired (a second, then at most a pass later).
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := a.gateway.State(ctx, pid)
		if err != nil {
			t.Fatal(err)
		}
		if st == payment.StateClosed {
			break
		}
		if st != payment.StateOpen || time.Now().After(deadline) {
			t.Fatalf("payment %s is %s at the mock, want closed once alice's hold expired", pid, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if time.Now().Before(alice.Reservation.ExpiresAt.Truncate(time.Millisecond)) { // stores keep milliseconds
		t.Fatalf("payment closed before alice's hold expired at %v", alice.Reservation.ExpiresAt)
	}
	// alice, paying now, is refused by the gateway; no webhook was ever sent for it.
	if err := a.gateway.Settle(pid); seckill.ErrorCode(err) != seckill.CodeConflict {
		t.Fatalf("paying the closed payment: %v, want conflict", err)
	}
	if st := a.gateway.Stats(); st.Delivered != 0 || st.Created != 1 {
		t.Fatalf("mock stats %+v; want one payment, no webhook delivered", st)
	}

	// The unit goes to bob.
	bob, err := a.svc.Buy(ctx, seckill.BuyRequest{SaleID: "c", UserID: "bob", Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	for r := bob.Reservation; r.Status != seckill.StatusHeld; {
		if r.Status != seckill.StatusQueued || time.Now().After(deadline) {
			t.Fatalf("bob's reservation %+v, want held once alice's hold is reclaimed", r)
		}
		time.Sleep(50 * time.Millisecond)
		if r, err = a.svc.Reservation(ctx, bob.Reservation.ID, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := a.svc.Reservation(ctx, alice.Reservation.ID, "alice"); err != nil || r.Status == seckill.StatusHeld || r.Status == seckill.StatusPaid {
		t.Fatalf("alice's reservation %+v, %v; want ended", r, err)
	}
}
