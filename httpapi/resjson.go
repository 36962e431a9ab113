package httpapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// The answer of a buy is a Reservation; encoding/json's reflection, its escaping pass and its
// time formatting were about 5 % of the server's time in a rush. appendReservation writes the
// same bytes directly for the values it can prove need no escaping, and leaves everything else
// to encoding/json (FuzzAppendReservation holds the two to byte equality).

// jsonBufs recycles the buffers of reservation answers.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeReservation is writeJSON for a Reservation.
func writeReservation(w http.ResponseWriter, status int, r seckill.Reservation) error {
	bp := jsonBufs.Get().(*[]byte)
	defer jsonBufs.Put(bp)
	b, ok := appendReservation((*bp)[:0], &r)
	if !ok {
		return writeJSON(w, status, r)
	}
	*bp = append(b, '\n')
	writeJSONBody(w, status, *bp)
	return nil
}

// appendReservation appends r as json.Marshal would, or reports false when a string needs
// escaping or a time is outside the years 0–9999 (json.Marshal then escapes, or refuses).
func appendReservation(b []byte, r *seckill.Reservation) ([]byte, bool) {
	ok := plainJSON(r.ID) && plainJSON(r.SaleID) && plainJSON(r.UserID) && plainJSON(string(r.Status)) &&
		timeJSON(r.CreatedAt) && (r.ExpiresAt == nil || timeJSON(*r.ExpiresAt))
	if !ok {
		return b, false
	}
	b = append(b, `{"id":"`...)
	b = append(b, r.ID...)
	b = append(b, `","sale_id":"`...)
	b = append(b, r.SaleID...)
	b = append(b, `","user_id":"`...)
	b = append(b, r.UserID...)
	b = append(b, `","quantity":`...)
	b = strconv.AppendInt(b, int64(r.Quantity), 10)
	b = append(b, `,"status":"`...)
	b = append(b, r.Status...)
	b = append(b, '"')
	if r.ExpiresAt != nil {
		b = append(b, `,"expires_at":"`...)
		b = r.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if r.Position != 0 {
		b = append(b, `,"position":`...)
		b = strconv.AppendInt(b, int64(r.Position), 10)
	}
	b = append(b, `,"amount_cents":`...)
	b = strconv.AppendInt(b, r.AmountCents, 10)
	b = append(b, `,"created_at":"`...)
	b = r.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...), true
}

// plainJSON reports whether json.Marshal writes s as it is between quotes: ASCII from space
// to DEL without '"', '\\' or the characters it escapes for HTML ('<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// timeJSON reports whether time.Time.MarshalJSON writes t as its RFC 3339 text: a year from 0
// to 9999 (it refuses others), and a zone offset of whole minutes within a day (RFC 3339 has
// no seconds in offsets; MarshalJSON refuses the rest).
func timeJSON(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off%60 == 0 && off > -24*3600 && off < 24*3600
}
