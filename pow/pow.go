// Package pow is an optional proof-of-work in front of a sale's waiting room: hashcash-style
// challenges that the server issues without keeping any state and verifies in about a
// microsecond, while a client has to spend on average 2^bits SHA-256 hashes to answer one.
//
// A challenge names the sale, the user, the time it was issued, its difficulty and a random
// nonce, and carries an HMAC-SHA256 over all of them under a server secret: any instance
// holding the secret can verify it, none has to remember it. A solution is a decimal counter
// such that SHA-256(challenge ":" solution) starts with at least bits zero bits. Because the
// challenge is bound to one user, one sale and a short window, a solution cannot be used by
// another user, for another sale, or after the window; within the window its only use is the
// join it was made for, which the waiting room treats as idempotent per user (so no spent-set
// is kept; docs/DECISIONS.md "Proof-of-work").
//
// The storefront's solver is httpapi/web/pow.js; Solve is the same search in Go, for the
// load generator and tests.
package pow

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/seckill-go/seckill"
)

// Difficulty, lengths and clock slack. Each bounds what an outsider can make Verify do: every
// length is checked before anything is decoded or hashed.
const (
	// MinBits and MaxBits bound a challenge's difficulty. 28 bits is about 2.7·10^8 hashes:
	// tens of seconds for a native solver on one core and far beyond what a browser should be
	// asked for; docs/SECURITY.md recommends 14–18 for a storefront.
	MinBits = 1
	MaxBits = 28
	// NonceBytes is the random part of a challenge: two challenges issued to the same user for
	// the same sale in the same second still differ, so no work can be done in advance.
	NonceBytes = 16
	// MACBytes is the length of the HMAC-SHA256 tag (untruncated).
	MACBytes = sha256.Size
	// MinSecretBytes is the shortest secret Issue and Verify accept (32 recommended, like the
	// server's other HMAC keys).
	MinSecretBytes = 16
	// MaxSolutionLen bounds a solution: a decimal uint64 has at most 20 digits.
	MaxSolutionLen = 20
	// MaxSkew is how far in the future a challenge's issue time may be and still be accepted:
	// the clocks of the instances that issue and verify may differ by this much.
	MaxSkew = 5 * time.Second

	version    = 1
	headerLen  = 1 + 1 + 8 + NonceBytes // version, bits, issued (unix seconds), nonce
	maxPayload = headerLen + 1 + seckill.MaxIDBytes + 1 + seckill.MaxIDBytes
	minPayload = headerLen + 1 + 1 + 1 + 1
	// MaxChallengeLen bounds an encoded challenge (ids of 64 bytes): 251 characters of
	// unpadded base64, 6 bits each.
	MaxChallengeLen = ((maxPayload+MACBytes)*8 + 5) / 6
	minChallengeLen = ((minPayload+MACBytes)*8 + 5) / 6
)

// The errors of Verify, one per answer the HTTP layer gives: each error Verify returns for a
// client's input wraps exactly one of them (errors.Is), with a detail that names no secret.
// Any other error (a secret too short) is the server's configuration, not the client's fault.
var (
	// ErrInvalid: the challenge or the solution is malformed, was not issued by this server
	// (bad signature), or was issued for another sale or user. Fetching a new challenge is
	// the only way on.
	ErrInvalid = errors.New("pow: invalid challenge")
	// ErrExpired: the challenge is genuine but outside its window (older than maxAge, or
	// issued more than MaxSkew in the future). The client should fetch a new one.
	ErrExpired = errors.New("pow: challenge expired")
	// ErrInsufficientWork: the challenge is genuine and current, but the solution's hash does
	// not start with enough zero bits.
	ErrInsufficientWork = errors.New("pow: insufficient work")
)

var encoding = base64.RawURLEncoding.Strict()

// Challenge is one issued challenge. Its String is what the client receives and solves over;
// the HTTP layer also sends Bits so the client need not decode it.
type Challenge struct {
	Sale   string
	User   string
	Issued time.Time // whole seconds
	Bits   int
	Nonce  [NonceBytes]byte
	mac    [MACBytes]byte
}

// Issue makes a challenge for user to join sale at difficulty bits, signed with secret. It
// fails only on the server's own mistakes: a secret shorter than MinSecretBytes, bits outside
// MinBits..MaxBits, or an id that is not a valid sale or user id (seckill.ValidID).
func Issue(secret []byte, sale, user string, bits int, now time.Time) (Challenge, error) {
	if len(secret) < MinSecretBytes {
		return Challenge{}, errShortSecret
	}
	if bits < MinBits || bits > MaxBits {
		return Challenge{}, fmt.Errorf("pow: difficulty %d bits outside %d..%d", bits, MinBits, MaxBits)
	}
	if !seckill.ValidID(sale) || !seckill.ValidID(user) {
		return Challenge{}, errors.New("pow: sale and user must be valid ids")
	}
	c := Challenge{Sale: sale, User: user, Issued: time.Unix(now.Unix(), 0), Bits: bits}
	_, _ = rand.Read(c.Nonce[:]) // never fails (crypto/rand crashes the program instead)
	var buf [maxPayload]byte
	c.mac = sign(secret, c.appendPayload(buf[:0]))
	return c, nil
}

var errShortSecret = fmt.Errorf("pow: secret shorter than %d bytes", MinSecretBytes)

// String is the challenge as sent to the client: the payload and its tag in unpadded
// base64url: 102 characters for ids of 8 bytes, at most MaxChallengeLen (251).
func (c Challenge) String() string {
	var buf [maxPayload + MACBytes]byte
	b := append(c.appendPayload(buf[:0]), c.mac[:]...)
	return encoding.EncodeToString(b)
}

