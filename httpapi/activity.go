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
var activityOutcomes = []string{"held", "queued", "replayed", "sold_out", "limit_exceeded", "queue_full",
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
	counts [11]uint32
}

type saleActivity struct {
	buckets [activityWindow]activityBucket
	last    int64 // unix second of the latest outcome
}

type activity struct {
	mu    sync.Mutex
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
	sec := now.Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	sa := a.sales[saleID]
	if sa == nil {
		if onlyKnown {
			return
		}
		if len(a.sales) >= maxActivitySales {
			a.evict()
		}
		sa = &saleActivity{}
		a.sales[saleID] = sa
	}
	b := &sa.buckets[sec%activityWindow]
	if b.sec != sec {
		*b = activityBucket{sec: sec}
	}
	b.counts[i]++
	sa.last = max(sa.last, sec)
}

// evict forgets the sale whose latest outcome is the oldest.
func (a *activity) evict() {
	var oldest string
	var at int64
	for id, sa := range a.sales {
		if oldest == "" || sa.last < at {
			oldest, at = id, sa.last
		}
	}
	delete(a.sales, oldest)
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
	a.mu.Lock()
	defer a.mu.Unlock()
	sa := a.sales[saleID]
	if sa == nil {
		return out
	}
	end := now.Unix()
	for sec := end - activityWindow + 1; sec <= end; sec++ {
		b := sa.buckets[((sec%activityWindow)+activityWindow)%activityWindow]
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
	writeJSON(w, http.StatusOK, Activity{SaleID: id, ServerTime: now, IntervalSeconds: 1,
		Buckets: s.activity.snapshot(id, now), Expiring: holds})
	return nil
}
