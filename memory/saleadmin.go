package memory

import (
	"context"
	"time"

	"github.com/seckill-go/seckill"
)

var _ seckill.SaleAdmin = (*Engine)(nil)

// SetListed sets whether the storefront lists the sale.
func (e *Engine) SetListed(_ context.Context, id string, listed bool) (seckill.Sale, seckill.StockState, error) {
	s, err := e.sale(id)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.reclaim(s, e.clock.Now())
	s.def.Listed = listed
	return s.def, s.state(), nil
}

// unreserved reports whether nobody has reserved in s: every reservation, restored ones
// included, has a seq of at least 1. A released sale's reservations are in the order store,
// not here: it reports true for one with nothing sold, and the store's own guard decides
// (service.Service.DeleteSale deletes from the store before dropping the sale here).
func (s *sale) unreserved() bool {
	if s.sold > 0 {
		return false
	}
	return s.rel.done || s.seq == 0 && s.book.n == 0 && len(s.foreign) == 0
}

// CloseUnreserved closes the sale, as CloseSale does, if nobody has reserved in it. The check
// and the close are one critical section with every buy of the sale.
func (e *Engine) CloseUnreserved(_ context.Context, id string) (seckill.Sale, error) {
	s, err := e.sale(id)
	if err != nil {
		return seckill.Sale{}, err
	}
	now := e.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.unreserved() {
		return seckill.Sale{}, seckill.Errorf(seckill.CodeConflict, "sale %q has reservations; it cannot be deleted (take it off the storefront instead)", id)
	}
	s.closed = true
	if end := now.Truncate(time.Millisecond); end.Before(s.def.EndsAt) {
		s.def.EndsAt = end
	}
	return s.def, nil
}

// DropSale forgets a closed sale nobody has reserved in. A call that found the sale just before
// works on a copy that is closed, so a buy on it is refused (ended), never reserved.
func (e *Engine) DropSale(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sales[id]
	if s == nil {
		return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed || !s.unreserved() {
		return seckill.Errorf(seckill.CodeConflict, "sale %q is open or has reservations; it cannot be dropped", id)
	}
	delete(e.sales, id)
	return nil
}
