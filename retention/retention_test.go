package retention

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeStore keeps seqs and ids only; its trims follow the Store contract (sqlstore's are
// tested on every dialect in sqlstore/retention_test.go).
type fakeStore struct {
	mu      sync.Mutex
	t0      time.Time
	outbox  []int64 // seqs, oldest first; entry n's at is t0 + n minutes
	slowest int64   // the slowest reader's position; -1: no reader
	dead    []int64 // ids, oldest first; dead letter n failed at t0 + n minutes
	calls   int
	failAt  int // the call that fails (0: none)
}

func (f *fakeStore) call() error {
	f.calls++
	if f.calls == f.failAt {
		return errors.New("database down")
	}
	return nil
}

func (f *fakeStore) at(n int64) time.Time { return f.t0.Add(time.Duration(n) * time.Minute) }

func (f *fakeStore) TrimOutboxOverCount(_ context.Context, most int64, _ time.Time, limit int) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil || len(f.outbox) == 0 {
		return 0, 0, err
	}
	cut := f.outbox[len(f.outbox)-1] - most
	var n, lost int64
	for len(f.outbox) > 0 && f.outbox[0] <= cut && n < int64(limit) {
		if f.slowest >= 0 && f.outbox[0] > f.slowest {
			lost++
		}
		f.outbox, n = f.outbox[1:], n+1
	}
	return n, lost, nil
}

func (f *fakeStore) TrimOutboxAcknowledged(_ context.Context, before, _ time.Time, limit int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return 0, err
	}
	var n int64
	for len(f.outbox) > 0 && f.at(f.outbox[0]).Before(before) && (f.slowest < 0 || f.outbox[0] <= f.slowest) && n < int64(limit) {
		f.outbox, n = f.outbox[1:], n+1
	}
	return n, nil
}

func (f *fakeStore) TrimDeadLetters(_ context.Context, before time.Time, most int64, limit int) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return 0, 0, err
	}
	var n int64
	for len(f.dead) > 0 && (int64(len(f.dead)) > most || f.at(f.dead[0]).Before(before)) && n < int64(limit) {
		f.dead, n = f.dead[1:], n+1
	}
	return n, n, nil
}

func (f *fakeStore) OutboxRows(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.outbox)), nil
}

func (f *fakeStore) DeadLetterRows(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.dead)), f.call()
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// A pass deletes at most Batch × MaxBatches rows of a table, oldest first; the next pass goes
// on. The count bound drops what a sink had not (counted, warned); the age bound never does.
func TestTrimmerBoundsEachPassAndCountsWhatWasLost(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeStore{t0: t0, outbox: seq(1, 100), slowest: 30, dead: seq(1, 20)}
	var logs bytes.Buffer
	streams := func() (int64, int64) { return 42, 1000 }
	tr := New(f, Config{OutboxMaxRows: 60, OutboxKeep: time.Hour, DeadLetterMaxRows: 5, DeadLetterKeep: 24 * time.Hour,
		Batch: 10, MaxBatches: 2, Streams: streams, Now: func() time.Time { return t0.Add(2 * time.Hour) },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	// Pass 1: the count bound (keep 60 of 100) deletes 20 of its 40 (two batches of ten),
	// none past the reader at 30; the age bound (entries older than an hour: all) then
	// deletes up to the reader, 10 more; the dead letters keep 5 of 20: 15 go, in a batch
	// of ten and a short one.
	p, err := tr.RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Pass{OutboxDeleted: 30, OutboxLost: 0, DeadLettersDeleted: 15, DeadLettersUnreplayed: 15}); p != want {
		t.Fatalf("pass 1 = %+v; want %+v", p, want)
	}
	if f.outbox[0] != 31 || len(f.dead) != 5 {
		t.Fatalf("after pass 1 the outbox starts at %d and %d dead letters are left; want 31, 5", f.outbox[0], len(f.dead))
	}
	if strings.Contains(logs.String(), "level=WARN msg=\"retention: the outbox") {
		t.Fatalf("pass 1 lost nothing but warned:\n%s", logs.String())
	}
	// Pass 2: the count bound's other 10 of 40 are past the reader: lost, and warned about.
	p, err = tr.RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Pass{OutboxDeleted: 10, OutboxLost: 10}); p != want {
		t.Fatalf("pass 2 = %+v; want %+v", p, want)
	}
	if f.outbox[0] != 41 || len(f.outbox) != 60 {
		t.Fatalf("after pass 2 the outbox holds %d from %d; want 60 from 41", len(f.outbox), f.outbox[0])
	}
	if !strings.Contains(logs.String(), "unsent=10") {
		t.Fatalf("pass 2 lost 10 entries but the log does not say so:\n%s", logs.String())
	}

	got := gather(t, tr)
	for series, v := range map[string]float64{
		`seckill_retention_lost_total{outbox}`: 10, `seckill_retention_lost_total{dead_letters}`: 15,
		`seckill_retention_deleted_total{outbox}`: 40, `seckill_retention_deleted_total{dead_letters}`: 15,
		`seckill_retention_max_rows{outbox}`: 60, `seckill_retention_max_rows{dead_letters}`: 5, `seckill_retention_max_rows{redis_stream}`: 1000,
		`seckill_retention_max_age_seconds{outbox}`: 3600, `seckill_retention_max_age_seconds{dead_letters}`: 86400,
		`seckill_retention_rows{outbox}`: 60, `seckill_retention_rows{dead_letters}`: 5, `seckill_retention_rows{redis_stream}`: 42,
	} {
		if got[series] != v {
			t.Errorf("%s = %v; want %v (all: %v)", series, got[series], v, got)
		}
	}
}

// gather collects the trimmer's metrics through a pedantic registry (which checks them
// against their descriptions), as name{table} -> value.
func gather(t *testing.T, tr *Trimmer) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[mf.GetName()+"{"+m.Label[0].GetValue()+"}"] = v
		}
	}
	return out
}

// A pass that fails is returned with what it deleted before, which is counted; the rows gauge
// shows nothing until a pass measured the tables.
func TestTrimmerFailedPass(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeStore{t0: t0, outbox: seq(1, 30), slowest: -1, dead: seq(1, 3), failAt: 2}
	tr := New(f, Config{OutboxMaxRows: 10, Batch: 15, MaxBatches: 1, Now: func() time.Time { return t0 }})
	p, err := tr.RunOnce(t.Context())
	if err == nil || p.OutboxDeleted != 15 {
		t.Fatalf("RunOnce = %+v, %v; want 15 deleted and the store's error", p, err)
	}
	got := gather(t, tr)
	if _, ok := got["seckill_retention_rows{outbox}"]; ok {
		t.Fatalf("a rows gauge before any pass measured the tables: %v", got)
	}
	if got["seckill_retention_deleted_total{outbox}"] != 15 {
		t.Fatalf("deleted_total{outbox} = %v; want 15", got["seckill_retention_deleted_total{outbox}"])
	}
}

func TestTrimmerDefaults(t *testing.T) {
	c := New(&fakeStore{}, Config{}).Config()
	if c.OutboxKeep != DefaultOutboxKeep || c.OutboxMaxRows != DefaultOutboxMaxRows || c.DeadLetterKeep != DefaultDeadLetterKeep ||
		c.DeadLetterMaxRows != DefaultDeadLetterMaxRows || c.Interval != DefaultInterval || c.Batch != DefaultBatch || c.MaxBatches != DefaultMaxBatches {
		t.Fatalf("defaults = %+v", c)
	}
}
