package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

// Problem is an RFC 9457 problem document with the extra `code` field clients switch on.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Code   seckill.Code `json:"code"`
}

// writeError renders err as problem+json using the one code → status table (status.go).
// The log line names the route pattern the request matched, never its path or query: a buy's
// path carries the buyer's purchase token. A route's failures are summarised (logsummary): the
// first is logged, then one line per period with how many more there were, so that an outage
// that fails every request writes a few lines, not one per request; /metrics counts them all.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := seckill.ErrorCode(err)
	switch code {
	case seckill.CodeInternal:
		s.troubles.Log(r.Context(), slog.LevelError, "internal "+r.Pattern, "internal error", "route", r.Pattern, "err", err)
	case seckill.CodeUnavailable:
		s.troubles.Log(r.Context(), slog.LevelWarn, "unavailable "+r.Pattern, "dependency unavailable", "route", r.Pattern, "err", err)
	}
	p := Problem{Type: "about:blank", Title: titleOf(code), Status: statusOf(code), Detail: seckill.ErrorMessage(err), Code: code}
	if code == seckill.CodeUnavailable || code == seckill.CodeRateLimited {
		w.Header().Set("Retry-After", retryAfter(err))
	}
	bp := jsonBufs.Get().(*[]byte)
	defer jsonBufs.Put(bp)
	b, ok := appendProblem((*bp)[:0], &p)
	if ok {
		*bp = b
	} else {
		b = mustJSON(p)
	}
	// No cache keeps an error: a 404 for a sale about to be created, a 503 of a dependency
	// that is back, or a 429 are each the answer of one moment (docs/API.md "Caching").
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// appendProblem appends p as json.Marshal would, or reports false when one of its strings
// needs escaping (json.Marshal then writes it). A sold-out sale answers every buy with a
// problem: through encoding/json's reflection that was a fifth of the handler's time.
// FuzzAppendProblem holds the two to byte equality.
func appendProblem(b []byte, p *Problem) ([]byte, bool) {
	if !plainJSON(p.Type) || !plainJSON(p.Title) || !plainJSON(p.Detail) || !plainJSON(string(p.Code)) {
		return b, false
	}
	b = append(b, `{"type":"`...)
	b = append(b, p.Type...)
	b = append(b, `","title":"`...)
	b = append(b, p.Title...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":"`...)
		b = append(b, p.Detail...)
		b = append(b, '"')
	}
	b = append(b, `,"code":"`...)
	b = append(b, p.Code...)
	return append(b, `"}`...), true
}

// retryAfter is the Retry-After of a refused request: the wait the error names (a payment
// gateway backed off after its provider's "too many requests", payment.BackedOffError), else 1 s.
func retryAfter(err error) string {
	var named interface{ RetryAfter() time.Duration }
	if errors.As(err, &named) {
		return strconv.FormatInt(payment.RetryAfterSeconds(named.RetryAfter()), 10)
	}
	return "1"
}

// mustJSON marshals a value that always marshals: our own plain structs of strings and numbers
// (a problem document, a ping). Anything that carries a time or a value read from a store goes
// through writeJSON, which reports a failure instead.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a programming error, caught by the tests of the few callers
	}
	return b
}

// writeJSON writes v as the answer. If v cannot be marshalled (a time outside the years
// 0–9999), nothing is written and the error is returned, so the handler answers 500 and logs it
// rather than dropping the connection.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("render answer: %w", err)
	}
	writeJSONBody(w, status, append(b, '\n'))
	return nil
}

// writeJSONBody writes b, a JSON document and its newline, as the answer.
func writeJSONBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// MaxBody is the largest request body accepted (docs/API.md: 413 too_large above 64 KiB).
const MaxBody = 64 << 10

// readBody reads the whole body, refusing more than MaxBody bytes with too_large. Handlers
// call it only after their cheap checks (auth, the route's own lookups), and the in-flight
// bounds admitted the request before that: a body that trickles in holds one of its
// client's in-flight slots, no more.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := tooLarge(w, r); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return nil, bodyError(err)
	}
	return b, nil
}

// tooLarge refuses a body whose Content-Length says it is above MaxBody before a byte of it
// is read, and has the connection closed after the answer rather than wait for that body.
func tooLarge(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength > MaxBody {
		w.Header().Set("Connection", "close")
		return bodyError(&http.MaxBytesError{Limit: MaxBody})
	}
	return nil
}

// decodeBody reads the request body (64 KiB at most) and strictly decodes it into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, v, allowEmpty)
}

// decodeJSON strictly decodes a JSON object body into v: unknown fields, trailing data and wrong
// types are invalid_argument. An empty body leaves v as it is when allowEmpty.
func decodeJSON(body []byte, v any, allowEmpty bool) error {
	if len(body) == 0 && allowEmpty {
		return nil
	}
	if err := DecodeStrict(body, v); err != nil {
		return seckill.Errorf(seckill.CodeInvalidArgument, "invalid JSON body: %v", err)
	}
	return nil
}
