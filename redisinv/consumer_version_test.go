package redisinv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestConsumerFindsStreamWentBack: the order-store consumer alone finds a sale whose Redis
// went back in time, and has it rebuilt. Three buys are made and the sale's keys snapshotted
// (DUMP: the stream holds their three entries, no consumer has read them); the consumer then
// stores them and three more (its highest version read: the sixth's; the database's: the
// same). The snapshot is put back (RESTORE): the stream and its group are as before the
// consumer ran, so the group delivers the first three entries again, below the highest the
// consumer read. The consumer runs on an engine of its own that makes no call on the sale
// after the restore (its trims are an hour apart, no sweeper, no buyer): only its comparison
// can find the sale stale. The detector: the sale rebuilt, i.e. the database's recorded
// version at or above a rebuild's epoch, and the consumer's Stale count. The negative control
// switches the check off (withoutVersionCheck): the consumer stores the same entries again and
// the stale sale stays as it is.
func TestConsumerFindsStreamWentBack(t *testing.T) {
	url := testenv.Redis(t)
	for _, check := range []bool{true, false} {
		name := "check on"
		if !check {
			name = "negative control: check off"
		}
		t.Run(name, func(t *testing.T) {
			rebuilt, stale, held := consumerWentBack(t, url, check)
			t.Logf("after the restore: sale rebuilt %v, consumer stale batches %d, units held in Redis %d (6 bought)", rebuilt, stale, held)
			if !check {
				if rebuilt || stale != 0 || held != 3 {
					t.Fatalf("negative control: with the check off the stale sale did not stay stale (rebuilt %v, stale %d, held %d): the detector cannot fail",
						rebuilt, stale, held)
				}
				return
			}
			if !rebuilt || stale == 0 || held != 6 {
				t.Errorf("the consumer did not have the stale sale rebuilt (rebuilt %v, stale batches %d, held %d, want 6)", rebuilt, stale, held)
			}
		})
	}
}

// consumerWentBack runs the scenario and reports whether the sale was rebuilt (the database's
// version reached a rebuild's epoch within 5 s), the consumer's stale count, and the units
// held in Redis at the end (read by an engine without the check: 3 if the sale stayed stale).
func consumerWentBack(t *testing.T, url string, check bool) (rebuilt bool, stale uint64, held int) {
	ctx := t.Context()
	c := dialT(t, url)
	store := sqliteStoreT(t)
	now := time.Now().UTC()
	const id = "cv"
	def, locks, prefix := versionRig(t, c, store, id, now)

	seller := New(c.Inventory, WithPrefix(prefix), WithRebuild(store, locks))
	t.Cleanup(func() { _ = seller.Close() })
	if err := seller.LoadSale(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	buy := func(user string) {
		t.Helper()
		if _, err := seller.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: user, Quantity: 1}); err != nil {
			t.Fatalf("Buy(%s): %v", user, err)
		}
	}
	for _, u := range []string{"u1", "u2", "u3"} {
		buy(u)
	}
	keys := seller.keys(id)
	snap := dumpKeys(t, c.Inventory, keys)

	opts := []Option{WithPrefix(prefix), WithRebuild(store, locks)}
	if !check {
		opts = append(opts, withoutVersionCheck())
	}
	worker := New(c.Inventory, opts...)
	t.Cleanup(func() { _ = worker.Close() })
	cons := worker.NewConsumer(store, ConsumerConfig{
		List:       func(context.Context) ([]string, error) { return []string{id}, nil },
		TrimEvery:  time.Hour,              // its first trim, at its start, is its only call on the sale
		CheckEvery: 100 * time.Millisecond, // a restored stream notifies nobody: the check finds it
	})
	cctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = cons.Run(cctx) })
	t.Cleanup(func() { stop(); wg.Wait() })

	for _, u := range []string{"u4", "u5", "u6"} {
		buy(u)
	}
	top := seller.versionFloor(id).floor
	redistest.WaitUntil(t, 10*time.Second, "the consumer stored the six buys", func() bool {
		v, err := store.SaleVersion(ctx, id)
		return err == nil && v >= top
	})
	storedBefore := cons.Stored()

	restoreKeys(t, c.Inventory, keys, snap) // Redis went back in time, its stream with it

	redistest.WaitUntil(t, 10*time.Second, "the consumer read the restored stream", func() bool {
		return cons.Stored() >= storedBefore+3
	})
	deadline := time.Now().Add(5 * time.Second)
	for !rebuilt && time.Now().Before(deadline) {
		v, err := store.SaleVersion(ctx, id)
		rebuilt = err == nil && v >= epoch
		if !rebuilt {
			time.Sleep(50 * time.Millisecond)
		}
	}
	reader := New(c.Inventory, WithPrefix(prefix)) // no rebuild: no check, no side effect
	t.Cleanup(func() { _ = reader.Close() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, st, err := reader.Sale(ctx, id)
		switch {
		case err == nil && (!rebuilt || st.Held == 6): // a rebuild's restores may still be going on
			return rebuilt, cons.Stale(), st.Held
		case err != nil && !isCode(err, seckill.CodeUnavailable):
			t.Fatalf("Sale: %v", err)
		case time.Now().After(deadline):
			return rebuilt, cons.Stale(), st.Held
		}
	}
}
