// What the scripts answer, decoded: a reply's code and fields, a sale_reply and a res_reply
// (common.lua), and the small conversions every room uses.

package redisinv

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/seckill-go/seckill"
)

// reply is a script's answer: its first element is "ok" or a domain code.
type reply []rueidis.RedisMessage

func (r reply) code() string { return r.str(0) }

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	s, _ := r[i].ToString()
	return s
}

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	n, _ := r[i].AsInt64()
	return n
}

// saleOf decodes a sale_reply (common.lua).
func saleOf(id string, r reply) (seckill.Sale, seckill.StockState) {
	s := seckill.Sale{
		ID: id, Name: r.str(1), PriceCents: r.int(2), Stock: int(r.int(3)), Holdback: int(r.int(4)),
		StartsAt: fromMillis(r.int(5)), EndsAt: fromMillis(r.int(6)), PerUserLimit: int(r.int(7)),
		HoldSeconds: int(r.int(8)), QueueLimit: int(r.int(9)), CreatedAt: fromMillis(r.int(10)),
		Currency: r.str(15), Listed: r.str(16) != "0", Segments: max(int(r.int(17)), 1),
	}
	st := seckill.StockState{
		Sellable: s.Sellable(), Available: int(r.int(11)), Held: int(r.int(12)), Sold: int(r.int(13)),
		Queued: int(r.int(14)),
	}
	return s, st
}

// reservationOf decodes a res_reply (common.lua) of sale saleID.
func reservationOf(saleID string, r reply) seckill.Reservation {
	v := seckill.Reservation{
		ID: saleID + "-" + r.str(2), SaleID: saleID, Status: seckill.ReservationStatus(r.str(3)),
		UserID: r.str(4), Quantity: int(r.int(5)), Seq: uint64(r.int(7)), AmountCents: r.int(8),
		CreatedAt: fromMillis(r.int(9)), PaymentID: r.str(10), IdempotencyKey: r.str(11),
		Position: int(r.int(12)),
	}
	if v.Status == seckill.StatusHeld {
		t := fromMillis(r.int(6))
		v.ExpiresAt = &t
	}
	return v
}

func unexpected(script string, r reply) error {
	return fmt.Errorf("redisinv: %s script: unexpected reply %q", script, r.code())
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func itoa(n int) string { return strconv.Itoa(n) }

func i64toa(n int64) string { return strconv.FormatInt(n, 10) }

// errNotFound is the not_found error for a reservation id.
func errNotFound(id string) error {
	return seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
}

// isCode reports whether err is a domain error with code c.
func isCode(err error, c seckill.Code) bool {
	var de *seckill.Error
	return errors.As(err, &de) && de.Code == c
}

// boolArg is a flag as the scripts take it: "1" or "0".
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
