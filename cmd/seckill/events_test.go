package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/sqlstore"
)

const eventsSecret = "0123456789abcdef0123456789abcdef"

// hookShop is a shop endpoint that records the events of verified callbacks.
type hookShop struct {
	mu  sync.Mutex
	got []events.Event
}

func (s *hookShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err := payment.Verify([]byte(eventsSecret), r.Header.Get("Seckill-Signature"), body, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var b struct {
		Events []events.Event `json:"events"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, b.Events...)
	s.mu.Unlock()
}

func (s *hookShop) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.got {
		out = append(out, e.ID)
	}
	return out
}

// outboxStore is a SQLite order store whose outbox holds the events of three holds of sale
// "ev", as the memory engine's pipeline writes them.
func outboxStore(t *testing.T) (db string, store *sqlstore.Store, ids []string) {
	db = "sqlite://" + filepath.Join(t.TempDir(), "events.db")
	store, err := sqlstore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	store.EnableOutbox()
	now := time.Now().UTC().Truncate(time.Millisecond)
	stock := 10
	def, err := seckill.NewSale(seckill.SaleInput{ID: "ev", PriceCents: ptrTo(int64(100)), Stock: &stock, StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSale(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	var evs []seckill.Event
	for i, u := range []string{"u1", "u2", "u3"} {
		exp := now.Add(time.Minute)
		id := seckill.ReservationID("ev", []byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
		evs = append(evs, seckill.Event{At: now, Reservation: seckill.Reservation{ID: id, SaleID: "ev", UserID: u, Quantity: 1,
			Status: seckill.StatusHeld, ExpiresAt: &exp, AmountCents: 100, CreatedAt: now, Seq: uint64(i + 1)}})
		ids = append(ids, id+":held")
	}
	if err := store.ApplyEvents(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	return db, store, ids
}

func ptrTo[T any](v T) *T { return &v }

func eventsEnv(name string) string {
	if name == "SECKILL_EXPORT_SECRET" {
		return eventsSecret
	}
	return ""
}

func runEvents(t *testing.T, ctx context.Context, args ...string) (string, int) {
	out, _, code := runEventsStderr(t, ctx, args...)
	return out, code
}

// runEventsStderr is runEvents with what the command wrote on stderr too.
func runEventsStderr(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(ctx, append([]string{"events"}, args...), eventsEnv, &out, &errb)
	if code != 0 {
		t.Logf("seckill events %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String(), errb.String(), code
}

// TestEventsReplayCountsOneSale: with --sale, replay counts the events it sent, not those of
// other sales it read past (it once said "replayed 4" having sent 3).
func TestEventsReplayCountsOneSale(t *testing.T) {
	db, store, ids := outboxStore(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	stock := 10
	def, err := seckill.NewSale(seckill.SaleInput{ID: "other", PriceCents: ptrTo(int64(100)), Stock: &stock, StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSale(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Minute)
	other := seckill.Reservation{ID: seckill.ReservationID("other", make([]byte, 16)), SaleID: "other", UserID: "u9", Quantity: 1,
		Status: seckill.StatusHeld, ExpiresAt: &exp, AmountCents: 100, CreatedAt: now, Seq: 1}
	if err := store.ApplyEvents(t.Context(), []seckill.Event{{At: now, Reservation: other}}); err != nil {
		t.Fatal(err)
	}
	shop := &hookShop{}
	srv := httptest.NewServer(shop)
	defer srv.Close()
	out, code := runEvents(t, t.Context(), "replay", "--db", db, "--sink", srv.URL+"/hook", "--since", "1h", "--sale", "ev")
	if code != 0 || !strings.Contains(out, "replayed 3 events") || !slices.Equal(shop.ids(), ids) {
		t.Fatalf("exit %d, output %q, the shop got %v; want the 3 events of sale ev, counted as 3", code, out, shop.ids())
	}
}

// TestEventsReplay: replay sends the outbox's events of the range to the sink, signed; a range
// before them sends nothing.
func TestEventsReplay(t *testing.T) {
	db, _, ids := outboxStore(t)
	shop := &hookShop{}
	srv := httptest.NewServer(shop)
	defer srv.Close()
	out, code := runEvents(t, t.Context(), "replay", "--db", db, "--sink", srv.URL+"/hook", "--since", "2h", "--until", "1h")
	if code != 0 || len(shop.ids()) != 0 {
		t.Fatalf("a range before every event: exit %d, %d events sent: %s", code, len(shop.ids()), out)
	}
	out, code = runEvents(t, t.Context(), "replay", "--db", db, "--sink", srv.URL+"/hook", "--since", "1h")
	if code != 0 || !strings.Contains(out, "replayed 3 events") {
		t.Fatalf("exit %d, output %q; want 3 events replayed", code, out)
	}
	if got := shop.ids(); !slices.Equal(got, ids) {
		t.Fatalf("the shop got %v; want %v", got, ids)
	}
	for _, bad := range [][]string{{"replay", "--db", db, "--since", "1h"}, {"replay", "--db", db, "--sink", srv.URL, "--since", "yesterday"},
		{"replay", "--db", db, "--sink", "ftp://x", "--since", "1h"}, {"frobnicate"}} {
		if _, code := runEvents(t, t.Context(), bad...); code == 0 {
			t.Errorf("seckill events %q succeeded; want an error", bad)
		}
	}
}

// TestEventsDeadLetters: dead letters are listed, replayed to their sink once, and then no
// longer listed (unless --all).
func TestEventsDeadLetters(t *testing.T) {
	db, store, _ := outboxStore(t)
	shop := &hookShop{}
	srv := httptest.NewServer(shop)
	defer srv.Close()
	sinkURL := srv.URL + "/hook"
	dead := []events.Event{{ID: "r1:expired", Type: events.TypeExpired, SaleID: "ev", ReservationID: "r1", At: time.Now().UTC()},
		{ID: "r2:paid", Type: events.TypePaid, SaleID: "ev", ReservationID: "r2", At: time.Now().UTC()}}
	if err := store.AddDeadLetters(t.Context(), sinkURL, dead, "503 for 10m", time.Now()); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runEventsStderr(t, t.Context(), "dead-letters", "--db", db, "--sink", "http://127.0.0.1:1/none"); code != 0 || out != "" || !strings.Contains(errs, "0 dead letters") {
		t.Fatalf("no dead letters: exit %d, stdout %q, stderr %q; want nothing listed and a count of 0 on stderr", code, out, errs)
	}
	out, code := runEvents(t, t.Context(), "dead-letters", "--db", db)
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"r1:expired"`) {
		t.Fatalf("list: exit %d, output %q; want the 2 dead letters", code, out)
	}
	out, code = runEvents(t, t.Context(), "dead-letters", "--db", db, "--sink", sinkURL, "--replay")
	if code != 0 || !strings.Contains(out, "replayed 2 dead letters") {
		t.Fatalf("replay: exit %d, output %q", code, out)
	}
	if got := shop.ids(); !slices.Equal(got, []string{"r1:expired", "r2:paid"}) {
		t.Fatalf("the shop got %v; want the dead letters in order", got)
	}
	if out, _ := runEvents(t, t.Context(), "dead-letters", "--db", db); out != "" {
		t.Fatalf("replayed dead letters are still listed: %q", out)
	}
	if out, _ := runEvents(t, t.Context(), "dead-letters", "--db", db, "--all"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "replayed_at") {
		t.Fatalf("--all: %q; want both, with replayed_at", out)
	}
	if _, code := runEvents(t, t.Context(), "dead-letters", "--db", db, "--replay"); code == 0 {
		t.Fatal("--replay without --sink succeeded")
	}
}

// TestEventsTail: tail prints events written after it started.
func TestEventsTail(t *testing.T) {
	db, store, _ := outboxStore(t)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"events", "tail", "--db", db}, eventsEnv, pw, io.Discard)
		_ = pw.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(300 * time.Millisecond)
	now := time.Now().UTC()
	id := seckill.ReservationID("ev", bytes.Repeat([]byte{9}, 16))
	if err := store.ApplyEvents(t.Context(), []seckill.Event{{At: now, Type: seckill.EventGranted, Reservation: seckill.Reservation{
		ID: id, SaleID: "ev", UserID: "u9", Quantity: 1, Status: seckill.StatusHeld, ExpiresAt: &now, AmountCents: 100, CreatedAt: now, Seq: 9}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l := <-lines:
			var e events.Event
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("tail printed %q: %v", l, err)
			}
			if e.ID == id+":granted" {
				cancel()
				if code := <-done; code != 0 {
					t.Fatalf("tail exit %d", code)
				}
				return
			}
		case <-deadline:
			t.Fatal("tail did not print the granted event within 10 s")
		}
	}
}

