package events

import (
	"context"
	"time"
)

// Log is one ordered source of events that the exporter (package exporter) delivers to every
// sink, with a read position per sink kept by the log itself: a sale's Redis stream (one
// consumer group per sink) or the order store's outbox (one cursor row per sink). Each sink
// reads a log on its own, so a slow sink never holds back another.
type Log interface {
	// Name identifies the log in logs and metrics ("sale <id>", "outbox").
	Name() string
	// Lead makes this process the only one exporting the log to sink, waiting until it is or
	// ctx ends. The context it returns ends when the lead is lost (a lease not renewed in
	// time); release gives the lead back for another process to take at once. With one process
	// reading per log and sink, events reach the sink in log order.
	Lead(ctx context.Context, sink string) (lead context.Context, release func(), err error)
	// Read returns the next events for sink in log order, at most max, waiting up to about a
	// second when there are none. Until the batch is acknowledged, the next Read — in this
	// process or the next leader — returns the same events again. A batch may carry no events
	// and still need its Ack (entries with nothing to export).
	Read(ctx context.Context, sink string, max int) (Batch, error)
	// Lag reports how many events sink has not yet acknowledged in this log, and when the
	// oldest of them happened (zero when there is none).
	Lag(ctx context.Context, sink string) (events int64, oldest time.Time, err error)
}

// Batch is what a Log's Read returned.
type Batch struct {
	Events []Event
	// Ack records that the events reached the sink (or its dead letters): the log moves past
	// them for that sink. Nil when there is nothing to acknowledge.
	Ack func(ctx context.Context) error
}
