package service

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"golang.org/x/sync/singleflight"
)

// The sale list (GET /api/v1/sales) is paged and answered from this instance's memory, so
// that its cost follows the page, not the number of sales (docs/DECISIONS.md "Lists from an
// instance cache"):
//
//   - the definitions of every sale, sorted by (starts_at, id), are read from the order store
//     at most once per ListTTL (one query, whoever asks; the request that finds them stale
//     reads them, the others are answered the stale ones meanwhile); a sale created, changed
//     or deleted through this instance is applied to them at once (listStore);
//   - a sale's live view (stock, status) is read from the engine only for the sales on a page,
//     and kept for ListTTL, so that a page read again costs no engine read.
//
// A change made through another instance shows up within ListTTL (the definitions) and a
// buy's stock within ListTTL (the views): the list is a storefront's view, not the buy path,
// which always reads the engine.

// DefaultListTTL is how long the list's definitions and live views are served before they are
// read again (Config.ListTTL's default): the staleness bound of the list.
const DefaultListTTL = time.Second

// SaleFilter picks sales by their window at the time of the request (the stock does not
// count: a sold-out sale in its window is selling).
type SaleFilter string

// The list's filters; the zero value takes every sale.
const (
	FilterAny      SaleFilter = ""
	FilterUpcoming SaleFilter = "upcoming" // now < starts_at
	FilterSelling  SaleFilter = "selling"  // starts_at ≤ now < ends_at
	FilterEnded    SaleFilter = "ended"    // ends_at ≤ now
)

// ParseSaleFilter reads a filter's name; anything else is invalid_argument.
func ParseSaleFilter(s string) (SaleFilter, error) {
	switch f := SaleFilter(s); f {
	case FilterAny, FilterUpcoming, FilterSelling, FilterEnded:
		return f, nil
	}
	return "", seckill.Errorf(seckill.CodeInvalidArgument, "status must be upcoming, selling or ended")
}

func (f SaleFilter) keeps(sale seckill.Sale, now time.Time) bool {
	switch f {
	case FilterUpcoming:
		return now.Before(sale.StartsAt)
	case FilterSelling:
		return sale.Open(now)
	case FilterEnded:
		return !now.Before(sale.EndsAt)
	}
	return true
}

// SalePosition is a place in the list's order: by starts_at, then id. A page that is not the
// last answers the position of its last sale; the next page starts after it.
type SalePosition struct {
	StartsAt time.Time
	ID       string
}

// before reports whether p comes before q in the list's order.
func (p SalePosition) before(q SalePosition) bool {
	if !p.StartsAt.Equal(q.StartsAt) {
		return p.StartsAt.Before(q.StartsAt)
	}
	return p.ID < q.ID
}

func positionOf(sale seckill.Sale) SalePosition { return SalePosition{sale.StartsAt, sale.ID} }

// SalePageQuery asks for one page of the list.
type SalePageQuery struct {
	All    bool          // unlisted sales too (admins)
	Filter SaleFilter    // by window
	After  *SalePosition // nil: the first page
	Limit  int           // 1..seckill.MaxListLimit; the caller checks it (the HTTP edge)
}

// SalePage is one page: the sales in order, and where the next page starts (nil: this page is
// the last).
type SalePage struct {
	Sales []SaleView
	Next  *SalePosition
}

// SalePage answers one page of the list (see the comment at the top of this file).
//
// Paging is by position, not by offset: a sale created between two pages shows on a later
// page if its position is after the page already read, and is not seen by this walk
// otherwise; no sale that exists throughout a walk is answered twice or left out. A sale
// whose window moves it out of the filter between pages (an upcoming sale starting) leaves it.
func (s *Service) SalePage(ctx context.Context, q SalePageQuery) (SalePage, error) {
	if q.Limit < 1 || q.Limit > seckill.MaxListLimit {
		return SalePage{}, seckill.Errorf(seckill.CodeInvalidArgument, "limit must be 1 to %d", seckill.MaxListLimit)
	}
	defs, err := s.list.definitions(ctx, s.store)
	if err != nil {
		return SalePage{}, err
	}
	now := s.clock.Now()
	start := 0
	if q.After != nil {
		after := *q.After
		start = sort.Search(len(defs), func(i int) bool { return after.before(positionOf(defs[i])) })
	}
	// The candidates: up to Limit sales the definitions keep, and whether one more follows.
	picked := make([]seckill.Sale, 0, q.Limit)
	more := false
	for _, sale := range defs[start:] {
		if (!q.All && !sale.Listed) || !q.Filter.keeps(sale, now) {
			continue
		}
		if len(picked) == q.Limit {
			more = true
			break
		}
		picked = append(picked, sale)
	}
	page := SalePage{Sales: make([]SaleView, 0, len(picked))}
	if more {
		next := positionOf(picked[len(picked)-1])
		page.Next = &next
	}
	var down error
	for _, def := range picked {
		v, err := s.list.view(ctx, s, def.ID)
		switch seckill.ErrorCode(err) {
		case "":
			// The engine's copy is the live one: a sale taken off the list or closed there,
			// the store not told yet, is left out as it would be once the store is.
			if (!q.All && !v.Listed) || !q.Filter.keeps(v.Sale, now) {
				continue
			}
			v.Status, v.ServerTime = v.Sale.Status(now, v.StockState), now
			page.Sales = append(page.Sales, v)
		case seckill.CodeNotFound:
			// Created by another instance and not loaded into this one's engine yet.
		case seckill.CodeUnavailable:
			// Missing from Redis and being rebuilt, or Redis is down: the page shows the
			// sales it can show, and fails only if it can show none of them.
			down = err
		default:
			return SalePage{}, err
		}
	}
	if len(page.Sales) == 0 && down != nil {
		return SalePage{}, down
	}
	return page, nil
}

