// Package backoff computes the pause before a retry of background work (refunds, payment
// closes): exponential, capped, with "equal jitter", so that work that failed together (a
// gateway outage) does not all come back at the same moment, and none comes back too soon.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jittered is the pause after the given attempt (1 for the first; less counts as 1):
// base·2^(attempt-1), at most ceiling, of which a random part of up to half is taken off.
func Jittered(base, ceiling time.Duration, attempt int) time.Duration {
	d := min(base, ceiling)
	for i := 1; i < attempt && d < ceiling; i++ {
		d = min(d*2, ceiling) // doubling d ≤ ceiling never overflows for any sane ceiling
	}
	half := d / 2
	return half + rand.N(half+1)
}
