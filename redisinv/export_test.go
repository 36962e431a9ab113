package redisinv

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
)

// exportRig is a sale on a fresh engine with its stream, a lock client for the export lead,
// and the order store's group driven by hand (read and acknowledge), so that the order store
// and an export sink can be put at any distance from each other.
type exportRig struct {
	t     *testing.T
	rdb   rueidis.Client
	e     *Engine
	locks *lock.Client
	sale  string
}

func newExportRig(t *testing.T, opts ...Option) *exportRig {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Now())
	r := &exportRig{t: t, rdb: c.Inventory, e: newTestEngine(t, c.Inventory, clock, opts...), sale: "ex"}
	r.locks = lock.New(c.Locks, &lock.Options{Lease: 3 * time.Second})
	t.Cleanup(func() { _ = r.locks.Close() })
	now := clock.Now()
	stock := 1000
	def, err := seckill.NewSale(seckill.SaleInput{ID: r.sale, PriceCents: ptr(int64(10)), Stock: &stock, HoldSeconds: ptr(60), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

// buy makes n holds, each its own script call (one stream entry each), and returns their ids.
func (r *exportRig) buy(n int, tag string) []string {
	r.t.Helper()
	ids := make([]string, n)
	for i := range n {
		res, err := r.e.Buy(r.t.Context(), seckill.BuyRequest{SaleID: r.sale, UserID: fmt.Sprintf("%s%d", tag, i), Quantity: 1})
		if err != nil {
			r.t.Fatal(err)
		}
		ids[i] = res.Reservation.ID
	}
	return ids
}

// ordersCatchUp plays the order store's consumer: it reads every entry through the order
// store's group and acknowledges it.
func (r *exportRig) ordersCatchUp() {
	r.t.Helper()
	ctx, key := r.t.Context(), r.e.streamKey(r.sale)
	err := r.rdb.Do(ctx, r.rdb.B().XgroupCreate().Key(key).Group(Group).Id("0").Mkstream().Build()).Error()
	if e, ok := rueidis.IsRedisErr(err); err != nil && !(ok && e.IsBusyGroup()) {
		r.t.Fatal(err)
	}
	for {
		res, err := r.rdb.Do(ctx, r.rdb.B().Xreadgroup().Group(Group, "orders").Count(1000).Streams().Key(key).Id(">").Build()).AsXReadSlices()
		if rueidis.IsRedisNil(err) || (err == nil && len(res[key]) == 0) {
			return
		}
		if err != nil {
			r.t.Fatal(err)
		}
		for _, en := range res[key] {
			if err := r.rdb.Do(ctx, r.rdb.B().Xack().Key(key).Group(Group).Id(en.ID).Build()).Error(); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// exportAll reads the sale's stream as sink until a read comes back empty, acknowledging
// each batch, and returns the reservation ids of the held events it got, in order.
func (r *exportRig) exportAll(l events.Log, sink string) []string {
	r.t.Helper()
	var got []string
	for {
		b, err := l.Read(r.t.Context(), sink, 7)
		if err != nil {
			r.t.Fatal(err)
		}
		if b.Ack == nil {
			return got
		}
		for _, ev := range b.Events {
			if ev.Type == events.TypeHeld {
				got = append(got, ev.ReservationID)
			}
		}
		if err := b.Ack(r.t.Context()); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *exportRig) xlen() int64 {
	n, err := r.rdb.Do(context.Background(), r.rdb.B().Xlen().Key(r.e.streamKey(r.sale)).Build()).AsInt64()
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// missing is the detector: the ids written that the sink never got.
func missing(written, got []string) []string {
	var out []string
	for _, id := range written {
		if !slices.Contains(got, id) {
			out = append(out, id)
		}
	}
	return out
}

// TestTrimWaitsForTheSlowestReader: the order store has stored everything and an export sink
// has read nothing; trimming keeps every entry the sink has not acknowledged, and once it has,
// the stream shrinks. The negative control trims by the order store's group alone (the old
// rule) and the detector sees the sink lose entries.
func TestTrimWaitsForTheSlowestReader(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "slowest", true: "control-orders-only"}[control], func(t *testing.T) {
			r := newExportRig(t, WithStreamLimits(-1, 0))
			l := r.e.ExportLog(r.sale, r.locks)
			const sink = "http://shop.test/hook"
			if b, err := l.Read(t.Context(), sink, 10); err != nil || len(b.Events) != 0 { // creates the sink's group
				t.Fatalf("first read: %v, %d events", err, len(b.Events))
			}
			written := r.buy(20, "a")
			r.ordersCatchUp()
			if control {
				key := r.e.streamKey(r.sale)
				last, err := r.rdb.Do(t.Context(), r.rdb.B().Xrevrange().Key(key).End("+").Start("-").Count(1).Build()).AsXRange()
				if err != nil {
					t.Fatal(err)
				}
				if err := r.rdb.Do(t.Context(), r.rdb.B().Xtrim().Key(key).Minid().Threshold(last[0].ID).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			} else if err := r.e.trimStream(t.Context(), r.sale); err != nil {
				t.Fatal(err)
			}
			got := r.exportAll(l, sink)
			lost := missing(written, got)
			if control {
				if len(lost) == 0 {
					t.Fatal("negative control: trimming by the order store alone lost nothing; the detector cannot see a loss")
				}
				return
			}
			if len(lost) > 0 {
				t.Fatalf("the sink lost %d of %d events to trimming: %v", len(lost), len(written), lost)
			}
			if !slices.Equal(got, written) {
				t.Fatalf("sink got %v; want the holds in order %v", got, written)
			}
			if err := r.e.trimStream(t.Context(), r.sale); err != nil {
				t.Fatal(err)
			}
			if n := r.xlen(); n > 1 {
				t.Fatalf("stream keeps %d entries after every reader acknowledged them; want at most 1", n)
			}
		})
	}
}

// TestTrimWaitsForTheOrderStore: an export sink ahead of the order store does not let the
// stream lose what the order store has not stored.
func TestTrimWaitsForTheOrderStore(t *testing.T) {
	r := newExportRig(t, WithStreamLimits(-1, 0))
	r.ordersCatchUp() // creates the order store's group; nothing to read yet
	l := r.e.ExportLog(r.sale, r.locks)
	if _, err := l.Read(t.Context(), "nats://x", 10); err != nil {
		t.Fatal(err)
	}
	r.buy(10, "b")
	r.exportAll(l, "nats://x")
	if err := r.e.trimStream(t.Context(), r.sale); err != nil {
		t.Fatal(err)
	}
	if n := r.xlen(); n != 10 {
		t.Fatalf("stream has %d entries; want all 10 kept for the order store", n)
	}
}

// TestExportLogResendsWhatWasNotAcknowledged: a leader that read a batch and died before
// acknowledging it leaves it to the next leader, which sends it first, in order, with the
// same event ids; after the acknowledgement only new events come.
func TestExportLogResendsWhatWasNotAcknowledged(t *testing.T) {
	r := newExportRig(t)
	const sink = "amqp://broker"
	first := r.e.ExportLog(r.sale, r.locks)
	if _, err := first.Read(t.Context(), sink, 10); err != nil {
		t.Fatal(err)
	}
	r.buy(5, "c")
	b1, err := first.Read(t.Context(), sink, 3)
	if err != nil || len(b1.Events) != 3 {
		t.Fatalf("read: %v, %d events; want 3", err, len(b1.Events))
	}
	// The leader dies here. The next one (a fresh log, as another instance builds it):
	next := r.e.ExportLog(r.sale, r.locks)
	b2, err := next.Read(t.Context(), sink, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids(b2.Events) == nil || !slices.Equal(ids(b2.Events), ids(b1.Events)) {
		t.Fatalf("the next leader read %v; want the unacknowledged batch %v first", ids(b2.Events), ids(b1.Events))
	}
	if err := b2.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	b3, err := next.Read(t.Context(), sink, 10)
	if err != nil || len(b3.Events) != 2 {
		t.Fatalf("after the ack: %v, %d events; want the 2 never read", err, len(b3.Events))
	}
	n, oldest, err := next.Lag(t.Context(), sink)
	if err != nil || n != 2 || oldest.IsZero() {
		t.Fatalf("lag %d, oldest %v, err %v; want 2 unacknowledged entries with a time", n, oldest, err)
	}
	if err := b3.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, _, err := next.Lag(t.Context(), sink); err != nil || n != 0 {
		t.Fatalf("lag %d, err %v after everything was acknowledged; want 0", n, err)
	}
}

// TestExportLeadIsExclusive: one process leads a sale's export to a sink at a time; the next
// takes over when the first releases it.
func TestExportLeadIsExclusive(t *testing.T) {
	r := newExportRig(t)
	a, b := r.e.ExportLog(r.sale, r.locks), r.e.ExportLog(r.sale, lock.New(dialT(t, testenv.Redis(t)).Locks, &lock.Options{Lease: 3 * time.Second}))
	lead, release, err := a.Lead(t.Context(), "kafka://k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if _, _, err := b.Lead(ctx, "kafka://k"); err == nil {
		t.Fatal("a second process took the lead while the first held it")
	}
	release()
	if lead.Err() == nil {
		t.Fatal("the lead's context lives on after release")
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	_, release2, err := b.Lead(ctx2, "kafka://k")
	if err != nil {
		t.Fatalf("the second process could not take the released lead: %v", err)
	}
	release2()
}

// TestStreamMaximum: past the maximum, the oldest entries go even though an export sink has
// not read them — but never one the order store has not stored.
func TestStreamMaximum(t *testing.T) {
	r := newExportRig(t, WithStreamLimits(-1, 5))
	l := r.e.ExportLog(r.sale, r.locks)
	if _, err := l.Read(t.Context(), "http://slow", 10); err != nil {
		t.Fatal(err)
	}
	r.ordersCatchUp()
	r.buy(12, "d")
	if err := r.e.trimStream(t.Context(), r.sale); err != nil {
		t.Fatal(err)
	}
	if n := r.xlen(); n != 12 {
		t.Fatalf("stream has %d entries while the order store has stored none; want all 12", n)
	}
	if entries, most := r.e.StreamFill(); entries != 12 || most != 5 {
		t.Fatalf("StreamFill = %d of %d; want 12 of 5 (/metrics shows the stream over its bound)", entries, most)
	}
	r.ordersCatchUp()
	if err := r.e.trimStream(t.Context(), r.sale); err != nil {
		t.Fatal(err)
	}
	if n := r.xlen(); n != 5 {
		t.Fatalf("stream has %d entries past a maximum of 5 with the order store caught up; want 5", n)
	}
	if entries, _ := r.e.StreamFill(); entries != 5 {
		t.Fatalf("StreamFill = %d after the trim; want 5", entries)
	}
}

func ids(events []events.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

// TestExportLeadEndsWithItsContext: the lead ends when the exporter stops (its context is
// cancelled), not only when the lock's lease is lost: otherwise an instance exporting a sale
// could not shut down (its pair goroutine would follow the lead forever).
func TestExportLeadEndsWithItsContext(t *testing.T) {
	r := newExportRig(t)
	ctx, cancel := context.WithCancel(t.Context())
	lead, release, err := r.e.ExportLog(r.sale, r.locks).Lead(ctx, "http://shop/hook")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	cancel()
	select {
	case <-lead.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lead lives on after the exporter's context was cancelled")
	}
}
