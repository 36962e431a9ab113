package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
)

// Error is an answer of the API other than 2xx: its RFC 9457 problem document (docs/API.md,
// Errors). Switch on Code, which is one of the root package's seckill.Code constants
// (seckill.CodeSoldOut, seckill.CodeUnavailable…), never on Title or Detail:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == seckill.CodeSoldOut { … }
//
// or, shorter, client.CodeOf(err) == seckill.CodeSoldOut. errors.As also finds a
// *seckill.Error with the same code and detail in it, so seckill.ErrorCode reads it too.
type Error struct {
	Method, Path string       // the request
	Status       int          // the HTTP status
	Code         seckill.Code // the problem's code; "" when the answer was no problem document
	Title        string       // the code's short human title ("Sold out")
	Detail       string       // a human-readable message; may change between versions
	// RetryAfter is the answer's Retry-After (0 when it named none): how long the server asks
	// the caller to wait before retrying a 503 unavailable or a 429 rate_limited.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("seckill: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Code != "" {
		s += " " + string(e.Code)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// As lets errors.As find a *seckill.Error in e: the code and the detail, as the server had them.
func (e *Error) As(target any) bool {
	if t, ok := target.(**seckill.Error); ok && e.Code != "" {
		*t = &seckill.Error{Code: e.Code, Message: e.Detail}
		return true
	}
	return false
}

// Temporary reports whether the server asked for a retry: 503 unavailable or 429 rate_limited,
// to be retried after RetryAfter.
func (e *Error) Temporary() bool {
	return e.Status == 503 || e.Status == 429
}

// CodeOf is the code of the *Error in err's chain, "" when there is none (nil, a transport
// error, a cancelled context).
func CodeOf(err error) seckill.Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// problem is the wire form of an error answer.
type problem struct {
	Title  string       `json:"title"`
	Detail string       `json:"detail"`
	Code   seckill.Code `json:"code"`
}