// TestEventsReplayRedisSegments: on the Redis engine, replay sends the events of a segmented
// sale from every segment's stream: 24 buyers hold units of a 4-segment sale, and the shop gets
// each hold once. Negative control: with segment 2's stream gone, the same replay misses its
// holds, and the comparison says so.
func TestEventsReplayRedisSegments(t *testing.T) {
	url := testenv.Redis(t)
	c, err := redisinv.Dial(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e := redisinv.New(c.Inventory)
	t.Cleanup(func() { _ = e.Close() })
	db, store, _ := outboxStore(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	id := fmt.Sprintf("evseg%d", now.UnixNano())
	def, err := seckill.NewSale(seckill.SaleInput{ID: id, PriceCents: ptrTo(int64(100)), Stock: ptrTo(40), Segments: ptrTo(4),
		StartsAt: ptrTo(now.Add(-time.Minute)), EndsAt: ptrTo(now.Add(time.Hour))}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSale(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.DropSale(context.Background(), id) })
	want := map[string]bool{}
	for i := range 24 {
		res, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: id, UserID: fmt.Sprintf("u%d", i), Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		want[res.Reservation.ID+":held"] = true
	}
	time.Sleep(5 * time.Millisecond) // --until (now) is exclusive, at a stream id's millisecond
	replay := func() (missing []string) {
		t.Helper()
		shop := &hookShop{}
		srv := httptest.NewServer(shop)
		defer srv.Close()
		out, code := runEvents(t, t.Context(), "replay", "--db", db, "--engine", "redis", "--redis-url", url,
			"--sink", srv.URL+"/hook", "--since", "1h", "--sale", id)
		if code != 0 {
			t.Fatalf("replay: exit %d: %s", code, out)
		}
		got := map[string]int{}
		for _, x := range shop.ids() {
			got[x]++
		}
		for k := range want {
			if got[k] != 1 {
				missing = append(missing, fmt.Sprintf("%s sent %d times", k, got[k]))
			}
		}
		return missing
	}
	if m := replay(); len(m) > 0 {
		t.Fatalf("%d holds not sent once, e.g. %v", len(m), m[0])
	}
	gone, err := c.Inventory.Do(t.Context(), c.Inventory.B().Keys().Pattern("seckill:{sale:"+id+"#2.*}:events").Build()).AsStrSlice()
	if err != nil || len(gone) != 1 {
		t.Fatalf("segment 2's stream: %v, %v", gone, err)
	}
	if err := c.Inventory.Do(t.Context(), c.Inventory.B().Unlink().Key(gone[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	m := replay()
	if len(m) == 0 {
		t.Fatal("segment 2's stream gone: the replay still sent every hold (the detector cannot fail)")
	}
	t.Logf("caught: %d holds not sent, e.g. %s", len(m), m[0])
}
