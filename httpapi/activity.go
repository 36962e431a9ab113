package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// Buy activity for the dashboard: this instance's buy outcomes per sale and second over the
// last activityWindow, in a ring of one-second buckets per sale. It is per instance by
// design (every instance counts what it answered; the dashboard shows the one it talks to),
// and bounded: at most maxActivitySales sales, the least recently active forgotten first.

const (
	activityWindow   = 300 // seconds kept
	maxActivitySales = 256
	expiringShown    = 10
)

// activityOutcomes are the counted outcomes, in the JSON's order; anything else is "other".
var activityOutcomes = [...]string{"held", "queued", "replayed", "sold_out", "limit_exceeded", "queue_full",
	"rate_limited", "ended", "not_started", "invalid_token", "other"}

var outcomeIndex = func() map[string]int {
	m := map[string]int{}
	for i, o := range activityOutcomes {
		m[o] = i
	}
	return m
}()

type activityBucket struct {
	sec    int64 // unix second; 0: never used
	counts [len(activityOutcomes)]uint32
}

// saleActivity is one sale's ring, with a lock of its own: buys of different sales do not
// wait for each other.
type saleActivity struct {
	mu      sync.Mutex
	buckets [activityWindow]activityBucket
	last    int64 // unix second of the latest outcome
}

// activity holds the rings by sale. Its lock is read-locked on the buy path (one map lookup)
// and write-locked only to add or evict a sale.
type activity struct {
	mu    sync.RWMutex
	sales map[string]*saleActivity
}

func newActivity() *activity { return &activity{sales: map[string]*saleActivity{}} }

// record counts one outcome of a buy of saleID at now. onlyKnown records it only for a sale
// that already has activity: outcomes decided before the sale is looked up (rate_limited)
// must not let arbitrary ids into the table.
func (a *activity) record(saleID, outcome string, now time.Time, onlyKnown bool) {
	i, ok := outcomeIndex[outcome]
	if !ok {
		i = outcomeIndex["other"]
	}
	a.mu.RLock()
	sa := a.sales[saleID]
	a.mu.RUnlock()
	if sa == nil {
		if onlyKnown {
			return
		}
		sa = a.add(saleID)
	}
	sec := now.Unix()
	sa.mu.Lock()
	defer sa.mu.Unlock()
	b := &sa.buckets[sec%activityWindow]
	if b.sec != sec {
		*b = activityBucket{sec: sec}
	}
	b.counts[i]++
	sa.last = max(sa.last, sec)
}

// add returns the sale's ring, creating it (and forgetting the least recently active sale
// when the table is full).
func (a *activity) add(saleID string) *saleActivity {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sa := a.sales[saleID]; sa != nil {
		return sa
	}
	if len(a.sales) >= maxActivitySales {
		var oldest string
		var at int64
		for id, sa := range a.sales {
			sa.mu.Lock()
			last := sa.last
			sa.mu.Unlock()
			if oldest == "" || last < at {
				oldest, at = id, last
			}
		}
		delete(a.sales, oldest)
	}
	sa := &saleActivity{}
	a.sales[saleID] = sa
	return sa
}

// ActivityBucket is one second of buy outcomes.
type ActivityBucket struct {
	At       time.Time         `json:"at"`
	Outcomes map[string]uint32 `json:"outcomes"`
}

// snapshot returns the sale's buckets of the window ending at now, oldest first; seconds
// without buys are absent.
func (a *activity) snapshot(saleID string, now time.Time) []ActivityBucket {
	out := []ActivityBucket{}
	a.mu.RLock()
	sa := a.sales[saleID]
	a.mu.RUnlock()
	if sa == nil {
		return out
	}
	sa.mu.Lock()
	defer sa.mu.Unlock()
	end := now.Unix()
	for sec := end - activityWindow + 1; sec <= end; sec++ {
		b := sa.buckets[sec%activityWindow]
		if b.sec != sec {
			continue
		}
		m := make(map[string]uint32, len(activityOutcomes))
		for i, o := range activityOutcomes {
			m[o] = b.counts[i]
		}
		out = append(out, ActivityBucket{At: time.Unix(sec, 0).UTC(), Outcomes: m})
	}
	return out
}

// Activity is the body of GET /api/v1/sales/{id}/activity.
type Activity struct {
	SaleID          string                `json:"sale_id"`
	ServerTime      time.Time             `json:"server_time"`
	IntervalSeconds int                   `json:"interval_seconds"`
	Buckets         []ActivityBucket      `json:"buckets"`
	Expiring        []seckill.Reservation `json:"expiring"`
}

// saleActivity serves GET /api/v1/sales/{id}/activity (admin): the last five minutes of this
// instance's buy outcomes, and the holds about to expire.
func (s *Server) saleActivity(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	holds, err := s.svc.ExpiringHolds(r.Context(), id, expiringShown)
	if err != nil {
		return err
	}
	now := s.now()
	return writeJSON(w, http.StatusOK, Activity{SaleID: id, ServerTime: now, IntervalSeconds: 1,
		Buckets: s.activity.snapshot(id, now), Expiring: holds})
}
