package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/wait"
)

const (
	// outboxLease is how long an instance's claim on a sink's outbox cursor lasts unless
	// renewed (every third of it): a crashed exporter's sink is taken over within it.
	outboxLease = 6 * time.Second
	// outboxPoll is how often an idle reader looks for new outbox entries.
	outboxPoll = 100 * time.Millisecond
)

// OutboxLog is the order store's outbox as an events.Log. The position of each sink is its
// cursor row, and the lead is that row's lease, held by owner (unique per process) and renewed
// while it leads.
// Failures to claim the cursor are logged to log (nil: not logged).
func OutboxLog(store events.Outbox, owner string, log *slog.Logger) events.Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &outboxLog{store: store, owner: owner, log: log, pos: map[string]int64{}}
}

type outboxLog struct {
	store events.Outbox
	owner string
	log   *slog.Logger

	mu  sync.Mutex
	pos map[string]int64 // per sink, while this process leads it
}

func (l *outboxLog) Name() string { return "outbox" }

func (l *outboxLog) Lead(ctx context.Context, sink string) (context.Context, func(), error) {
	for {
		pos, ok, err := l.store.ClaimExportCursor(ctx, sink, l.owner, time.Now(), outboxLease)
		if err == nil && ok {
			l.setPos(sink, pos)
			lead, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go l.renew(lead, cancel, sink, done)
			var once sync.Once
			release := func() {
				once.Do(func() {
					cancel()
					<-done
					rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
					defer rcancel()
					_ = l.store.ReleaseExportCursor(rctx, sink, l.owner)
				})
			}
			return lead, release, nil
		}
		if err != nil && ctx.Err() == nil {
			l.log.Warn("exporter: claiming a sink's outbox cursor failed; retrying", "err", err) // no sink: its URL may hold a token
		}
		if !wait.Sleep(ctx, outboxLease/3) {
			return nil, nil, ctx.Err()
		}
	}
}

// renew keeps the cursor's lease while lead lives; it ends the lead when the lease is lost
// (another owner took it) or could not be renewed before it ran out.
func (l *outboxLog) renew(lead context.Context, cancel context.CancelFunc, sink string, done chan<- struct{}) {
	defer close(done)
	renewed := time.Now()
	for wait.Sleep(lead, outboxLease/3) {
		_, ok, err := l.store.ClaimExportCursor(lead, sink, l.owner, time.Now(), outboxLease)
		switch {
		case err == nil && ok:
			renewed = time.Now()
		case err == nil || time.Since(renewed) >= outboxLease:
			cancel() // taken over, or ours no more for all we know
			return
		}
	}
}

func (l *outboxLog) setPos(sink string, pos int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pos[sink] = pos
}

func (l *outboxLog) position(sink string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos[sink]
}

func (l *outboxLog) Read(ctx context.Context, sink string, max int) (events.Batch, error) {
	after := l.position(sink)
	entries, err := l.store.ReadOutbox(ctx, after, max)
	if err != nil {
		return events.Batch{}, err
	}
	if len(entries) == 0 {
		wait.Sleep(ctx, outboxPoll)
		return events.Batch{}, nil
	}
	b := events.Batch{Events: make([]events.Event, len(entries))}
	for i, en := range entries {
		b.Events[i] = en.Event
	}
	last := entries[len(entries)-1].Seq
	b.Ack = func(ctx context.Context) error {
		err := l.store.SaveExportCursor(ctx, sink, l.owner, last, time.Now(), outboxLease)
		if err == nil {
			l.setPos(sink, last)
		}
		// On events.ErrLeaseLost the lead ends with the next renewal, and the new owner sends
		// the batch again.
		return err
	}
	return b, nil
}

func (l *outboxLog) Lag(ctx context.Context, sink string) (int64, time.Time, error) {
	return l.store.OutboxLag(ctx, l.position(sink))
}
