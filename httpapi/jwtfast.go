package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"slices"
	"strings"
	"sync"
	"time"
)

// The fast path of user authentication. golang-jwt decodes a token's header into a map and its
// claims into jwt.RegisteredClaims through encoding/json's reflection; on the buy path of a
// rush that was a sixth of the server's CPU. Nearly every token has the one shape MintToken
// writes: the header {"alg":"HS256","typ":"JWT"} and compact claims with sub, exp and iat.
// fastUser accepts such a token only when golang-jwt, with the options userOf gives it, would
// accept it too and return the same subject; for anything else (another header, a claim it does
// not know, a number that is not a plain integer, an escape in a string, a bad signature, an
// expired token...) it declines and userOf asks golang-jwt, whose verdict and error message
// are then exactly what they always were. So the fast path can only be wrong by declining,
// which costs time, never a check. The differential tests and the fuzzer in jwtfast_test.go
// compare the two on tokens built to probe every branch.

// jwtLeeway is the clock skew allowed on exp and nbf, on both paths.
const jwtLeeway = 5 * time.Second

// hs256Header is the base64url header segment of every token golang-jwt signs with HS256
// (MintToken): {"alg":"HS256","typ":"JWT"}. golang-jwt would decode it to alg HS256, the one
// method userOf allows.
const hs256Header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

// hs256SigLen is the length of an HMAC-SHA256 signature in unpadded base64url.
const hs256SigLen = 43

// maxFastClaims bounds the claims segment the fast path decodes; longer ones go to golang-jwt.
const maxFastClaims = 512

// fastUser returns the subject of tok if it has the common shape and golang-jwt would accept
// it at now with secret (HS256 only, exp and nbf checked with jwtLeeway, iat not checked), and
// its subject is a valid user id (seckill.ValidID). ok false means "ask golang-jwt", not
// "refused".
func fastUser(tok string, secret []byte, now time.Time) (user string, ok bool) {
	// golang-jwt splits on '.' into exactly three segments.
	head, rest, found := strings.Cut(tok, ".")
	if !found || head != hs256Header {
		return "", false
	}
	claims, sig, found := strings.Cut(rest, ".")
	if !found || len(sig) != hs256SigLen || len(claims) > maxFastClaims || len(secret) == 0 {
		return "", false
	}
	// The signature over "<header>.<claims>", compared in its canonical encoding: a token that
	// encodes the right MAC differently (golang-jwt's decoder ignores the unused low bits of the
	// last character) is left to golang-jwt.
	sc := getScratch(secret)
	defer putScratch(sc)
	sc.mac.Reset()
	sc.in = append(sc.in[:0], tok[:len(head)+1+len(claims)]...)
	sc.mac.Write(sc.in)
	var sum [sha256.Size]byte
	var want [hs256SigLen]byte
	base64.RawURLEncoding.Encode(want[:], sc.mac.Sum(sum[:0]))
	sc.in = append(sc.in[:0], sig...)
	if subtle.ConstantTimeCompare(want[:], sc.in) != 1 {
		return "", false
	}
	// The claims, decoded as golang-jwt decodes them (base64.RawURLEncoding, not strict).
	sc.in = append(sc.in[:0], claims...)
	sc.out = slices.Grow(sc.out[:0], base64.RawURLEncoding.DecodedLen(len(claims)))
	n, err := base64.RawURLEncoding.Decode(sc.out[:cap(sc.out)], sc.in)
	if err != nil {
		return "", false
	}
	raw := sc.out[:n]
	c, ok := parseFastClaims(raw)
	if !ok {
		return "", false
	}
	// golang-jwt's Validator: valid while now < exp + leeway, and from nbf - leeway on. It
	// reads the numbers as float64 seconds, truncated to whole seconds: for the integers of up
	// to 15 digits parseFastClaims takes, that is exactly time.Unix(n, 0).
	if c.hasExp && !now.Before(time.Unix(c.exp, 0).Add(+jwtLeeway)) {
		return "", false
	}
	if c.hasNbf && now.Before(time.Unix(c.nbf, 0).Add(-jwtLeeway)) {
		return "", false
	}
	return c.sub, true
}