// appendPayload appends the signed bytes: version, bits, issued, nonce, and the two ids each
// after its length.
func (c Challenge) appendPayload(b []byte) []byte {
	b = append(b, version, byte(c.Bits))
	b = binary.BigEndian.AppendUint64(b, uint64(c.Issued.Unix()))
	b = append(b, c.Nonce[:]...)
	b = append(b, byte(len(c.Sale)))
	b = append(b, c.Sale...)
	b = append(b, byte(len(c.User)))
	return append(b, c.User...)
}

// sign is the tag of payload. The key is used as given (HMAC hashes a key longer than a block).
func sign(secret, payload []byte) (tag [MACBytes]byte) {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("seckill pow v1\x00")) // domain separation from the server's other HMACs
	m.Write(payload)
	m.Sum(tag[:0])
	return tag
}

// decode parses an encoded challenge without checking its tag; it returns the signed payload
// too. Every length is checked before a byte is decoded, and the ids must be valid ids.
func decode(s string, buf *[maxPayload + MACBytes]byte) (c Challenge, payload []byte, err error) {
	if len(s) < minChallengeLen || len(s) > MaxChallengeLen {
		return c, nil, fmt.Errorf("%w: length %d outside %d..%d", ErrInvalid, len(s), minChallengeLen, MaxChallengeLen)
	}
	n, err := encoding.Decode(buf[:], []byte(s))
	if err != nil {
		return c, nil, fmt.Errorf("%w: not base64url", ErrInvalid)
	}
	b := buf[:n]
	if n < minPayload+MACBytes || b[0] != version {
		return c, nil, fmt.Errorf("%w: unknown version or short", ErrInvalid)
	}
	payload = b[:n-MACBytes]
	copy(c.mac[:], b[n-MACBytes:])
	c.Bits = int(b[1])
	c.Issued = time.Unix(int64(binary.BigEndian.Uint64(b[2:10])), 0)
	copy(c.Nonce[:], b[10:headerLen])
	rest := payload[headerLen:]
	var ok bool
	if c.Sale, rest, ok = lengthPrefixed(rest); !ok {
		return c, nil, fmt.Errorf("%w: malformed sale", ErrInvalid)
	}
	if c.User, rest, ok = lengthPrefixed(rest); !ok || len(rest) != 0 {
		return c, nil, fmt.Errorf("%w: malformed user", ErrInvalid)
	}
	if c.Bits < MinBits || c.Bits > MaxBits || !seckill.ValidID(c.Sale) || !seckill.ValidID(c.User) {
		return c, nil, fmt.Errorf("%w: malformed fields", ErrInvalid)
	}
	return c, payload, nil
}

func lengthPrefixed(b []byte) (s string, rest []byte, ok bool) {
	if len(b) < 1 || int(b[0]) > len(b)-1 {
		return "", nil, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}

// Verify checks that solution solves challenge, a challenge this server (secret) issued to
// user for sale no longer than maxAge before now (and at most MaxSkew after it). The order
// is cheapest and least trusting first: lengths, decoding, the tag (constant time), the
// binding, the age, and last the one hash of the work. Every failure for the client's input
// wraps ErrInvalid, ErrExpired or ErrInsufficientWork; it never panics.
func Verify(secret []byte, challenge, solution string, sale, user string, now time.Time, maxAge time.Duration) error {
	if len(secret) < MinSecretBytes {
		return errShortSecret
	}
	if !validSolution(solution) {
		return fmt.Errorf("%w: the solution must be 1..%d decimal digits without a leading zero", ErrInvalid, MaxSolutionLen)
	}
	var buf [maxPayload + MACBytes]byte
	c, payload, err := decode(challenge, &buf)
	if err != nil {
		return err
	}
	want := sign(secret, payload)
	if !hmac.Equal(want[:], c.mac[:]) {
		return fmt.Errorf("%w: bad signature", ErrInvalid)
	}
	if c.Sale != sale {
		return fmt.Errorf("%w: issued for another sale", ErrInvalid)
	}
	if c.User != user {
		return fmt.Errorf("%w: issued for another user", ErrInvalid)
	}
	// time.Time.Sub saturates, so no issue time can wrap around.
	if age := now.Sub(c.Issued); age < -MaxSkew {
		return fmt.Errorf("%w: issued in the future", ErrExpired)
	} else if maxAge <= 0 || age > maxAge {
		return fmt.Errorf("%w: older than %v", ErrExpired, maxAge)
	}
	if !enoughWork(challenge, solution, c.Bits) {
		return fmt.Errorf("%w: fewer than %d leading zero bits", ErrInsufficientWork, c.Bits)
	}
	return nil
}

// validSolution: 1..MaxSolutionLen ASCII digits, no leading zero (one spelling per counter).
func validSolution(s string) bool {
	if len(s) < 1 || len(s) > MaxSolutionLen || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// enoughWork reports whether SHA-256(challenge ":" solution) starts with at least n zero bits.
// The caller has bounded both lengths.
func enoughWork(challenge, solution string, n int) bool {
	var buf [MaxChallengeLen + 1 + MaxSolutionLen]byte
	b := append(append(append(buf[:0], challenge...), ':'), solution...)
	sum := sha256.Sum256(b)
	return LeadingZeroBits(sum[:]) >= n
}

// LeadingZeroBits counts the zero bits at the start of b, most significant bit first.
func LeadingZeroBits(b []byte) int {
	for i, x := range b {
		if x != 0 {
			return i*8 + bits.LeadingZeros8(x)
		}
	}
	return len(b) * 8
}
