package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// TestMain lets the test binary be `seckill bench-reference`: the bench starts its references
// by running its own executable (startReferenceProcess), which in a test is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "bench-reference" {
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// aClosingTicket is a closing ticket as a room's stream writes it.
func aClosingTicket(t *testing.T) []byte {
	now := time.Now().UTC()
	b, err := json.Marshal(service.TicketView{SaleID: "s", Entrant: strings.Repeat("e", 32), State: seckill.TicketSoldOut,
		Index: 4242, JoinedAt: now, ServerTime: now})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// aTellRun is a run that reads the reference at urls as a room's buyers read their streams.
func aTellRun(urls []string) *roomRun {
	room := &roomRun{o: benchOptions{authSecret: "tell-reference-test-secret-0123456789abcdef"},
		r: roomOptions{toldWithin: time.Second}, shc: &http.Client{Transport: &http.Transport{}}}
	return room.tellRun(urls)
}

// TestTellReference: the reference, in a process of its own on three ports, tells 200 live
// streams read by the buyers' code, and every figure is there: 200 opened, waiting at the tell
// and told, the reads' quantiles in order. No bound on the times: the machine's, not the code's.
func TestTellReference(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference process and 200 streams")
	}
	urls, stop, err := startTellReference(3, aClosingTicket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if len(urls) != 3 {
		t.Fatalf("reference listens on %v, want 3 addresses", urls)
	}
	got, err := measureTell(t.Context(), aTellRun(urls), 200, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.Streams != 200 || got.Open != 200 || got.Told != 200 || got.FirstFailure != "" || got.WrittenMs < 0 ||
		got.ReadP50Ms < 0 || got.ReadP99Ms < got.ReadP50Ms || got.ReadMaxMs < got.ReadP99Ms || got.Within > got.Told || got.WithinMs != 1000 {
		t.Fatalf("measured %+v: want 200 streams opened, waiting and told, p50 ≤ p99 ≤ max", got)
	}
	var out bytes.Buffer
	got.writeText(&out)
	if !strings.Contains(out.String(), "told 200 streams") || strings.Contains(out.String(), "NOT told") {
		t.Errorf("text: %s", out.String())
	}
}

// TestTellReferenceCatchesSilence: the negative control. A reference that lets its streams
// open and answers the tell but writes no closing ticket is measured as streams not told, and
// said so; so is one that was told nothing to wait for.
func TestTellReferenceCatchesSilence(t *testing.T) {
	ref, err := newTellReference(aClosingTicket(t))
	if err != nil {
		t.Fatal(err)
	}
	ref.mute = true
	srv := httptest.NewServer(ref.handler())
	defer srv.Close()
	got, err := measureTell(t.Context(), aTellRun([]string{srv.URL}), 20, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got.Streams != 20 || got.Open != 20 || got.Told != 0 || got.Within != 0 {
		t.Fatalf("a mute reference measured %+v: want 20 opened and waiting, none told", got)
	}
	var out bytes.Buffer
	got.writeText(&out)
	if !strings.Contains(out.String(), "20 of 20 streams NOT told") {
		t.Errorf("text does not say the streams were not told: %s", out.String())
	}
	if _, err := newTellReference([]byte("not json")); err == nil {
		t.Error("a ticket that is not JSON was taken")
	}
}
