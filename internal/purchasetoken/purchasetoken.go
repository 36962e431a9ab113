// Package purchasetoken is the token of the purchase path /api/v1/sales/{sale}/buy/{token}
// (docs/DECISIONS.md "Auth and limits"): an HMAC bound to its user and sale, keyed from
// SECKILL_AUTH_SECRET. The service checks it on every buy; the bench and the engine bench,
// which know the secret, compute it to skip the /path round trip. It is its own package so that
// those programs need not import the service (and the vocabulary need not hold it).
package purchasetoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"sync"
	"time"
)

// Key derives the purchase-path key from SECKILL_AUTH_SECRET:
// HMAC-SHA256(secret, "seckill purchase path v1"). Every instance that shares the secret
// derives the same key, so each accepts the others' tokens.
func Key(authSecret []byte) []byte {
	mac := hmac.New(sha256.New, authSecret)
	mac.Write([]byte("seckill purchase path v1"))
	return mac.Sum(nil)
}

// New is the token of the purchase path /api/v1/sales/{sale}/buy/{token}:
// base64url(HMAC-SHA256(key, sale id ‖ 0 ‖ user id ‖ 0 ‖ starts_at in ms)), without padding,
// bound to its user and sale. A load generator that knows the auth secret computes it to skip
// the /path round trip.
func New(key []byte, saleID, userID string, startsAt time.Time) string {
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(purchaseMAC(key, saleID, userID, startsAt, sum[:0]))
}

// tokenLen is the length of every purchase token: 32 bytes in unpadded base64url.
var tokenLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// Valid reports, in constant time, whether token is New(key, saleID, userID, startsAt). It
// allocates nothing: it runs on every buy.
func Valid(key []byte, saleID, userID string, startsAt time.Time, token string) bool {
	var sum [sha256.Size]byte
	var want [64]byte
	base64.RawURLEncoding.Encode(want[:], purchaseMAC(key, saleID, userID, startsAt, sum[:0]))
	if len(token) != tokenLen {
		return false
	}
	var diff byte
	for i := range tokenLen {
		diff |= want[i] ^ token[i]
	}
	return diff == 0
}

// keyedMAC is an HMAC-SHA256 keyed with key (crypto/hmac resets it to its keyed state without
// hashing the key again) and a buffer for the message.
type keyedMAC struct {
	key []byte
	mac hash.Hash
	msg []byte
}

// purchaseMACs pools keyedMACs: a process has one purchase key (tests a few), and a pooled MAC
// spares every buy an HMAC's allocation and key schedule.
var purchaseMACs sync.Pool

// purchaseMAC appends to sum the HMAC of a purchase token's message.
func purchaseMAC(key []byte, saleID, userID string, startsAt time.Time, sum []byte) []byte {
	m, _ := purchaseMACs.Get().(*keyedMAC)
	if m == nil || !hmac.Equal(m.key, key) {
		k := bytes.Clone(key)
		m = &keyedMAC{key: k, mac: hmac.New(sha256.New, k)}
	}
	defer purchaseMACs.Put(m)
	m.mac.Reset()
	b := append(m.msg[:0], saleID...)
	b = append(b, 0)
	b = append(b, userID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, startsAt.UnixMilli(), 10)
	m.msg = b
	m.mac.Write(b)
	return m.mac.Sum(sum)
}
