// Package admission is the waiting room's admission token (docs/API.md "The waiting room"): a
// signed, short-lived proof that the room admitted a user to a sale, which GET
// /api/v1/sales/{id}/path requires for a sale with a room. It is the purchase token's MAC
// (package purchasetoken: HMAC-SHA256 over sale id, user id and a time) under a key of its own,
// over the token's expiry instead of the sale's start, with the expiry in front so that the
// server, which keeps no record of it, can check it:
//
//	<expiry, Unix milliseconds>.<base64url(HMAC-SHA256(key, sale ‖ 0 ‖ user ‖ 0 ‖ expiry ms))>
//
// Every instance that shares SECKILL_AUTH_SECRET derives the same key (Key), so each accepts
// the others' tokens.
package admission

import (
	"crypto/hmac"
	"crypto/sha256"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill/internal/purchasetoken"
)

// Key derives the admission key from SECKILL_AUTH_SECRET: HMAC-SHA256(secret, "seckill
// admission v1"), distinct from the purchase-path key (another label), so that neither token
// can stand for the other.
func Key(authSecret []byte) []byte {
	mac := hmac.New(sha256.New, authSecret)
	mac.Write([]byte("seckill admission v1"))
	return mac.Sum(nil)
}

// maxLen bounds a token: 16 digits of milliseconds, a dot and 43 characters of MAC.
const maxLen = 16 + 1 + 43

// New is the admission token of user to sale, valid until expires (truncated to milliseconds).
func New(key []byte, saleID, userID string, expires time.Time) string {
	ms := expires.UnixMilli()
	return strconv.FormatInt(ms, 10) + "." + purchasetoken.New(key, saleID, userID, time.UnixMilli(ms))
}

// Check reports whether token is an admission token of user to sale that has not expired at
// now, and when it expires. The MAC is compared in constant time (purchasetoken.Valid); a
// token longer than any New makes is refused before anything is computed.
func Check(key []byte, saleID, userID, token string, now time.Time) (expires time.Time, ok bool) {
	if len(token) > maxLen {
		return time.Time{}, false
	}
	msText, mac, found := strings.Cut(token, ".")
	if !found || msText == "" || msText[0] == '-' || msText[0] == '+' {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(msText, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	expires = time.UnixMilli(ms)
	valid := purchasetoken.Valid(key, saleID, userID, expires, mac)
	if !valid || !now.Before(expires) {
		return time.Time{}, false
	}
	return expires, true
}
