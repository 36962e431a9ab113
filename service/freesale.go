package service

import (
	"context"

	"github.com/seckill-go/seckill"
)

// free reports whether r is a hold of a free sale: nothing to pay.
func free(r seckill.Reservation) bool { return r.AmountCents == 0 }

// confirmFree pays a free hold (held, or paid by its own confirmation before) as ApplyPayment
// applies a gateway's payment, and answers the reservation paid. A confirmation that came too
// late (the hold expired or was cancelled a moment after it was read, and the late rule did not
// apply it) is hold_expired.
func (s *Service) confirmFree(ctx context.Context, r seckill.Reservation) (seckill.PaymentIntent, error) {
	p := seckill.PaymentConfirmation{PaymentID: seckill.FreePaymentID(r.ID), ReservationID: r.ID, Gateway: seckill.FreeGateway}
	result, err := s.ApplyPayment(ctx, p, true)
	if err != nil {
		return seckill.PaymentIntent{}, err
	}
	if result != seckill.PaymentApplied && result != seckill.PaymentLateApplied && result != seckill.PaymentDuplicate {
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeHoldExpired, "reservation %s: its hold ended before it was confirmed", r.ID)
	}
	paid, err := s.inv.Reservation(ctx, r.ID)
	if err != nil {
		return seckill.PaymentIntent{}, err
	}
	return seckill.PaymentIntent{PaymentID: p.PaymentID, Reservation: &paid}, nil
}
