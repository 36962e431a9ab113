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
	// second when there are none (a Quiet log: returns a batch marked Idle instead). Until the batch is acknowledged, the next Read — in this
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
	// Idle reports that a Quiet log had nothing new for the sink: the exporter gives the lead
	// back and waits in AwaitWork.
	Idle bool
}

// Quiet is a Log that tells when it may have events for a sink, so that the exporter holds no
// lead and sends no read for a log that has nothing (a sale's Redis stream: its scripts notify
// the readers; docs/DECISIONS.md "Stream readers woken by a notification").
type Quiet interface {
	Log
	// AwaitWork returns nil when the log may have events for sink (at once on the first call),
	// or ctx's error when it ends first. While the log has nothing, it costs next to nothing.
	AwaitWork(ctx context.Context, sink string) error
	// TryLead is Lead without waiting: ok false when another process leads the log for sink
	// (it reads what is new) or the lead cannot be taken now (AwaitWork looks again later).
	TryLead(ctx context.Context, sink string) (lead context.Context, release func(), ok bool)
}
