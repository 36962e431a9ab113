package payment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
)

// A provider's rate limit is the whole shop's (Stripe's is per account), so one buyer's flood
// of requests can make every other buyer's payment fail. Its "too many requests" answer is
// therefore honoured by every caller at once: WithBackoff leaves the provider alone until its
// Retry-After has passed, and answers unavailable with that Retry-After meanwhile.

// RateLimitedError is a provider's "too many requests" (HTTP 429): the account is over its
// rate limit and asks to be left alone for RetryAfter (0 when it did not say). A gateway
// returns it, wrapping its own coded error, so that WithBackoff can back off.
type RateLimitedError struct {
	RetryAfter time.Duration
	Err        error // the gateway's error, coded unavailable
}

func (e *RateLimitedError) Error() string { return e.Err.Error() }
func (e *RateLimitedError) Unwrap() error { return e.Err }

// BackedOffError is the answer of a gateway backed off after a "too many requests": the call
// was not made. It is coded unavailable, and RetryAfter is when the provider may be asked
// again (the HTTP API sends it as Retry-After).
type BackedOffError struct {
	Wait time.Duration
	err  error
}

func (e *BackedOffError) Error() string { return e.err.Error() }
func (e *BackedOffError) Unwrap() error { return e.err }

// RetryAfter is how long the caller should wait before trying again.
func (e *BackedOffError) RetryAfter() time.Duration { return e.Wait }

// Backoff bounds: a "too many requests" that names no wait backs off DefaultRateLimitWait; one that
// names a longer wait than MaxRateLimitWait (a malformed or hostile header) backs off MaxRateLimitWait, so
// that payments are tried again within a minute whatever the provider said.
const (
	DefaultRateLimitWait = time.Second
	MaxRateLimitWait     = time.Minute
)

// WithBackoff wraps g so that, once a call answers *RateLimitedError, no call of Start,
// ClosePayment, Refund or State reaches the provider until the provider's Retry-After
// (DefaultRateLimitWait when it named none, at most MaxRateLimitWait) has passed on clock: each
// answers *BackedOffError at once. Name and Parse (local work, no provider call) pass through.
func WithBackoff(g Gateway, clock seckill.Clock) Gateway {
	if clock == nil {
		clock = seckill.SystemClock{}
	}
	return &backoffGateway{Gateway: g, clock: clock}
}

type backoffGateway struct {
	Gateway
	clock seckill.Clock
	until atomic.Int64 // Unix nanoseconds before which the provider is not called
}

// Unwrap is the gateway behind the backoff.
func (b *backoffGateway) Unwrap() Gateway { return b.Gateway }

func (b *backoffGateway) Start(ctx context.Context, req StartRequest) (seckill.PaymentIntent, error) {
	if err := b.wait(); err != nil {
		return seckill.PaymentIntent{}, err
	}
	intent, err := b.Gateway.Start(ctx, req)
	return intent, b.note(err)
}

func (b *backoffGateway) ClosePayment(ctx context.Context, paymentID string) error {
	if err := b.wait(); err != nil {
		return err
	}
	return b.note(b.Gateway.ClosePayment(ctx, paymentID))
}

func (b *backoffGateway) Refund(ctx context.Context, req RefundRequest) (RefundResult, error) {
	if err := b.wait(); err != nil {
		return RefundResult{}, err
	}
	res, err := b.Gateway.Refund(ctx, req)
	return res, b.note(err)
}

func (b *backoffGateway) State(ctx context.Context, paymentID string) (State, error) {
	if err := b.wait(); err != nil {
		return "", err
	}
	st, err := b.Gateway.State(ctx, paymentID)
	return st, b.note(err)
}

// wait answers *BackedOffError while the provider is backed off, else nil.
func (b *backoffGateway) wait() error {
	left := time.Duration(b.until.Load() - b.clock.Now().UnixNano())
	if left <= 0 {
		return nil
	}
	return backedOff(b.Gateway.Name(), left)
}

// note starts a backoff when err is the provider's "too many requests", and answers err as
// *BackedOffError then, so that this caller too is told when to come back. A later end than
// the one set already wins; an earlier one changes nothing.
func (b *backoffGateway) note(err error) error {
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		return err
	}
	wait := rl.RetryAfter
	if wait <= 0 {
		wait = DefaultRateLimitWait
	}
	wait = min(wait, MaxRateLimitWait)
	end := b.clock.Now().Add(wait).UnixNano()
	for {
		cur := b.until.Load()
		if cur >= end || b.until.CompareAndSwap(cur, end) {
			break
		}
	}
	return fmt.Errorf("%w: %w", backedOff(b.Gateway.Name(), wait), err)
}

func backedOff(name string, wait time.Duration) *BackedOffError {
	return &BackedOffError{Wait: wait, err: seckill.Errorf(seckill.CodeUnavailable,
		"the payment gateway %s is over its rate limit; retry in %d s", name, RetryAfterSeconds(wait))}
}

// RetryAfterSeconds is wait as a Retry-After header's whole seconds, rounded up, at least 1.
func RetryAfterSeconds(wait time.Duration) int64 {
	return max(1, int64((wait+time.Second-1)/time.Second))
}

// ParseRetryAfter reads a Retry-After header (RFC 9110: delay seconds, or an HTTP date, read
// against now); 0 when it is missing or malformed.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(MaxRateLimitWait/time.Second)+1)) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
