package httpapi

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/seckill-go/seckill"
)

// The body of a buy. Nearly every client sends {"quantity":N} or nothing; on the buy path of a
// rush, reading that through io.ReadAll and a json.Decoder allocated about 1.5 KiB per buy and
// cost a twentieth of the server's CPU. Those exact bodies are read here, from a pooled buffer,
// without encoding/json; anything else goes to the strict decoder as before (decodeJSON), so
// what is accepted, refused and reported does not change.

// smallBody is the size of the pooled buffer; longer bodies (up to MaxBody) are read whole.
const smallBody = 128

var smallBodies = sync.Pool{New: func() any { return new([smallBody]byte) }}

// buyQuantity reads the buy's body and returns the quantity it asks for: 1 for an empty body.
// Errors are those of decodeBody: too_large above MaxBody, invalid_argument otherwise.
func buyQuantity(w http.ResponseWriter, r *http.Request) (int, error) {
	if err := tooLarge(w, r); err != nil {
		return 0, err
	}
	buf := smallBodies.Get().(*[smallBody]byte)
	defer smallBodies.Put(buf)
	body := http.MaxBytesReader(w, r.Body, MaxBody)
	n, err := io.ReadFull(body, buf[:])
	b := buf[:n]
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF): // all of it
	case err != nil:
		return 0, bodyError(err)
	default: // it fills the buffer: read the rest
		rest, err := io.ReadAll(body)
		if err != nil {
			return 0, bodyError(err)
		}
		b = append(b[:n:n], rest...)
	}
	if len(b) == 0 {
		return 1, nil
	}
	if q, ok := fastQuantity(b); ok {
		return q, nil
	}
	var in BuyBody
	if err := decodeJSON(b, &in, true); err != nil {
		return 0, err
	}
	if in.Quantity == nil {
		return 1, nil
	}
	return *in.Quantity, nil
}

// bodyError is the error for a body that could not be read: too_large above MaxBody.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return seckill.Errorf(seckill.CodeTooLarge, "request body is larger than %d bytes", MaxBody)
	}
	return seckill.Errorf(seckill.CodeInvalidArgument, "reading body: %v", err)
}

// fastQuantity reads exactly `{"quantity":N}`, N a decimal of 1–9 digits without a leading
// zero (so it fits an int and encoding/json reads the same number). Anything else, even what
// is valid JSON (spaces, other case, a leading zero, a sign), is not ok and left to the strict
// decoder.
func fastQuantity(b []byte) (int, bool) {
	const prefix = `{"quantity":`
	if len(b) < len(prefix)+2 || string(b[:len(prefix)]) != prefix || b[len(b)-1] != '}' {
		return 0, false
	}
	digits := b[len(prefix) : len(b)-1]
	if len(digits) < 1 || len(digits) > 9 || digits[0] == '0' {
		return 0, false
	}
	q := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		q = q*10 + int(c-'0')
	}
	return q, true
}
