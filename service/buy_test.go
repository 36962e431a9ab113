package service_test

import (
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
)

// TestPurchaseTokenSharedAcrossInstances: two instances with the same auth secret accept each
// other's purchase tokens; a token is bound to its user and sale; another secret refuses it.
func TestPurchaseTokenSharedAcrossInstances(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	price, stock := int64(1), 5
	sale, err := seckill.NewSale(seckill.SaleInput{ID: "s1", PriceCents: &price, Stock: &stock}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	newInstance := func(secret string) *service.Service {
		m := seckilltest.NewModel(clock)
		if err := m.LoadSale(ctx, sale, 0); err != nil {
			t.Fatal(err)
		}
		return service.New(service.Config{Inventory: m, Clock: clock, AuthSecret: []byte(secret)})
	}
	a, b, other := newInstance("k"), newInstance("k"), newInstance("another")
	p, err := a.PurchasePath(ctx, "s1", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !p.ExpiresAt.Equal(sale.EndsAt) {
		t.Errorf("path expires at %v, want the sale's end %v", p.ExpiresAt, sale.EndsAt)
	}
	token := p.Token
	if p.SaleID != "s1" {
		t.Fatalf("path of sale %q, want s1", p.SaleID)
	}
	if err := b.CheckPurchaseToken(ctx, "s1", token, "alice"); err != nil {
		t.Fatalf("another instance refused the token: %v", err)
	}
	for _, c := range []struct {
		svc        *service.Service
		sale, user string
	}{{b, "s1", "bob"}, {other, "s1", "alice"}} {
		if err := c.svc.CheckPurchaseToken(ctx, c.sale, token, c.user); seckill.ErrorCode(err) != seckill.CodeInvalidToken {
			t.Errorf("token used by %s on %s: %v, want invalid_token", c.user, c.sale, err)
		}
	}
	// Any change of the token is refused: each character replaced, one cut off, one added.
	altered := []string{token[:len(token)-1], token + "A", ""}
	for i := range token {
		c := byte('A')
		if token[i] == 'A' {
			c = 'B'
		}
		altered = append(altered, token[:i]+string(c)+token[i+1:])
	}
	for _, bad := range altered {
		if err := b.CheckPurchaseToken(ctx, "s1", bad, "alice"); seckill.ErrorCode(err) != seckill.CodeInvalidToken {
			t.Fatalf("altered token %q: %v, want invalid_token", bad, err)
		}
	}
	// The token is purchasetoken's, the documented HMAC (checked there, computed independently).
	if want := purchasetoken.New(purchasetoken.Key([]byte("k")), "s1", "alice", sale.StartsAt); token != want {
		t.Errorf("token %q, want %q", token, want)
	}
	clock.Set(sale.StartsAt.Add(-time.Second))
	if _, err := a.PurchasePath(ctx, "s1", "alice"); seckill.ErrorCode(err) != seckill.CodeNotStarted {
		t.Errorf("path before start: %v, want not_started", err)
	}
	clock.Set(sale.EndsAt)
	if _, err := a.PurchasePath(ctx, "s1", "alice"); seckill.ErrorCode(err) != seckill.CodeEnded {
		t.Errorf("path at end: %v, want ended", err)
	}
}
