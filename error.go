package seckill

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code; it is the `code` field of problem+json responses. Its
// HTTP status and title are the HTTP API's (httpapi's table).
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
	// CodeAdmissionRequired: a sale with a waiting room hands its purchase path only with a
	// valid admission token (docs/API.md "The waiting room").
	CodeAdmissionRequired Code = "admission_required"
	// CodePowRequired: joining this waiting room needs a proof of work, and none was sent.
	CodePowRequired Code = "pow_required"
	// CodeInvalidPow: the proof of work sent is not a solution of a challenge issued to this
	// user for this sale, or its challenge expired.
	CodeInvalidPow Code = "invalid_pow"
)

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
