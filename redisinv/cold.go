// Cold sales (docs/MODEL.md "Hot and cold sales"): a sale outside its hot window with nothing
// live has no keys in Redis. Its reads are answered from the database through a small
// instance cache (coldCache); its first change loads it again (the rebuild, rebuild.go); the
// sweeper removes its keys once it has settled (cool, below and lua/cool.lua).

package redisinv

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill-go/seckill"
)

// coldSale is a missing sale that the database shows cold: outside its hot window, with no
// held or queued reservation. It travels as an error from the rebuilder's missing to the
// reads (sale, Reservation), which answer from it instead of rebuilding the sale.
type coldSale struct {
	sale seckill.Sale
	sold int
}

func (c *coldSale) Error() string { return "redisinv: sale " + c.sale.ID + " is cold" }

// state is the stock of a cold sale: nothing held or queued (that is what makes it cold), the
// units paid sold, the rest available.
func (c *coldSale) state() seckill.StockState {
	sellable := c.sale.Sellable()
	sold := min(c.sold, sellable)
	return seckill.StockState{Sellable: sellable, Available: sellable - sold, Sold: sold}
}

// The cold cache's bounds: an entry is read again from the database once coldFresh old (the
// staleness bound of a cold sale's page, as the list's); one not read for coldIdle is dropped
// (each read extends it); at most ColdCacheMax entries are kept, the least recently read
// dropped first (GET /api/v1/hot shows the bound with the entries).
const (
	coldFresh    = time.Second
	coldIdle     = time.Minute
	ColdCacheMax = 10_000
)

// coldCache keeps the cold sales read lately. It is an instance's only memory of a cold sale.
type coldCache struct {
	mu      sync.Mutex
	entries map[string]*coldEntry
	reads   atomic.Uint64 // reads answered from an entry
	fills   atomic.Uint64 // reads that went to the database
}

type coldEntry struct {
	cold    *coldSale
	fetched time.Time // monotonic
	read    time.Time // last read (monotonic): the entry lives coldIdle past it
}

// get returns the fresh verdict on id, extending its life: the cold sale, or nil for a sale
// found not cold (hot, or with live reservations); ok is false when there is none.
func (c *coldCache) get(id string, now time.Time) (cs *coldSale, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil || now.Sub(e.fetched) >= coldFresh {
		return nil, false
	}
	e.read = now
	if e.cold != nil {
		c.reads.Add(1)
	}
	return e.cold, true
}

// put keeps the verdict on id (cs nil: not cold, so that the reads of a lost hot sale ask the
// database once per coldFresh, not each), dropping the idle entries and, past ColdCacheMax,
// the least recently read.
func (c *coldCache) put(id string, cs *coldSale, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs != nil {
		c.fills.Add(1)
	}
	if c.entries == nil {
		c.entries = map[string]*coldEntry{}
	}
	c.entries[id] = &coldEntry{cold: cs, fetched: now, read: now}
	if len(c.entries) <= ColdCacheMax {
		return
	}
	for k, e := range c.entries {
		if now.Sub(e.read) >= coldIdle {
			delete(c.entries, k)
		}
	}
	if over := len(c.entries) - ColdCacheMax*3/4; len(c.entries) > ColdCacheMax {
		// Down to three quarters, so that the next overflow is ColdCacheMax/4 fills away.
		byRead := make([]string, 0, len(c.entries))
		for k := range c.entries {
			byRead = append(byRead, k)
		}
		sort.Slice(byRead, func(i, j int) bool { return c.entries[byRead[i]].read.Before(c.entries[byRead[j]].read) })
		for _, k := range byRead[:over] {
			delete(c.entries, k)
		}
	}
}

// size is the number of cold sales kept, for the metrics.
func (c *coldCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		if e.cold != nil {
			n++
		}
	}
	return n
}

// evictIdle drops the entries unread for coldIdle (the sweeper calls it now and then, so that
// an instance nobody reads from lets its entries go).
func (c *coldCache) evictIdle(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if now.Sub(e.read) >= coldIdle {
			delete(c.entries, k)
		}
	}
}

