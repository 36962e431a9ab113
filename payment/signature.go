package payment

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
)

// SignatureHeader is the HTTP header that carries the webhook signature. The name is part of the
// wire contract with the gateway (docs/API.md).
const SignatureHeader = "Seckill-Signature"

// Tolerance is how far the signed timestamp may be from the receiver's clock, either way. It
// bounds how long a captured webhook can be replayed, while leaving room for clock skew and for
// a delivery that sat in the gateway's queue. Each retry is signed afresh, so a retried webhook
// does not grow stale.
const Tolerance = 5 * time.Minute

// signatureScheme is the only scheme this package signs and accepts. Other schemes in a header
// are ignored so that a gateway can add a new one (and sign with both) during a migration.
const signatureScheme = "v1"

// maxHeaderBytes bounds the work Verify does for one header. A real header is under 100 bytes;
// a few rotated secrets still fit easily.
const maxHeaderBytes = 8 << 10

// Timestamps outside [minUnix, maxUnix] (1970 to the end of year 9999) are rejected as
// malformed: no real gateway sends them, and keeping t in this range keeps the time arithmetic
// of the staleness check far from overflow.
const (
	minUnix = 0
	maxUnix = 253402300799
)

// Sign returns the value of the Seckill-Signature header for body, signed at time t:
// "t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of "<t>.<body>">". The timestamp is inside
// the MAC so that an attacker cannot refresh a captured webhook's timestamp to replay it.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + "," + signatureScheme + "=" + hex.EncodeToString(mac(secret, ts, body))
}

// mac is HMAC-SHA256 over "<ts>.<body>". ts is the timestamp exactly as it appears in the header,
// so that the receiver authenticates the very bytes the sender signed.
func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a Seckill-Signature header against the raw request body, at time now. It
// returns nil when the header's timestamp is within Tolerance of now (either way) and at least
// one of its v1 signatures matches; otherwise a *seckill.Error with CodeInvalidSignature whose
// message says what was wrong (missing, malformed, stale, in the future, or no match).
//
// The header is parsed leniently where leniency cannot weaken it: fields may come in any order,
// whitespace around fields, keys and values is ignored, empty fields are skipped, unknown
// schemes are ignored and several v1 values may be present (any match passes, which lets a
// sender sign with an old and a new secret while the secret is rotated). It is strict where it
// matters: exactly one t, and v1 values are compared as the lowercase hex that Sign produces,
// in constant time (hmac.Equal), so any change to a v1 value fails.
//
// An empty secret is refused: anyone can compute an HMAC with an empty key, so a receiver that
// was started without SECKILL_PAYMENT_SECRET must not accept webhooks at all.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	if len(secret) == 0 {
		return seckill.Errorf(seckill.CodeInvalidSignature, "webhook secret is not configured; refusing every webhook")
	}
	ts, sigs, err := parseHeader(header)
	if err != nil {
		return err
	}
	n, perr := strconv.ParseInt(ts, 10, 64)
	if perr != nil {
		return malformed("timestamp t is not an integer number of seconds")
	}
	if n < minUnix || n > maxUnix {
		return malformed("timestamp t is out of range")
	}
	// Staleness first: it is cheap, and a replayed webhook is the common failure worth naming.
	switch age := now.Sub(time.Unix(n, 0)); {
	case age > Tolerance:
		return seckill.Errorf(seckill.CodeInvalidSignature,
			"signature timestamp is %s old, more than the %s tolerance (replayed or delayed webhook, or clock skew)",
			age.Truncate(time.Second), Tolerance)
	case age < -Tolerance:
		return seckill.Errorf(seckill.CodeInvalidSignature,
			"signature timestamp is %s in the future, more than the %s tolerance (clock skew)",
			(-age).Truncate(time.Second), Tolerance)
	}
	want := []byte(hex.EncodeToString(mac(secret, ts, body)))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return seckill.Errorf(seckill.CodeInvalidSignature,
		"no %s signature matches the body (wrong secret or modified body)", signatureScheme)
}

// parseHeader splits a header into its timestamp (as written) and its v1 values. It never echoes
// header content into error messages: the header is attacker-controlled and may be huge.
func parseHeader(header string) (ts string, sigs []string, err error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", nil, seckill.Errorf(seckill.CodeInvalidSignature, "missing %s header", SignatureHeader)
	}
	if len(header) > maxHeaderBytes {
		return "", nil, malformed("header is longer than %d bytes", maxHeaderBytes)
	}
	haveT := false
	i := 0
	for part := range strings.SplitSeq(header, ",") {
		i++
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return "", nil, malformed("field %d is not key=value", i)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "t":
			if haveT {
				return "", nil, malformed("more than one timestamp t")
			}
			haveT = true
			ts = v
		case signatureScheme:
			sigs = append(sigs, v)
		}
	}
	if !haveT || ts == "" {
		return "", nil, malformed("no timestamp t")
	}
	if len(sigs) == 0 {
		return "", nil, malformed("no %s signature", signatureScheme)
	}
	return ts, sigs, nil
}

func malformed(format string, args ...any) error {
	e := seckill.Errorf(seckill.CodeInvalidSignature, format, args...)
	e.Message = "malformed " + SignatureHeader + " header: " + e.Message
	return e
}
