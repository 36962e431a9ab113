package httpapi

import (
	"net/http"

	"github.com/seckill-go/seckill"
)

// codeInfo is the one table that maps the error codes of the vocabulary (seckill.Code) to HTTP
// statuses and titles (docs/API.md, "Errors"). It is the HTTP API's: the vocabulary knows no
// transport.
var codeInfo = map[seckill.Code]struct {
	status int
	title  string
}{
	seckill.CodeInternal:          {http.StatusInternalServerError, "Internal error"},
	seckill.CodeInvalidArgument:   {http.StatusBadRequest, "Invalid argument"},
	seckill.CodeNotFound:          {http.StatusNotFound, "Not found"},
	seckill.CodeConflict:          {http.StatusConflict, "Conflict"},
	seckill.CodeSoldOut:           {http.StatusConflict, "Sold out"},
	seckill.CodeLimitExceeded:     {http.StatusConflict, "Limit exceeded"},
	seckill.CodeQueueFull:         {http.StatusConflict, "Queue full"},
	seckill.CodeNotStarted:        {http.StatusTooEarly, "Not started"},
	seckill.CodeEnded:             {http.StatusGone, "Ended"},
	seckill.CodeInvalidToken:      {http.StatusForbidden, "Invalid token"},
	seckill.CodeHoldExpired:       {http.StatusConflict, "Hold expired"},
	seckill.CodeRateLimited:       {http.StatusTooManyRequests, "Rate limited"},
	seckill.CodeUnauthorized:      {http.StatusUnauthorized, "Unauthorized"},
	seckill.CodeForbidden:         {http.StatusForbidden, "Forbidden"},
	seckill.CodeTooLarge:          {http.StatusRequestEntityTooLarge, "Too large"},
	seckill.CodeUnavailable:       {http.StatusServiceUnavailable, "Unavailable"},
	seckill.CodeInvalidSignature:  {http.StatusUnauthorized, "Invalid signature"},
	seckill.CodeAdmissionRequired: {http.StatusForbidden, "Admission required"},
	seckill.CodePowRequired:       {http.StatusForbidden, "Proof of work required"},
	seckill.CodeInvalidPow:        {http.StatusBadRequest, "Invalid proof of work"},
}

// statusOf is the HTTP status for a code (500 for unknown codes).
func statusOf(c seckill.Code) int {
	if i, ok := codeInfo[c]; ok {
		return i.status
	}
	return http.StatusInternalServerError
}

// titleOf is the short human title for a code, a problem's title.
func titleOf(c seckill.Code) string {
	if i, ok := codeInfo[c]; ok {
		return i.title
	}
	return "Internal error"
}
