package payment_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/seckilltest"
)

// limitedProvider is a Gateway whose provider answers "too many requests" (with wait as its
// Retry-After) while limited is set, and counts the calls that reach it.
type limitedProvider struct {
	payment.Gateway // Name and Parse only
	limited         bool
	wait            time.Duration
	calls           int
}

func (p *limitedProvider) answer() error {
	p.calls++
	if p.limited {
		return &payment.RateLimitedError{RetryAfter: p.wait, Err: seckill.Errorf(seckill.CodeUnavailable, "provider: 429")}
	}
	return nil
}

func (p *limitedProvider) Start(context.Context, payment.StartRequest) (seckill.PaymentIntent, error) {
	return seckill.PaymentIntent{PaymentID: "p"}, p.answer()
}
func (p *limitedProvider) ClosePayment(context.Context, string) error { return p.answer() }
func (p *limitedProvider) Refund(context.Context, payment.RefundRequest) (payment.RefundResult, error) {
	return payment.RefundResult{}, p.answer()
}
func (p *limitedProvider) State(context.Context, string) (payment.State, error) {
	return payment.StateOpen, p.answer()
}

// wantBackedOff checks that err is a BackedOffError coded unavailable that names wait.
func wantBackedOff(t *testing.T, what string, err error, wait time.Duration) {
	t.Helper()
	var b *payment.BackedOffError
	if !errors.As(err, &b) || b.RetryAfter() != wait || seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("%s: %v; want unavailable, backed off for %v", what, err, wait)
	}
}

// WithBackoff: once the provider answers "too many requests", no call reaches it until its
// Retry-After has passed: each answers BackedOffError (unavailable, naming the wait left) at
// once. Then calls go through again. A wait not named is DefaultRateLimitWait; one longer
// than MaxRateLimitWait is cut to it.
func TestWithBackoff(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	p := &limitedProvider{Gateway: payment.NewWebhookGateway([]byte("k")), limited: true, wait: 3 * time.Second}
	g := payment.WithBackoff(p, clock)

	_, err := g.Start(ctx, payment.StartRequest{})
	wantBackedOff(t, "the 429 itself", err, 3*time.Second)
	p.limited = false
	clock.Advance(time.Second)
	_, err = g.Start(ctx, payment.StartRequest{})
	wantBackedOff(t, "Start while backed off", err, 2*time.Second)
	wantBackedOff(t, "Close while backed off", g.ClosePayment(ctx, "p"), 2*time.Second)
	_, err = g.Refund(ctx, payment.RefundRequest{PaymentID: "p"})
	wantBackedOff(t, "Refund while backed off", err, 2*time.Second)
	_, err = g.State(ctx, "p")
	wantBackedOff(t, "State while backed off", err, 2*time.Second)
	if p.calls != 1 {
		t.Fatalf("the provider was called %d times, want 1 (the 429)", p.calls)
	}
	if g.Name() != payment.WebhookName {
		t.Fatalf("Name() = %q, want the provider's", g.Name())
	}
	if _, err := g.Parse(http.Header{}, []byte("{}"), clock.Now()); seckill.ErrorCode(err) == seckill.CodeUnavailable {
		t.Fatalf("Parse is local work and is not backed off: %v", err)
	}

	clock.Advance(2 * time.Second)
	if _, err := g.Start(ctx, payment.StartRequest{}); err != nil || p.calls != 2 {
		t.Fatalf("Start after the wait: %v, %d calls; want through to the provider", err, p.calls)
	}

	p.limited, p.wait = true, 0
	wantBackedOff(t, "a 429 without Retry-After", g.ClosePayment(ctx, "p"), payment.DefaultRateLimitWait)
	clock.Advance(payment.DefaultRateLimitWait)
	p.wait = 24 * time.Hour
	wantBackedOff(t, "a 429 asking for a day", g.ClosePayment(ctx, "p"), payment.MaxRateLimitWait)
	clock.Advance(payment.MaxRateLimitWait - time.Millisecond)
	wantBackedOff(t, "Close a millisecond before the end", g.ClosePayment(ctx, "p"), time.Millisecond)
	if p.calls != 4 {
		t.Fatalf("the provider was called %d times, want 4", p.calls)
	}
}

// ParseRetryAfter reads delay seconds and HTTP dates; anything else, or a time past, is 0.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "x": 0, "2": 2 * time.Second, "1e9": 0,
		"99999999999": payment.MaxRateLimitWait + time.Second,
		now.Add(7 * time.Second).Format(http.TimeFormat):  7 * time.Second,
		now.Add(-7 * time.Second).Format(http.TimeFormat): 0,
	} {
		if got := payment.ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