// coldAnswer is how a call on a missing sale that the database shows cold is answered.
type coldAnswer int

const (
	coldNone   coldAnswer = iota // a change: the sale is loaded first
	coldRead                     // a read: from the database
	coldWindow                   // a buy: refused by the window (not_started or ended), as the script would
)

// coldAnswers is how a call of script s on a cold sale is answered: reads from the database,
// buys by the window (a cold sale is outside it, so every buy is refused; loading the sale for
// that would let anyone make the database rebuild old sales), everything else after loading it.
func coldAnswers(s *script) coldAnswer {
	switch {
	case s.name == "buy" || s.name == "room_join": // a buyer (a room's joins are buyers')
		return coldWindow
	case s.name == "sale" || s.name == "reservation" || s.room: // a room's others: nothing to do in a cold sale
		return coldRead
	}
	return coldNone
}

// coldOf tells whether the missing sale saleID is cold: outside its hot window at now (the
// engine's clock, or this instance's) with no held or queued reservation in the database. It
// answers from the cache when it can. A sale that the database shows hot, or with live
// reservations, is not cold: its keys were lost, and the caller rebuilds it.
func (rb *rebuilder) coldOf(ctx context.Context, saleID string) (*coldSale, error) {
	mono := time.Now()
	if cs, ok := rb.cold.get(saleID, mono); ok {
		return cs, nil
	}
	def, sold, err := rb.src.Sale(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if def.HotAt(rb.e.now()) {
		rb.cold.put(saleID, nil, mono)
		return nil, nil
	}
	live, err := rb.src.Reservations(ctx, saleID, seckill.StatusHeld, seckill.StatusQueued)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 {
		rb.cold.put(saleID, nil, mono)
		return nil, nil
	}
	if rb.e.now().Before(def.StartsAt) {
		def.Segments = rb.createdSegments(ctx, saleID) // as its preheat will load it (rebuild.go)
	}
	cs := &coldSale{sale: def, sold: sold}
	rb.cold.put(saleID, cs, mono)
	return cs, nil
}

// asCold returns the cold sale that err carries, or nil.
func asCold(err error) *coldSale {
	var cs *coldSale
	if errors.As(err, &cs) {
		return cs
	}
	return nil
}

// coldReservation answers a reservation of a cold sale from the database: every one of its
// reservations has its final status there (that is what makes the sale cold).
func (e *Engine) coldReservation(ctx context.Context, id string) (seckill.Reservation, error) {
	r, err := e.rebuild.src.Reservation(ctx, id)
	switch {
	case isCode(err, seckill.CodeNotFound):
		return seckill.Reservation{}, errNotFound(id)
	case err != nil:
		return seckill.Reservation{}, errUnavailable(err)
	}
	return r, nil
}

// ColdStats is what the cold cache holds and did, for the metrics.
type ColdStats struct {
	Entries int    // cold sales in the cache now
	Reads   uint64 // cold reads answered from the cache
	Fills   uint64 // cold reads that read the database
	Cooled  uint64 // sales this instance cooled (their keys removed)
	Loaded  uint64 // sales this instance loaded from the database with nothing lost (coldLoad)
}

// ColdStats reports the cold cache and the cooling (zero without WithRebuild).
func (e *Engine) ColdStats() ColdStats {
	if e.rebuild == nil {
		return ColdStats{}
	}
	c := &e.rebuild.cold
	return ColdStats{Entries: c.size(), Reads: c.reads.Load(), Fills: c.fills.Load(), Cooled: e.cooled.Load(),
		Loaded: e.rebuild.loads.Load()}
}

// now is the engine's clock for the hot window: the test clock, or this instance's.
func (e *Engine) now() time.Time {
	if e.clock != nil {
		return e.clock.Now()
	}
	return time.Now()
}

// coolOutcome is what a cooling attempt found.
type coolOutcome int

const (
	coolDone coolOutcome = iota // the keys are gone (cooled now, or before)
	coolWait                    // the window has time to go: try again after it
	coolBusy                    // something live or unread: try again later
)

// cool removes the keys of a settled sale (lua/cool.lua): one script call. It answers when to
// try again for coolWait.
//
// cool.lua: KEYS the sale's eight keys; ARGV [1] clock, [2] the margin in ms. Reply {'ok',
// 'cooled'}, {'ok', 'wait', ms}, {'ok', 'busy', why} or {'not_loaded'}.
func (e *Engine) cool(ctx context.Context, saleID string) (coolOutcome, time.Duration, error) {
	r, err := e.execRaw(ctx, e.scripts.cool, saleID, itoa(int(seckill.CoolMargin.Milliseconds())))
	if err != nil {
		return coolBusy, 0, err
	}
	switch r.code() {
	case "not_loaded":
		return coolDone, 0, nil
	case "ok":
		switch r.str(1) {
		case "cooled":
			e.cooled.Add(1)
			e.segs.forget(saleID, true)
			e.local.forget(saleID)
			return coolDone, 0, nil
		case "wait":
			return coolWait, time.Duration(r.int(2)) * time.Millisecond, nil
		case "busy":
			return coolBusy, 0, nil
		}
	}
	return coolBusy, 0, unexpected("cool", r)
}

// evictCold drops the cold cache's entries unread for coldIdle.
func (e *Engine) evictCold(now time.Time) {
	if e.rebuild != nil {
		e.rebuild.cold.evictIdle(now)
	}
}

// coldLoad reports whether a rebuild of def with the database's reservations rs, at now, put
// back a sale that had nothing to lose: none of its reservations is held or queued, and it has
// not started (a preheat, or a flush before its start) or has left its hot window (a cold sale
// changed again: a late payment, an admin's change). Such a load is counted, not logged as a
// loss (rebuild.go report).
func coldLoad(def seckill.Sale, rs []seckill.Reservation, now time.Time) bool {
	for _, r := range rs {
		if r.Status == seckill.StatusHeld || r.Status == seckill.StatusQueued {
			return false
		}
	}
	return now.Before(def.StartsAt) || !now.Before(def.HotUntil())
}

var (
	coldEntriesDesc = prometheus.NewDesc("seckill_redis_cold_cache_entries",
		"Cold sales (no keys in Redis) whose definition and counts this instance keeps in memory for their reads; bounded, entries unread for a minute dropped.", nil, nil)
	coldReadsDesc = prometheus.NewDesc("seckill_redis_cold_reads_total",
		"Reads of cold sales, by where they were answered from: the instance's cache, or the database (which fills it).", []string{"from"}, nil)
	coolDesc = prometheus.NewDesc("seckill_redis_sales_cooled_total",
		"Sales whose keys this instance removed from Redis once they had left their hot window and settled.", nil, nil)
	coldLoadDesc = prometheus.NewDesc("seckill_redis_sales_loaded_total",
		"Sales this instance loaded into Redis from the database with nothing lost: preheated before their start, or cold ones changed again.", nil, nil)
)

// ColdCollector exports ColdStats to Prometheus.
func (e *Engine) ColdCollector() prometheus.Collector { return coldCollector{e} }

type coldCollector struct{ e *Engine }

func (c coldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- coldEntriesDesc
	ch <- coldReadsDesc
	ch <- coolDesc
	ch <- coldLoadDesc
}

func (c coldCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.ColdStats()
	ch <- prometheus.MustNewConstMetric(coldEntriesDesc, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(coldReadsDesc, prometheus.CounterValue, float64(st.Reads), "cache")
	ch <- prometheus.MustNewConstMetric(coldReadsDesc, prometheus.CounterValue, float64(st.Fills), "database")
	ch <- prometheus.MustNewConstMetric(coolDesc, prometheus.CounterValue, float64(st.Cooled))
	ch <- prometheus.MustNewConstMetric(coldLoadDesc, prometheus.CounterValue, float64(st.Loaded))
}
