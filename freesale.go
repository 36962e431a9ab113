package seckill

import "context"

// A free sale (price_cents 0, a giveaway) has nothing to pay, so no gateway is involved: the
// buyer confirms the hold (POST /pay on it), and the hold is paid at once through the same
// ConfirmPayment and payment record as a gateway's payment, with amount 0. Its payment id is
// derived from the reservation, so that a confirm repeated (a retry, a double click, two
// instances) is exactly a duplicate of the first.

// FreeGateway is the gateway recorded with a free hold's confirmation.
const FreeGateway = "free"

// FreePaymentID is the payment id of a free hold's confirmation: "free_" + the reservation id.
func FreePaymentID(reservationID string) string { return "free_" + reservationID }

// free reports whether r is a hold of a free sale: nothing to pay.
func free(r Reservation) bool { return r.AmountCents == 0 }

// confirmFree pays a free hold (held, or paid by its own confirmation before) as ApplyPayment
// applies a gateway's payment, and answers the reservation paid. A confirmation that came too
// late (the hold expired or was cancelled a moment after it was read, and the late rule did not
// apply it) is hold_expired.
func (s *Service) confirmFree(ctx context.Context, r Reservation) (PaymentIntent, error) {
	p := PaymentConfirmation{PaymentID: FreePaymentID(r.ID), ReservationID: r.ID, Gateway: FreeGateway}
	result, err := s.ApplyPayment(ctx, p, true)
	if err != nil {
		return PaymentIntent{}, err
	}
	if result != PaymentApplied && result != PaymentLateApplied && result != PaymentDuplicate {
		return PaymentIntent{}, Errorf(CodeHoldExpired, "reservation %s: its hold ended before it was confirmed", r.ID)
	}
	paid, err := s.inv.Reservation(ctx, r.ID)
	if err != nil {
		return PaymentIntent{}, err
	}
	return PaymentIntent{PaymentID: p.PaymentID, Reservation: &paid}, nil
}
