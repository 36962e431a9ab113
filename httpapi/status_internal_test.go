package httpapi

import (
	"net/http"
	"testing"

	"github.com/seckill-go/seckill"
)

// StatusOf is statusOf for the package's external tests (the fuzzer checks each problem's
// status against the table).
var StatusOf = statusOf

// TestErrorCodesMapToDocumentedStatuses: every code answers the status docs/API.md gives it,
// and an unknown code (or an internal one) answers 500.
func TestErrorCodesMapToDocumentedStatuses(t *testing.T) {
	want := map[seckill.Code]int{
		seckill.CodeInvalidArgument: 400, seckill.CodeUnauthorized: 401, seckill.CodeInvalidSignature: 401,
		seckill.CodeForbidden: 403, seckill.CodeInvalidToken: 403, seckill.CodeNotFound: 404,
		seckill.CodeConflict: 409, seckill.CodeSoldOut: 409, seckill.CodeLimitExceeded: 409,
		seckill.CodeQueueFull: 409, seckill.CodeHoldExpired: 409, seckill.CodeEnded: 410,
		seckill.CodeTooLarge: 413, seckill.CodeNotStarted: http.StatusTooEarly, seckill.CodeRateLimited: 429,
		seckill.CodeUnavailable: 503, seckill.CodeInternal: 500, seckill.Code("bogus"): 500,
		seckill.CodeAdmissionRequired: 403, seckill.CodePowRequired: 403, seckill.CodeInvalidPow: 400,
	}
	for code, status := range want {
		if got := statusOf(code); got != status {
			t.Errorf("%s → %d, want %d", code, got, status)
		}
	}
	for code, title := range map[seckill.Code]string{seckill.CodeSoldOut: "Sold out", seckill.Code("bogus"): "Internal error"} {
		if got := titleOf(code); got != title {
			t.Errorf("%s titled %q, want %q", code, got, title)
		}
	}
}
