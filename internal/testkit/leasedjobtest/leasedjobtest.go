// Package leasedjobtest helps the tests of the leased-job workers (closer, refund): racing
// instances on one store, as several seckill instances on one database do.
package leasedjobtest

import (
	"context"
	"sync"
	"testing"
)

// Passer is a worker run pass by pass (leasedjob.Worker.RunOnce: how many jobs it claimed).
type Passer interface {
	RunOnce(ctx context.Context) (int, error)
}

// Race starts the workers' passes at the same instant, each passing until a pass claims
// nothing, and returns when all have stopped. A pass that fails fails t, and stops its worker.
func Race(t *testing.T, workers ...Passer) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, w := range workers {
		wg.Go(func() {
			<-start
			for {
				claimed, err := w.RunOnce(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				if claimed == 0 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
}
