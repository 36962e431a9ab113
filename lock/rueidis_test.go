package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill/lock"
)

// TestRueidisPubSub: the rueidis adapter's pub/sub connection confirms (un)subscriptions,
// delivers messages, and after its connection is killed returns the error once, then
// reconnects and subscribes again to what it had (Subscribed again: how waiters learn that a
// hand-off may have been missed), without the channel unsubscribed meanwhile. On a private
// node: the test kills every pub/sub connection of its server.
func TestRueidisPubSub(t *testing.T) {
	rdb := startNodes(t, 1)[0].rdb
	ps := lockRedis(t, rdb).PubSub()
	defer ps.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := fmt.Sprintf("locktest:pubsub:%d:", time.Now().UnixNano())
	next := func() lock.Event {
		t.Helper()
		ev, err := ps.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	want := func(got, want lock.Event) {
		t.Helper()
		if got != want {
			t.Fatalf("event %+v, want %+v", got, want)
		}
	}
	for _, c := range []string{ch + "a", ch + "b"} {
		if err := ps.Subscribe(ctx, c); err != nil {
			t.Fatal(err)
		}
		want(next(), lock.Event{Kind: lock.Subscribed, Channel: c})
	}
	rdb.Publish(ctx, ch+"a", "hello")
	want(next(), lock.Event{Kind: lock.Message, Channel: ch + "a", Payload: "hello"})
	if err := ps.Unsubscribe(ctx, ch+"b"); err != nil {
		t.Fatal(err)
	}
	want(next(), lock.Event{Kind: lock.Unsubscribed, Channel: ch + "b"})

	if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if ev, err := ps.Receive(ctx); err == nil {
		t.Fatalf("after the connection was killed: event %+v, want an error", ev)
	}
	want(next(), lock.Event{Kind: lock.Subscribed, Channel: ch + "a"}) // only a: b was left
	rdb.Publish(ctx, ch+"b", "not for us")
	rdb.Publish(ctx, ch+"a", "again")
	want(next(), lock.Event{Kind: lock.Message, Channel: ch + "a", Payload: "again"})

	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	if ev, err := ps.Receive(ctx); err == nil {
		t.Fatalf("after Close: event %+v, want an error", ev)
	}
}
