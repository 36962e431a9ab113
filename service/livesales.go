package service

import (
	"context"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// liveListAge is how long a listing of the sales serves LiveSaleIDs. Every background loop of
// an instance lists the live sales (the sweepers, the stream consumers), some of them several
// times a second; one read of the order store a second serves them all, whatever their number.
const liveListAge = time.Second

// liveListing is the service's cached listing of the order store's sales, for LiveSaleIDs.
// A sale this service creates is listed at once (forget); one another instance creates, within
// liveListAge.
type liveListing struct {
	mu    sync.Mutex // held during a read: callers that arrive meanwhile wait and share it
	sales []seckill.Sale
	read  time.Time // when sales was read (monotonic); zero: not read, or forgotten
}

// forget makes the next LiveSaleIDs read the order store.
func (l *liveListing) forget() {
	l.mu.Lock()
	l.read = time.Time{}
	l.mu.Unlock()
}

// liveSales is the order store's sales, read at most liveListAge ago.
func (s *Service) liveSales(ctx context.Context) ([]seckill.Sale, error) {
	l := &s.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.read.IsZero() && time.Since(l.read) < liveListAge {
		return l.sales, nil
	}
	sales, _, err := s.store.Sales(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	l.sales, l.read = sales, time.Now()
	return sales, nil
}
