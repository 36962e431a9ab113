package sqlstore

import "github.com/seckill-go/seckill"

// Widths, in bytes, of the string columns of the MySQL schema (migrations/mysql). SQLite and
// PostgreSQL have no such limits, but the store checks them on every dialect so that the three
// accept the same values, and so that MySQL never refuses one half way through a transaction
// (its sql_mode is strict: an over-long value is an error, not a silent truncation). Every
// value the service produces fits with room to spare.
const (
	maxSaleIDBytes         = 64   // seckill.ValidID
	maxUserIDBytes         = 64   // the JWT sub: 1–64 of [A-Za-z0-9_.-]
	maxReservationIDBytes  = 128  // seckill.ReservationID makes at most 64 + 1 + 32 = 97
	maxPaymentIDBytes      = 255  // the webhook takes up to 128 (payment.MaxIDBytes)
	maxIdempotencyKeyBytes = 128  // the Idempotency-Key header limit of httpapi
	maxRedirectURLBytes    = 2048 // a payment page's address (Stripe's are a few hundred)
)

// field is one string value to check against its column's width.
type field struct {
	name  string
	value string
	max   int
}

// checkWidths returns invalid_argument for the first value that is longer than its column.
func checkWidths(what string, fields ...field) error {
	for _, f := range fields {
		if len(f.value) > f.max {
			return seckill.Errorf(seckill.CodeInvalidArgument, "%s: %s is %d bytes, longer than the %d the store keeps",
				what, f.name, len(f.value), f.max)
		}
	}
	return nil
}
