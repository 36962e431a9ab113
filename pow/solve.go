package pow

import (
	"context"
	"crypto/sha256"
	"fmt"
)

// checkEvery is how many hashes Solve tries between looks at ctx: well under a millisecond.
const checkEvery = 1 << 12

// Solve finds the smallest counter 0, 1, 2, … whose decimal spelling solves challenge at bits:
// SHA-256(challenge ":" counter) starts with at least bits zero bits. It takes 2^bits hashes
// on average, on one goroutine (a client's cost, not a farm's), and stops with ctx's error
// when ctx is done. The storefront's pow.js searches in the same order, so both find the same
// solution. Solve does not check the challenge's signature: it cannot, it has no secret.
func Solve(ctx context.Context, challenge string, bits int) (string, error) {
	if len(challenge) > MaxChallengeLen {
		return "", fmt.Errorf("%w: longer than %d", ErrInvalid, MaxChallengeLen)
	}
	if bits < MinBits || bits > MaxBits {
		return "", fmt.Errorf("pow: difficulty %d bits outside %d..%d", bits, MinBits, MaxBits)
	}
	var buf [MaxChallengeLen + 1 + MaxSolutionLen]byte
	b := append(append(buf[:0], challenge...), ':', '0')
	start := len(b) - 1 // the counter's digits are b[start:], incremented in place
	for i := 0; ; i++ {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		sum := sha256.Sum256(b)
		if LeadingZeroBits(sum[:]) >= bits {
			return string(b[start:]), nil
		}
		if b = increment(b, start); len(b)-start > MaxSolutionLen {
			// 10^20 hashes: never in practice, but the loop has an end.
			return "", fmt.Errorf("pow: no solution within %d digits", MaxSolutionLen)
		}
	}
}

// increment adds one to the decimal number in b[start:], growing it by a digit on a carry out
// of the first ("999" → "1000").
func increment(b []byte, start int) []byte {
	for i := len(b) - 1; i >= start; i-- {
		if b[i] < '9' {
			b[i]++
			return b
		}
		b[i] = '0'
	}
	b[start] = '1'
	return append(b, '0')
}
