package redisinv

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/wait"
)

// The streams' readers (the orders Consumer, the export's streamLog) read a stream when it has
// something new, not by polling each one: the scripts publish a stream's key on the channel
// notifyChannel when they add an entry to a stream that was quiet (flush_events in
// common.lua), and each engine keeps one subscription to it, shared by its readers, which wake
// only the streams named. Notifications are lossy (a dropped connection, an instance that was
// not subscribed yet): every reader also checks all its streams now and then, and at once
// after each (re)subscription (docs/DECISIONS.md "Stream readers woken by a notification").

// notifyQuiet is NOTIFY_QUIET_MS of common.lua: an entry added within it of the stream's newest
// one publishes nothing, so a reader woken for a stream stops reading it only after two of its
// reads at least notifyQuiet apart found nothing new. Any entry added without a notification
// after its first such read was added within notifyQuiet of an entry already there, so before
// the second.
const notifyQuiet = 20 * time.Millisecond

// notifyChannel is the channel the scripts publish on: the key prefix, then "notify".
func (e *Engine) notifyChannel() string { return e.prefix + "notify" }

// notifier is an engine's one subscription to notifyChannel, open while any reader watches.
type notifier struct {
	mu         sync.Mutex
	watchers   map[*noteWatcher]struct{}
	stop       context.CancelFunc
	done       chan struct{}
	subscribed bool
}

// noteWatcher is a reader's callbacks: key for each notified stream key, subscribed after each
// (re)subscription (and at once when the subscription is already up). Both run on the
// subscription's goroutine and must not block.
type noteWatcher struct {
	key        func(streamKey string)
	subscribed func()
}

// watch registers w until the returned function is called; the first watcher opens the
// subscription, the last one to leave closes it.
func (e *Engine) watchNotes(w *noteWatcher) (unwatch func()) {
	n := &e.notes
	n.mu.Lock()
	if n.watchers == nil {
		n.watchers = map[*noteWatcher]struct{}{}
	}
	n.watchers[w] = struct{}{}
	if n.stop == nil {
		ctx, stop := context.WithCancel(context.Background())
		n.stop, n.done = stop, make(chan struct{})
		go func(done chan struct{}) { defer close(done); e.subscribeNotes(ctx) }(n.done)
	}
	up := n.subscribed
	n.mu.Unlock()
	if up {
		w.subscribed()
	}
	return func() {
		n.mu.Lock()
		delete(n.watchers, w)
		var done chan struct{}
		if len(n.watchers) == 0 && n.stop != nil {
			n.stop()
			done = n.done
			n.stop, n.done, n.subscribed = nil, nil, false
		}
		n.mu.Unlock()
		if done != nil {
			<-done
		}
	}
}

// each calls fn for every watcher, outside the lock (a watcher may be called just after it
// left: its callbacks must bear that).
func (n *notifier) each(fn func(w *noteWatcher)) {
	n.mu.Lock()
	ws := make([]*noteWatcher, 0, len(n.watchers))
	for w := range n.watchers {
		ws = append(ws, w)
	}
	n.mu.Unlock()
	for _, w := range ws {
		fn(w)
	}
}

// checkedByConsumer reports whether a running Consumer of this engine checks every one of
// keys: its check passes on the streams on which an export group is behind (Consumer.check),
// so the export's logs need not look at them themselves.
func (e *Engine) checkedByConsumer(keys []string) bool {
	checked := e.checked.Load()
	if checked == nil {
		return false
	}
	for _, k := range keys {
		if !(*checked)[k] {
			return false
		}
	}
	return true
}

// setChecked records the stream keys a running Consumer checks (nil: none).
func (e *Engine) setChecked(keys map[string]bool) {
	if keys == nil {
		e.checked.Store(nil)
		return
	}
	e.checked.Store(&keys)
}

// notifyLocal passes key to this engine's watchers but except as if the channel had named it.
func (e *Engine) notifyLocal(key string, except *noteWatcher) {
	e.notes.each(func(w *noteWatcher) {
		if w != except {
			w.key(key)
		}
	})
}

// subscribeNotes holds the subscription until ctx ends, subscribing again after a failure.
func (e *Engine) subscribeNotes(ctx context.Context) {
	n := &e.notes
	rdb := e.redis()
	delay := 50 * time.Millisecond
	for ctx.Err() == nil {
		hctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind != "subscribe" {
				return
			}
			n.each(func(w *noteWatcher) { w.subscribed() })
			n.mu.Lock()
			n.subscribed = true
			n.mu.Unlock()
		})
		err := rdb.Receive(hctx, rdb.B().Subscribe().Channel(e.notifyChannel()).Build(), func(m rueidis.PubSubMessage) {
			if id, ok := e.saleOfStream(m.Message); ok {
				e.noted.note(id, time.Now())
			}
			n.each(func(w *noteWatcher) { w.key(m.Message) })
		})
		n.mu.Lock()
		n.subscribed = false
		n.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("redisinv: the subscription to the streams' notifications ended; subscribing again (meanwhile the readers find new entries at their periodic check)",
			"retry_in", delay, "err", err)
		wait.Sleep(ctx, delay)
		delay = min(2*delay, 2*time.Second)
	}
}

