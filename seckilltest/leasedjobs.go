// This file holds what the conformance cases of the two kinds of leased jobs share — the
// payments to close (seckill.OpenPaymentStore) and the refunds to pay back
// (seckill.RefundStore): both are a claim/record pair of one shape (leasedjob.Queue), which
// the closer and the refunder work alike.

package seckilltest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/leasedjob"
)

// osAs returns s as the optional store interface T, or skips the test for a store without it
// (skip says what the store does not keep).
func osAs[T any](t *testing.T, s seckill.OrderStore, skip string) T {
	t.Helper()
	v, ok := s.(T)
	if !ok {
		t.Skip(skip)
	}
	return v
}

// osConcurrentClaims races claimers on the n jobs of gateway "gw" that q holds, all due at
// now, each claiming small batches under a lease of a minute until a claim comes back empty.
// It fails unless every job was claimed exactly once: never by two claimers while its lease
// lives, and every due one by someone.
func osConcurrentClaims[J, O any](t *testing.T, q leasedjob.Queue[J, O], id func(J) string, now time.Time, n, claimers int) {
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		owners = map[string][]string{} // the claimers that got each job
		start  = make(chan struct{})
	)
	for c := range claimers {
		wg.Go(func() {
			<-start
			me := fmt.Sprintf("claimer-%d", c)
			for range n { // small batches, so that the claimers interleave
				got, err := q.Claim(t.Context(), "gw", me, now, time.Minute, 3)
				if err != nil {
					t.Errorf("%s: %v", me, err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					owners[id(j)] = append(owners[id(j)], me)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	var dup []string
	for job, by := range owners {
		if len(by) != 1 {
			dup = append(dup, fmt.Sprintf("%s by %v", job, by))
		}
	}
	if len(dup) > 0 {
		t.Fatalf("jobs claimed more than once while leased: %v", dup)
	}
	if len(owners) != n {
		t.Fatalf("%d of %d due jobs claimed", len(owners), n)
	}
}
