package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/sqlstore"
)

// eventExport is the event export of one process (docs/EVENTS.md): its sinks and the exporter
// that feeds them, a background service like the others.
type eventExport struct {
	sinks []events.Sink
	x     *delivery.Exporter
}

// newEventExport opens the sinks of cfg.Export and builds the exporter over the logs of the
// engine: the order store's outbox (refund events on every engine; every event on the memory
// engine) and, when the engine has them (streamLog non-nil: Redis), each sale's stream. The
// outbox's retention is the retention service's (retention.go), with or without a sink.
func newEventExport(ctx context.Context, cfg config, store *sqlstore.Store, streamLog func(saleID string) events.Log, noted func() []string, log *slog.Logger) (*eventExport, error) {
	opts, err := cfg.exportOptions()
	if err != nil {
		return nil, err
	}
	list, err := sinks.OpenAll(ctx, cfg.Export, opts)
	if err != nil {
		return nil, fmt.Errorf("--export: %w", err)
	}
	for _, s := range list {
		log.Info("exporting events", "sink", events.LabelOf(s))
	}
	outbox := delivery.OutboxLog(store, processName(), log)
	logs := func(context.Context) ([]events.Log, error) { return []events.Log{outbox}, nil }
	if streamLog != nil {
		logs = func(ctx context.Context) ([]events.Log, error) {
			ids, err := exportSaleIDs(ctx, store, cfg.ExportGiveUp)
			if err != nil {
				return nil, err
			}
			if noted != nil {
				ids = redisinv.WithNoted(ids, noted())
			}
			out := make([]events.Log, 0, len(ids)+1)
			out = append(out, outbox)
			for _, id := range ids {
				out = append(out, streamLog(id))
			}
			return out, nil
		}
	}
	x := delivery.New(delivery.Config{
		Sinks: list, Logs: logs, DeadLetters: store, GiveUp: cfg.ExportGiveUp, Logger: log,
	})
	return &eventExport{sinks: list, x: x}, nil
}

// close closes the sinks; the exporter must have stopped.
func (e *eventExport) close() error {
	var first error
	for _, s := range e.sinks {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// exportMargin is how long after a sale's last event can have happened its stream is still
// exported: beyond the give-up time every event has reached its sinks or the dead letters.
const exportMargin = time.Minute

// exportSaleIDs lists the sales whose streams may hold events to export: the sales from their
// preheat (seckill.Sale.HotFrom: nothing is written to a stream before) until their hold time,
// the give-up time and a minute after their end (a hold taken at the end expires within its
// hold time; its event is delivered or dead-lettered within the give-up time). A sale changed
// after that (a late payment) is added by the engine's notedSales.
func exportSaleIDs(ctx context.Context, store *sqlstore.Store, giveUp time.Duration) ([]string, error) {
	sales, _, err := store.Sales(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ids := make([]string, 0, 64)
	for _, s := range sales {
		if !now.Before(s.HotFrom()) && now.Before(s.EndsAt.Add(s.HoldDuration()+giveUp+exportMargin)) {
			ids = append(ids, s.ID)
		}
	}
	return ids, nil
}

// processName names this process among the instances: host, pid and a random part.
func processName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}