// wakeSet is the streams a reader has to read, each at most once however often it is woken
// (bounded by the streams the reader knows), taken by a bounded set of workers. A stream being
// read is never taken by a second worker; woken meanwhile, it is queued again when done.
type wakeSet struct {
	mu     sync.Mutex
	order  []string        // queued keys, first in first out
	queued map[string]bool // in order
	busy   map[string]bool // taken, not done
	again  map[string]bool // woken while busy
	ready  chan struct{}   // a token when order may be non-empty
}

func newWakeSet() *wakeSet {
	return &wakeSet{queued: map[string]bool{}, busy: map[string]bool{}, again: map[string]bool{}, ready: make(chan struct{}, 1)}
}

// wake queues key unless it is queued already (or marks it to be queued again when done).
func (w *wakeSet) wake(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeLocked(key)
}

func (w *wakeSet) wakeLocked(key string) {
	switch {
	case w.busy[key]:
		w.again[key] = true
	case !w.queued[key]:
		w.queued[key] = true
		w.order = append(w.order, key)
		select {
		case w.ready <- struct{}{}:
		default:
		}
	}
}

// wakeAfter wakes key after d (at once for d <= 0) unless ctx has ended by then.
func (w *wakeSet) wakeAfter(ctx context.Context, key string, d time.Duration) {
	if d <= 0 {
		w.wake(key)
		return
	}
	time.AfterFunc(d, func() {
		if ctx.Err() == nil {
			w.wake(key)
		}
	})
}

// take returns the next queued key, marked busy, waiting for one; false when ctx ends.
func (w *wakeSet) take(ctx context.Context) (string, bool) {
	for {
		w.mu.Lock()
		if len(w.order) > 0 {
			key := w.order[0]
			w.order[0] = ""
			w.order = w.order[1:]
			delete(w.queued, key)
			w.busy[key] = true
			more := len(w.order) > 0
			w.mu.Unlock()
			if more { // pass the token on to another worker
				select {
				case w.ready <- struct{}{}:
				default:
				}
			}
			return key, true
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-w.ready:
		}
	}
}

// done ends the work on key; it is queued again if it was woken meanwhile.
func (w *wakeSet) done(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.busy, key)
	if w.again[key] {
		delete(w.again, key)
		w.wakeLocked(key)
	}
}

// notedSales remembers the sales whose streams were notified lately, so that the readers and
// the sweeper's cooling also take the sales outside their hot window that a late change loaded
// again (a late payment, an admin's change: docs/MODEL.md "Hot and cold sales"): their events
// are stored and exported, and they cool again once read. Entries older than notedFor are
// dropped, and at most maxNoted are kept (the oldest go first).
type notedSales struct {
	mu sync.Mutex
	at map[string]time.Time
}

const (
	notedFor = 10 * time.Minute
	maxNoted = 10_000
)

func (n *notedSales) note(saleID string, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.at == nil {
		n.at = map[string]time.Time{}
	}
	n.at[saleID] = now
	if len(n.at) > maxNoted {
		n.pruneLocked(now, notedFor/2)
	}
}

func (n *notedSales) pruneLocked(now time.Time, age time.Duration) {
	for id, t := range n.at {
		if now.Sub(t) >= age {
			delete(n.at, id)
		}
	}
	for id := range n.at { // still too many: any will do, they are all recent
		if len(n.at) <= maxNoted {
			break
		}
		delete(n.at, id)
	}
}

// since returns the sales noted within notedFor of now, with when.
func (n *notedSales) since(now time.Time) map[string]time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pruneLocked(now, notedFor)
	out := make(map[string]time.Time, len(n.at))
	for id, t := range n.at {
		out[id] = t
	}
	return out
}

// NotedSaleIDs lists the sales whose streams were notified within the last ten minutes (while
// this engine's readers were subscribed): with the hot sales, the streams the export reads.
func (e *Engine) NotedSaleIDs() []string {
	noted := e.noted.since(time.Now())
	ids := make([]string, 0, len(noted))
	for id := range noted {
		ids = append(ids, id)
	}
	return ids
}

// notedSales is the sales noted within notedFor, with when (the sweeper's cooling).
func (e *Engine) notedSales(now time.Time) map[string]time.Time { return e.noted.since(now) }

// saleOfStream is the sale of one of this engine's stream keys (streamKey, of a sale or of a
// segment's tag).
func (e *Engine) saleOfStream(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, e.prefix+"{sale:")
	if !ok {
		return "", false
	}
	tag, ok := strings.CutSuffix(rest, "}:events")
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(tag, "#")
	return id, seckill.ValidID(id)
}

// WithNoted is ids with the noted sales (NotedSaleIDs) that are not among them: the streams
// the consumer and the export read.
func WithNoted(ids, noted []string) []string {
	if len(noted) == 0 {
		return ids
	}
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	out := ids[:len(ids):len(ids)]
	for _, id := range noted {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}
