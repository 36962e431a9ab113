package pow

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// BenchmarkVerify: the server's cost of one accepted join's proof (the tag, the binding, the
// age and one hash), with ids of typical length.
func BenchmarkVerify(b *testing.B) {
	c, err := Issue(secret, "sale-123", "user-456", 16, t0)
	if err != nil {
		b.Fatal(err)
	}
	s := c.String()
	sol, err := Solve(context.Background(), s, 16)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(secret, s, sol, "sale-123", "user-456", t0, maxAge); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIssue: the server's cost of handing out a challenge.
func BenchmarkIssue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		c, err := Issue(secret, "sale-123", "user-456", 16, t0)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.String()
	}
}

// BenchmarkSolve: a client's cost at 16, 18 and 20 bits on one core. Each iteration solves a
// fresh challenge (the number of hashes is geometric, mean 2^bits, so single solves vary a
// lot); hashes/op is the measured mean, ns/hash the cost of one attempt.
func BenchmarkSolve(b *testing.B) {
	for _, bits := range []int{16, 18, 20} {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			var hashes float64
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				c, err := Issue(secret, "sale-123", "user-456", bits, t0)
				if err != nil {
					b.Fatal(err)
				}
				s := c.String()
				b.StartTimer()
				start := time.Now()
				sol, err := Solve(context.Background(), s, bits)
				elapsed += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				var n float64
				if _, err := fmt.Sscan(sol, &n); err != nil {
					b.Fatal(err)
				}
				hashes += n + 1
			}
			b.ReportMetric(hashes/float64(b.N), "hashes/op")
			b.ReportMetric(math.Exp2(float64(bits)), "expected-hashes/op")
			b.ReportMetric(float64(elapsed.Nanoseconds())/hashes, "ns/hash")
		})
	}
}
