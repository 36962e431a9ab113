package payment

import (
	"context"
	"net/http"
	"time"

	"github.com/seckill-go/seckill"
)

// This file is the MockGateway's side of the Gateway seam: Start, Parse, ClosePayment, Refund
// and State over the per-payment record that CreatePayment makes and the delivery goroutine
// settles.

var _ Gateway = (*MockGateway)(nil)

// mockPayment is one payment as the mock provider sees it. Guarded by MockGateway.mu.
type mockPayment struct {
	state       State
	amountCents int64
}

// Name is "mock".
func (g *MockGateway) Name() string { return MockName }

// Start is CreatePayment for a StartRequest, idempotent by IdempotencyKey: a second Start with
// the same key returns the first payment and starts nothing. The hold's expiry is not enforced
// by the mock (the bench makes late payments on purpose); whoever ends the hold calls ClosePayment.
func (g *MockGateway) Start(ctx context.Context, req StartRequest) (seckill.PaymentIntent, error) {
	if req.IdempotencyKey == "" {
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeInvalidArgument, "start payment: no idempotency key")
	}
	g.startMu.Lock()
	defer g.startMu.Unlock()
	if intent, ok := g.byKey[req.IdempotencyKey]; ok {
		return intent, nil
	}
	r := seckill.Reservation{ID: req.ReservationID, UserID: req.UserID, AmountCents: req.AmountCents, Status: seckill.StatusHeld}
	if !req.ExpiresAt.IsZero() {
		exp := req.ExpiresAt
		r.ExpiresAt = &exp
	}
	intent, err := g.CreatePayment(ctx, r)
	if err != nil {
		return seckill.PaymentIntent{}, err
	}
	g.byKey[req.IdempotencyKey] = intent
	return intent, nil
}

// Parse verifies and parses our signed webhook, as the built-in scheme does, with the mock's
// secret.
func (g *MockGateway) Parse(header http.Header, body []byte, now time.Time) (Notification, error) {
	return parseSigned(g.cfg.Secret, header, body, now)
}

// settle is the delivery goroutine's moment of payment: an open payment becomes succeeded (or,
// if it failed, closed). It reports whether the webhook is to be sent: not if the payment was
// closed first, so a closed payment never succeeds.
func (g *MockGateway) settle(id string, succeeded bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.payments[id]
	switch {
	case p == nil: // cannot happen: CreatePayment records every payment it starts
		return true
	case p.state == StateOpen && succeeded:
		p.state = StateSucceeded
	case p.state == StateOpen:
		p.state = StateClosed
	case p.state == StateClosed:
		return false
	}
	return true
}

// Settle makes an open payment succeed now, as if the buyer had just paid, ahead of its webhook
// (which, when it is sent, reports the success). Tests use it to reach the states that
// ClosePayment and Refund answer differently. Settling a closed payment is a conflict; an
// unknown one is not_found.
func (g *MockGateway) Settle(paymentID string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.payments[paymentID]
	switch {
	case p == nil:
		return seckill.Errorf(seckill.CodeNotFound, "mock payment %s is unknown", paymentID)
	case p.state == StateOpen:
		p.state = StateSucceeded
	case p.state == StateClosed:
		return seckill.Errorf(seckill.CodeConflict, "mock payment %s is closed", paymentID)
	}
	return nil
}

// ClosePayment makes an open payment unpayable: its webhook, not yet sent, is never sent. Closing a
// closed payment is nil; a succeeded (or refunded) one is ErrAlreadyPaid; an unknown one is
// not_found.
func (g *MockGateway) ClosePayment(_ context.Context, paymentID string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.payments[paymentID]
	switch {
	case p == nil:
		return seckill.Errorf(seckill.CodeNotFound, "mock payment %s is unknown", paymentID)
	case p.state == StateOpen:
		p.state = StateClosed
	case p.state == StateSucceeded, p.state == StateRefunded:
		return ErrAlreadyPaid
	}
	return nil
}

// Refund pays a succeeded payment back in full, once: a second Refund of the same payment id
// answers the same refund and refunds nothing more. A payment that never succeeded (open,
// closed or unknown) answers RefundFailed: there is no money to pay back. An amount other than
// the payment's (0 meaning in full) is invalid_argument.
func (g *MockGateway) Refund(_ context.Context, req RefundRequest) (RefundResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.payments[req.PaymentID]
	if p == nil || (p.state != StateSucceeded && p.state != StateRefunded) {
		return RefundResult{Status: RefundFailed}, nil
	}
	if req.AmountCents != 0 && req.AmountCents != p.amountCents {
		return RefundResult{}, seckill.Errorf(seckill.CodeInvalidArgument,
			"refund of %d cents for a payment of %d cents: refunds are in full", req.AmountCents, p.amountCents)
	}
	if p.state == StateSucceeded {
		p.state = StateRefunded
		g.refunds.Add(1)
	}
	return RefundResult{RefundID: "re_" + req.PaymentID, Status: RefundSucceeded}, nil
}

// State reports a payment's state; an id the mock never started is StateUnknown (no error).
func (g *MockGateway) State(_ context.Context, paymentID string) (State, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.payments[paymentID]; p != nil {
		return p.state, nil
	}
	return StateUnknown, nil
}
