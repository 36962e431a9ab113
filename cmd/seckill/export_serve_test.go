package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill/events"
)

// TestServeExportsTheMemoryEngine: `serve` on the embedded default with --export delivers a
// rush's events, signed, to the shop: every reservation the shop hears of ends in a final
// state, and its paid events add up to the units sold.
func TestServeExportsTheMemoryEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	shop := &hookShop{}
	srv := httptest.NewServer(shop)
	defer srv.Close()
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "b.db"), Dev: true,
		ExportSecret: eventsSecret, Export: srv.URL + "/hook", ExportGiveUp: time.Hour, HTTP: httpLimits{}.withoutPerAddr()} // bench's crowd: one address
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	if out, err := benchAgainst(t, a, cfg); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	// Wait until every hold the shop heard of has ended and 20 units are paid.
	deadline := time.Now().Add(60 * time.Second)
	for {
		last, paid := map[string]events.Event{}, 0
		shop.mu.Lock()
		for _, e := range shop.got {
			last[e.ReservationID] = e
		}
		shop.mu.Unlock()
		open := 0
		for _, e := range last {
			switch e.Type {
			case events.TypePaid, events.TypeLatePaid:
				paid += e.Quantity
			case events.TypeHeld, events.TypeQueued, events.TypeGranted:
				open++
			}
		}
		if paid == 20 && open == 0 && len(last) > 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shop heard of %d reservations, %d paid units, %d not ended; want 20 paid and every one ended", len(last), paid, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
