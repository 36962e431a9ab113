package pow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"pgregory.net/rapid"
)

// TestEncodeDecode: for any fields, decoding a challenge's string gives back every field and
// its tag, within MaxChallengeLen; and any string that decodes is the one spelling of what it
// decodes to (strict base64, length-prefixed ids, nothing after them).
func TestEncodeDecode(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		id := rapid.StringMatching(`[A-Za-z0-9_.-]{1,64}`).Filter(seckill.ValidID)
		c := Challenge{
			Sale:   id.Draw(rt, "sale"),
			User:   id.Draw(rt, "user"),
			Bits:   rapid.IntRange(MinBits, MaxBits).Draw(rt, "bits"),
			Issued: time.Unix(rapid.Int64().Draw(rt, "issued"), 0),
		}
		copy(c.Nonce[:], rapid.SliceOfN(rapid.Byte(), NonceBytes, NonceBytes).Draw(rt, "nonce"))
		copy(c.mac[:], rapid.SliceOfN(rapid.Byte(), MACBytes, MACBytes).Draw(rt, "mac"))
		s := c.String()
		if len(s) > MaxChallengeLen || len(s) < minChallengeLen {
			rt.Fatalf("%d characters, outside %d..%d", len(s), minChallengeLen, MaxChallengeLen)
		}
		var buf [maxPayload + MACBytes]byte
		d, payload, err := decode(s, &buf)
		if err != nil {
			rt.Fatalf("decode(%q): %v", s, err)
		}
		if d.Sale != c.Sale || d.User != c.User || d.Bits != c.Bits || !d.Issued.Equal(c.Issued) || d.Nonce != c.Nonce || d.mac != c.mac {
			rt.Fatalf("decoded %+v, want %+v", d, c)
		}
		var pbuf [maxPayload]byte
		if want := c.appendPayload(pbuf[:0]); string(payload) != string(want) {
			rt.Fatalf("decoded payload %x, want the signed bytes %x", payload, want)
		}
		// One flipped character of the string decodes to something else or not at all.
		i := rapid.IntRange(0, len(s)-1).Draw(rt, "at")
		r := rapid.SampledFrom([]byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")).Filter(func(b byte) bool { return b != s[i] }).Draw(rt, "to")
		changed := s[:i] + string(r) + s[i+1:]
		if e, _, err := decode(changed, &buf); err == nil && e.String() != changed {
			rt.Fatalf("%q decodes, but encodes back as %q", changed, e.String())
		}
	})
}

// FuzzVerify: whatever the input, Verify never panics, fails only with one of the client's
// three errors, and accepts only what it should: a challenge this secret signed for this sale
// and user, within the window, whose hash (counted here, apart from the package) has the
// challenge's zero bits.
func FuzzVerify(f *testing.F) {
	c, err := Issue(secret, "s1", "u1", 8, t0)
	if err != nil {
		f.Fatal(err)
	}
	sol, err := Solve(context.Background(), c.String(), 8)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c.String(), sol, "s1", "u1", int64(0))               // accepted
	f.Add(c.String(), sol, "s1", "u1", int64(3600))            // expired
	f.Add(c.String(), "0", "s1", "u1", int64(1))               // little work, most likely
	f.Add(c.String(), sol, "s2", "u1", int64(0))               // another sale
	f.Add(c.String()[1:], sol, "s1", "u1", int64(0))           // cut
	f.Add("", "", "", "", int64(0))                            // nothing
	f.Add(strings.Repeat("A", 300), "1", "s1", "u1", int64(0)) // long
	f.Add(c.String()+"==", sol, "s1", "u1", int64(-10))        // padded, future
	f.Fuzz(func(t *testing.T, challenge, solution, sale, user string, offset int64) {
		now := t0.Add(time.Duration(offset) * time.Second)
		err := Verify(secret, challenge, solution, sale, user, now, maxAge)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrExpired) && !errors.Is(err, ErrInsufficientWork) {
				t.Fatalf("Verify = %v: not one of the client's errors", err)
			}
			return
		}
		var buf [maxPayload + MACBytes]byte
		d, payload, derr := decode(challenge, &buf)
		if derr != nil {
			t.Fatalf("accepted %q, which does not decode: %v", challenge, derr)
		}
		if sign(secret, payload) != d.mac || d.Sale != sale || d.User != user {
			t.Fatalf("accepted %q for %s/%s: not signed for them", challenge, sale, user)
		}
		if age := now.Sub(d.Issued); age > maxAge || age < -MaxSkew {
			t.Fatalf("accepted %q at age %v", challenge, age)
		}
		if got := hashBits(challenge, solution); got < d.Bits {
			t.Fatalf("accepted %q:%q with %d zero bits, want %d", challenge, solution, got, d.Bits)
		}
	})
}
