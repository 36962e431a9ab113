package seckill

// A free sale (price_cents 0, a giveaway) has nothing to pay, so no gateway is involved: the
// buyer confirms the hold (POST /pay on it), and the hold is paid at once through the same
// ConfirmPayment and payment record as a gateway's payment, with amount 0. Its payment id is
// derived from the reservation, so that a confirm repeated (a retry, a double click, two
// instances) is exactly a duplicate of the first.

// FreeGateway is the gateway recorded with a free hold's confirmation.
const FreeGateway = "free"

// FreePaymentID is the payment id of a free hold's confirmation: "free_" + the reservation id.
func FreePaymentID(reservationID string) string { return "free_" + reservationID }
