package seckill

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a machine-readable error code; it is the `code` field of problem+json responses.
type Code string

// Error codes (docs/API.md).
const (
	CodeInternal         Code = "internal"
	CodeInvalidArgument  Code = "invalid_argument"
	CodeNotFound         Code = "not_found"
	CodeConflict         Code = "conflict"
	CodeSoldOut          Code = "sold_out"
	CodeLimitExceeded    Code = "limit_exceeded"
	CodeQueueFull        Code = "queue_full"
	CodeNotStarted       Code = "not_started"
	CodeEnded            Code = "ended"
	CodeInvalidToken     Code = "invalid_token"
	CodeHoldExpired      Code = "hold_expired"
	CodeRateLimited      Code = "rate_limited"
	CodeUnauthorized     Code = "unauthorized"
	CodeForbidden        Code = "forbidden"
	CodeTooLarge         Code = "too_large"
	CodeUnavailable      Code = "unavailable"
	CodeInvalidSignature Code = "invalid_signature"
)

// codeInfo is the one table that maps codes to HTTP statuses and titles.
var codeInfo = map[Code]struct {
	status int
	title  string
}{
	CodeInternal:         {http.StatusInternalServerError, "Internal error"},
	CodeInvalidArgument:  {http.StatusBadRequest, "Invalid argument"},
	CodeNotFound:         {http.StatusNotFound, "Not found"},
	CodeConflict:         {http.StatusConflict, "Conflict"},
	CodeSoldOut:          {http.StatusConflict, "Sold out"},
	CodeLimitExceeded:    {http.StatusConflict, "Limit exceeded"},
	CodeQueueFull:        {http.StatusConflict, "Queue full"},
	CodeNotStarted:       {http.StatusTooEarly, "Not started"},
	CodeEnded:            {http.StatusGone, "Ended"},
	CodeInvalidToken:     {http.StatusForbidden, "Invalid token"},
	CodeHoldExpired:      {http.StatusConflict, "Hold expired"},
	CodeRateLimited:      {http.StatusTooManyRequests, "Rate limited"},
	CodeUnauthorized:     {http.StatusUnauthorized, "Unauthorized"},
	CodeForbidden:        {http.StatusForbidden, "Forbidden"},
	CodeTooLarge:         {http.StatusRequestEntityTooLarge, "Too large"},
	CodeUnavailable:      {http.StatusServiceUnavailable, "Unavailable"},
	CodeInvalidSignature: {http.StatusUnauthorized, "Invalid signature"},
}

// HTTPStatus is the HTTP status for a code (500 for unknown codes).
func (c Code) HTTPStatus() int {
	if i, ok := codeInfo[c]; ok {
		return i.status
	}
	return http.StatusInternalServerError
}

// Title is the short human title for a code.
func (c Code) Title() string {
	if i, ok := codeInfo[c]; ok {
		return i.title
	}
	return "Internal error"
}

// Error is the one domain error type: a code and a message meant for the client.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal for other errors
// and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the client-facing message: the *Error's message, or a generic one for
// internal errors so that no internal detail leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Units is a count of units as a message says it: "1 unit", "3 units".
func Units[N ~int | ~int64](n N) string {
	if n == 1 {
		return "1 unit"
	}
	return fmt.Sprintf("%d units", n)
}