// saleList is the list's cache: the sorted definitions and the live views of the sales read.
// Both hold one entry per sale at most (sales are created by admins only); views not read for
// a ListTTL are dropped when the definitions are next read.
type saleList struct {
	ttl time.Duration

	mu    sync.Mutex
	defs  []seckill.Sale // sorted by position; nil: to be read
	read  time.Time      // when defs were read (the monotonic clock)
	gen   uint64         // bumped by every invalidation
	views map[string]cachedView

	loads      singleflight.Group // the first read, or one after an invalidation, by generation
	refreshing sync.Mutex         // held by the one request that refreshes stale definitions
}

type cachedView struct {
	view SaleView
	read time.Time
}

func newSaleList(ttl time.Duration) *saleList {
	if ttl <= 0 {
		ttl = DefaultListTTL
	}
	return &saleList{ttl: ttl, views: map[string]cachedView{}}
}

// definitions answers the sorted definitions. Fresh ones are answered from memory. Stale ones
// are too, while one request reads them again (a request pays for a refresh at most once per
// ListTTL, and no other waits for it); none (the first read, or after a change made here) are
// read before anyone is answered, one read for all who wait.
func (l *saleList) definitions(ctx context.Context, store seckill.OrderStore) ([]seckill.Sale, error) {
	l.mu.Lock()
	defs, read, gen := l.defs, l.read, l.gen
	l.mu.Unlock()
	if defs != nil && time.Since(read) < l.ttl {
		return defs, nil
	}
	if defs != nil {
		if !l.refreshing.TryLock() {
			return defs, nil // another request is refreshing them
		}
		defer l.refreshing.Unlock()
		fresh, err := l.load(ctx, store, gen)
		if err != nil {
			return defs, nil // the store is down: the last definitions, until it is back
		}
		return fresh, nil
	}
	v, err, _ := l.loads.Do(strconv.FormatUint(gen, 10), func() (any, error) { return l.load(ctx, store, gen) })
	if err != nil {
		return nil, err
	}
	return v.([]seckill.Sale), nil
}

// load reads the definitions and keeps them unless a change was made since gen (then the next
// request reads them again: they may predate the change).
func (l *saleList) load(ctx context.Context, store seckill.OrderStore, gen uint64) ([]seckill.Sale, error) {
	started := time.Now()
	sales, _, err := store.Sales(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	sort.Slice(sales, func(i, j int) bool { return positionOf(sales[i]).before(positionOf(sales[j])) })
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == gen {
		l.defs, l.read = sales, started
		for id, v := range l.views {
			if time.Since(v.read) >= l.ttl {
				delete(l.views, id)
			}
		}
	}
	return sales, nil
}

// view answers a sale's live view, from memory if read less than a ListTTL ago.
func (l *saleList) view(ctx context.Context, s *Service, id string) (SaleView, error) {
	l.mu.Lock()
	c, ok := l.views[id]
	gen := l.gen
	l.mu.Unlock()
	if ok && time.Since(c.read) < l.ttl {
		return c.view, nil
	}
	started := time.Now()
	v, err := s.Sale(ctx, id)
	if err != nil {
		return SaleView{}, err
	}
	l.mu.Lock()
	if l.gen == gen {
		l.views[id] = cachedView{view: v, read: started}
	}
	l.mu.Unlock()
	return v, nil
}

// changed applies a sale write this instance made to the cached definitions (listStore),
// so that an admin's change shows on this instance's next page without reading every sale
// again: sale is the new definition, or nil when id was deleted. Loads already running are
// not kept (they may predate the change). The copy costs O(sales) for a write, none for a read.
func (l *saleList) changed(id string, sale *seckill.Sale) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	delete(l.views, id)
	if l.defs == nil {
		return
	}
	defs := make([]seckill.Sale, 0, len(l.defs)+1)
	for _, d := range l.defs {
		if d.ID != id {
			defs = append(defs, d)
		}
	}
	if sale != nil {
		at := sort.Search(len(defs), func(i int) bool { return positionOf(*sale).before(positionOf(defs[i])) })
		defs = slices.Insert(defs, at, *sale)
	}
	l.defs = defs
}

// invalidate forgets everything: the next page reads the definitions and views again (after
// a write whose outcome is unknown).
func (l *saleList) invalidate() {
	l.mu.Lock()
	l.defs, l.gen = nil, l.gen+1
	clear(l.views)
	l.mu.Unlock()
}

// listStore is the service's order store: each sale write it passes on is applied to the
// list's cache, so that an admin's change shows on this instance's next page.
type listStore struct {
	seckill.OrderStore
	list *saleList
}

func (s listStore) CreateSale(ctx context.Context, sale seckill.Sale) error {
	return s.wrote(sale.ID, &sale, s.OrderStore.CreateSale(ctx, sale))
}

func (s listStore) UpdateSale(ctx context.Context, sale seckill.Sale) error {
	return s.wrote(sale.ID, &sale, s.OrderStore.UpdateSale(ctx, sale))
}

func (s listStore) DeleteSale(ctx context.Context, id string) error {
	return s.wrote(id, nil, s.OrderStore.DeleteSale(ctx, id))
}

// wrote applies a write's outcome to the cache: its sale when it succeeded; nothing when the
// store refused it (a conflict, not_found: nothing changed); else it forgets everything.
func (s listStore) wrote(id string, sale *seckill.Sale, err error) error {
	switch {
	case err == nil:
		s.list.changed(id, sale)
	case seckill.ErrorCode(err) == seckill.CodeConflict || seckill.ErrorCode(err) == seckill.CodeNotFound:
	default:
		s.list.invalidate()
	}
	return err
}
