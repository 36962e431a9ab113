package seckill

import (
	"encoding/hex"
	"strings"
	"time"
)

// ReservationStatus is where a reservation is in its life (docs/MODEL.md).
type ReservationStatus string

// Reservation statuses.
const (
	StatusQueued         ReservationStatus = "queued"
	StatusHeld           ReservationStatus = "held"
	StatusPaid           ReservationStatus = "paid"
	StatusCancelled      ReservationStatus = "cancelled"
	StatusExpired        ReservationStatus = "expired"
	StatusRejected       ReservationStatus = "rejected"
	StatusRefundRequired ReservationStatus = "refund_required"
)

// Rank orders statuses so that stored status only moves forward: queued < held < the ends of an
// unpaid reservation (cancelled, expired, rejected) < paid and refund_required, which are final.
// A held reservation can come from a queued one; an expired one can still become paid (late).
func (s ReservationStatus) Rank() int {
	switch s {
	case StatusQueued:
		return 1
	case StatusHeld:
		return 2
	case StatusCancelled, StatusExpired, StatusRejected:
		return 3
	case StatusPaid, StatusRefundRequired:
		return 4
	}
	return 0
}

// Valid reports whether s is a known status.
func (s ReservationStatus) Valid() bool { return s.Rank() > 0 }

// Reservation is a buyer's admission ticket: a hold on units, or a place in the queue.
type Reservation struct {
	ID          string            `json:"id"`
	SaleID      string            `json:"sale_id"`
	UserID      string            `json:"user_id"`
	Quantity    int               `json:"quantity"`
	Status      ReservationStatus `json:"status"`
	ExpiresAt   *time.Time        `json:"expires_at,omitempty"` // only while held
	Position    int               `json:"position,omitempty"`   // only while queued: 1-based place
	AmountCents int64             `json:"amount_cents"`
	PaymentID   string            `json:"-"` // the payment that made it paid
	CreatedAt   time.Time         `json:"created_at"`
	// Seq orders reservations of one sale by arrival, so a restart can rebuild the FIFO queue.
	Seq uint64 `json:"-"`
	// IdempotencyKey is the buyer's key, if any.
	IdempotencyKey string `json:"-"`
}

// ReservationID builds a reservation id "<sale id>-<hex of random>". Carrying the sale id lets an
// engine find a reservation's sale (and on Redis its hash slot) without a global index. The 16
// bytes are the engines' choice: both write 8 bytes of the sale's arrival sequence and 8 bytes
// from crypto/rand, which make ids unguessable.
func ReservationID(saleID string, random []byte) string {
	return saleID + "-" + hex.EncodeToString(random)
}

// SaleOfReservation returns the sale id inside a reservation id made by ReservationID.
func SaleOfReservation(id string) (string, bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || len(id)-i-1 != 32 {
		return "", false
	}
	return id[:i], true
}
