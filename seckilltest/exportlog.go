// This file holds the exporter's half of the sink suite: stories in which package exporter
// drives a sink, from a log, through a rush, a killed exporter and an outage of the
// destination; and MemLog, the plain in-memory events.Log they read from.

package seckilltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/events"
)

// MemLog is an events.Log in memory: events appended in order, a position per sink that
// moves only on Ack, and a lead per sink that one caller holds at a time. It is the model the
// real logs (a sale's Redis stream, the order store's outbox) follow.
type MemLog struct {
	name string

	mu     sync.Mutex
	events []events.Event
	pos    map[string]int
	leads  map[string]chan struct{}
}

// NewMemLog returns an empty log.
func NewMemLog(name string) *MemLog {
	return &MemLog{name: name, pos: map[string]int{}, leads: map[string]chan struct{}{}}
}

// Append adds events at the end of the log.
func (l *MemLog) Append(evs ...events.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, evs...)
}

func (l *MemLog) Name() string { return l.name }

func (l *MemLog) Lead(ctx context.Context, sink string) (context.Context, func(), error) {
	l.mu.Lock()
	sem := l.leads[sink]
	if sem == nil {
		sem = make(chan struct{}, 1)
		l.leads[sink] = sem
	}
	l.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	lead, cancel := context.WithCancel(ctx)
	var once sync.Once
	return lead, func() { once.Do(func() { cancel(); <-sem }) }, nil
}

func (l *MemLog) Read(ctx context.Context, sink string, most int) (events.Batch, error) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		l.mu.Lock()
		from := l.pos[sink]
		to := min(from+most, len(l.events))
		batch := append([]events.Event(nil), l.events[from:to]...)
		l.mu.Unlock()
		if len(batch) > 0 {
			return events.Batch{Events: batch, Ack: func(context.Context) error {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.pos[sink] = max(l.pos[sink], to)
				return nil
			}}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return events.Batch{}, ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *MemLog) Lag(_ context.Context, sink string) (int64, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := l.pos[sink]
	if from >= len(l.events) {
		return 0, time.Time{}, nil
	}
	return int64(len(l.events) - from), l.events[from].At, nil
}

// runExporter runs an exporter of log to sink until the returned stop is called.
func runExporter(t *testing.T, l events.Log, s events.Sink) (stop func()) {
	x := delivery.New(delivery.Config{
		Sinks: []events.Sink{s}, Batch: 50,
		Logs:           func(context.Context) ([]events.Log, error) { return []events.Log{l}, nil },
		PublishTimeout: 3 * time.Second, RetryBase: 50 * time.Millisecond, RetryMax: time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := x.Run(ctx); err != nil {
			t.Errorf("exporter Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// appendSlowly appends events to l a few at a time, as a rush's scripts do, and returns when
// all are in.
func appendSlowly(l *MemLog, events []events.Event) {
	for i := 0; i < len(events); i += 7 {
		l.Append(events[i:min(i+7, len(events))]...)
		time.Sleep(time.Millisecond)
	}
}

// exporterRush: the exporter follows a log while a rush writes it: every event arrives, in
// order per reservation.
func exporterRush(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	l := NewMemLog("rush")
	runExporter(t, l, u.Sink)
	sent := sinkEvents(1500, 200)
	appendSlowly(l, sent)
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}

// exporterKilled: the exporter stops mid-stream (its batch in flight unacknowledged) and a
// new one, on a new sink to the same destination when the harness can reopen one, goes on:
// nothing is missing, nothing out of order.
func exporterKilled(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	l := NewMemLog("killed")
	stop := runExporter(t, l, u.Sink)
	sent := sinkEvents(900, 90)
	l.Append(sent[:300]...)
	waitReceived(t, u, 150)
	go appendSlowly(l, sent[300:])
	stop()
	next := u.Sink
	if h.Reopen != nil {
		_ = u.Sink.Close()
		next = h.Reopen(t, u)
		t.Cleanup(func() { _ = next.Close() })
	}
	runExporter(t, l, next)
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}

// exporterOutage: the destination is down for 10 s mid-rush; the exporter retries and, once
// it is back, catches up in order.
func exporterOutage(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	if u.Cut == nil {
		t.Skip("the harness cannot cut the destination")
	}
	l := NewMemLog("outage")
	runExporter(t, l, u.Sink)
	sent := sinkEvents(600, 60)
	l.Append(sent[:200]...)
	waitReceived(t, u, 200)
	restore := u.Cut(t)
	appendSlowly(l, sent[200:])
	time.Sleep(10 * time.Second)
	restore()
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}
