// Package toxic runs a toxiproxy proxy (github.com/Shopify/toxiproxy/v2) in front of a server,
// in the test's process on loopback, for tests that break the path to a server (a broker, an
// endpoint, Redis) without touching the server itself, which may be shared. It drives
// toxiproxy's own proxy and toxics through its Go API (the ApiServer's collection) rather than
// its HTTP API, whose listener cannot be stopped and ends the whole process if its port is
// taken.
package toxic

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is one toxiproxy proxy to an upstream server.
type Proxy struct {
	// Addr is the proxy's loopback address ("127.0.0.1:port"), to give the client instead of
	// the upstream's.
	Addr string

	t  testing.TB
	p  *toxiproxy.Proxy
	mu sync.Mutex
	// cut is whether the toxics of Cut are in force.
	cut bool
}

// New starts a proxy to upstream (host:port) on a free loopback port, without toxics; it
// stops when t ends.
func New(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "proxy", "127.0.0.1:0", upstream)
	if err := srv.Collection.Add(p, true); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(func() { _ = srv.Collection.Clear() })
	return &Proxy{Addr: p.Listen, t: t, p: p} // Listen is the address bound once started
}

// Add adds a toxic of toxiproxy's (latency, reset_peer, timeout, …) to one direction of every
// connection, open or new ("upstream": to the server; "downstream": to the client), on each
// connection with probability toxicity.
func (x *Proxy) Add(name, kind, stream string, toxicity float32, attrs map[string]any) {
	b, _ := json.Marshal(map[string]any{"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attrs})
	if _, err := x.p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		x.t.Errorf("toxiproxy: add %s: %v", name, err)
	}
}

// Remove removes the toxic Add added as name.
func (x *Proxy) Remove(name string) {
	if err := x.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		x.t.Errorf("toxiproxy: remove %s: %v", name, err)
	}
}

// Cut closes every open connection and every new one at once (accepted, its data dropped and
// closed within a millisecond, as a dead peer would do) until Restore: toxiproxy's timeout
// toxic on both directions. The proxy keeps its port, so the client's address stays the same
// and nothing else can take it meanwhile. A second Cut is harmless.
func (x *Proxy) Cut() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cut {
		return
	}
	x.cut = true
	x.Add("cut_up", "timeout", "upstream", 1, map[string]any{"timeout": 1})
	x.Add("cut_down", "timeout", "downstream", 1, map[string]any{"timeout": 1})
}

// Restore lets connections through again after Cut; without a Cut it does nothing.
func (x *Proxy) Restore() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.cut {
		return
	}
	x.cut = false
	x.Remove("cut_up")
	x.Remove("cut_down")
}

// Outage cuts the path (Cut) and returns Restore: the shape of an outage a conformance suite
// asks of its harness (seckilltest.SinkUnderTest.Cut).
func (x *Proxy) Outage(*testing.T) (restore func()) {
	x.Cut()
	return x.Restore
}

// Stop disables the proxy, toxiproxy's way: its connections are closed and its port is
// closed too, so new connections are refused until Start listens on it again.
func (x *Proxy) Stop() { x.p.Stop() }

// Start enables the proxy again after Stop, on the same address.
func (x *Proxy) Start() error { return x.p.Start() }
