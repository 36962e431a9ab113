package redisinv

import (
	"sync"
	"time"
)

// streamFillWindow is how long a trim's count of what a sale's stream holds stands for the
// stream in /metrics: a sale no longer trimmed (ended, cooled) drops out after it.
const streamFillWindow = time.Minute

// streamFill remembers, per sale, how many entries its stream held after its last trim in this
// process, for the fullest-stream gauge (StreamFill). It holds the sales trimmed in the last
// streamFillWindow only: they are the hot ones, so it is bounded by the sales selling now.
type streamFill struct {
	mu   sync.Mutex
	left map[string]streamCount
}

type streamCount struct {
	entries int64
	at      time.Time
}

func (f *streamFill) note(saleID string, entries int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left == nil {
		f.left = make(map[string]streamCount)
	}
	f.left[saleID] = streamCount{entries, at}
	if len(f.left)%1024 == 0 {
		f.forget(at) // a bound even if nobody reads the gauge
	}
}

// fullest returns the most entries a stream trimmed since now-streamFillWindow held, and
// forgets the older counts.
func (f *streamFill) fullest(now time.Time) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forget(now)
	var most int64
	for _, c := range f.left {
		most = max(most, c.entries)
	}
	return most
}

func (f *streamFill) forget(now time.Time) {
	for id, c := range f.left {
		if now.Sub(c.at) > streamFillWindow {
			delete(f.left, id)
		}
	}
}

// StreamFill reports, for /metrics (retention.Config.Streams), how full the sales' event
// streams are: the entries of the fullest stream this process trimmed in the last minute
// (only the processes that store the streams trim them), and the most entries a stream keeps
// (WithStreamLimits; 0 for no bound).
func (e *Engine) StreamFill() (entries, most int64) {
	_, m := e.stream.bounds()
	return e.stream.fill.fullest(time.Now()), int64(m)
}