// fastClaims are the claims of the common token shape.
type fastClaims struct {
	sub            string
	exp, nbf       int64
	hasExp, hasNbf bool
}

// parseFastClaims reads a compact JSON object whose members are a subset of "sub" (a string of
// 1–64 of [A-Za-z0-9_.-], so a valid user id as seckill.ValidID has it, and one that needs no
// unescaping), and "exp", "nbf" and "iat" (plain non-negative integers of at most 15 digits:
// no sign, fraction, exponent or leading zero, so float64 holds them exactly), each at most
// once, with nothing before, between or after the tokens. Anything else is not ok: not because
// it is invalid, but because encoding/json might read it in a way this parser does not
// reproduce (case-insensitive member names, duplicates, escapes, null, other types...).
// Only the exact member names count: encoding/json prefers an exact match, and any other
// name is refused here. sub is required: without it golang-jwt's subject is "", never valid.
func parseFastClaims(b []byte) (fastClaims, bool) {
	var c fastClaims
	var seen [4]bool // sub, exp, nbf, iat
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return c, false
	}
	i := 1
	for {
		// "name":
		if i+6 > len(b) || b[i] != '"' || b[i+4] != '"' || b[i+5] != ':' {
			return c, false
		}
		name := string(b[i+1 : i+4]) // no allocation: compared, not kept
		i += 6
		var k int
		switch name {
		case "sub":
			k = 0
		case "exp":
			k = 1
		case "nbf":
			k = 2
		case "iat":
			k = 3
		default:
			return c, false
		}
		if seen[k] {
			return c, false
		}
		seen[k] = true
		if k == 0 {
			if i >= len(b) || b[i] != '"' {
				return c, false
			}
			j := i + 1
			for j < len(b) && j-i-1 <= 64 && idByte(b[j]) {
				j++
			}
			if j >= len(b) || b[j] != '"' || j-i-1 < 1 || j-i-1 > 64 {
				return c, false
			}
			c.sub = string(b[i+1 : j])
			i = j + 1
		} else {
			j, v := i, int64(0)
			for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-i < 16 {
				v = v*10 + int64(b[j]-'0')
				j++
			}
			if d := j - i; d < 1 || d > 15 || (d > 1 && b[i] == '0') {
				return c, false
			}
			switch k {
			case 1:
				c.exp, c.hasExp = v, true
			case 2:
				c.nbf, c.hasNbf = v, true
			}
			i = j
		}
		if i >= len(b) {
			return c, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return c, seen[0] && i == len(b)-1
		default:
			return c, false
		}
	}
}

// idByte reports whether b may appear in a user id: [A-Za-z0-9_.-].
func idByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '.' || b == '-'
}

// jwtScratch is what one verification needs: an HMAC keyed with the secret (which crypto/hmac
// resets to its keyed state without hashing the key again) and a buffer.
type jwtScratch struct {
	key     []byte
	mac     hash.Hash
	in, out []byte
}

var jwtScratchPool sync.Pool

// getScratch returns a scratch keyed with secret, from the pool when the pooled one has the same
// key (a process has one auth secret; tests have a few).
func getScratch(secret []byte) *jwtScratch {
	if sc, _ := jwtScratchPool.Get().(*jwtScratch); sc != nil && hmac.Equal(sc.key, secret) {
		return sc
	}
	key := append([]byte(nil), secret...)
	return &jwtScratch{key: key, mac: hmac.New(sha256.New, key), in: make([]byte, 0, 2*maxFastClaims), out: make([]byte, 0, maxFastClaims)}
}

func putScratch(sc *jwtScratch) { jwtScratchPool.Put(sc) }
