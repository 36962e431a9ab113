package httpapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/clientaddr"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/service"
)

// countingInventory counts the reservation reads of the engine, by id.
type countingInventory struct {
	seckill.Inventory
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingInventory) Reservation(ctx context.Context, id string) (seckill.Reservation, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.Inventory.Reservation(ctx, id)
}

func (c *countingInventory) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[id]
}

// TestWatchedReservationReadsStayFlat: streams multiply, each naming the buyer's one real
// reservation and seven made-up ids of the sale. Each made-up id is read once (the check on
// connect) and never again however often the sale changes; the real one is read once per
// change, not once per stream and change. On the old code every stream read its eight ids on
// every change.
func TestWatchedReservationReadsStayFlat(t *testing.T) {
	const streams, changes = 12, 10
	inv := &countingInventory{Inventory: memory.New(seckill.SystemClock{}), reads: map[string]int{}}
	secret := []byte("test-auth-secret-0123456789abcdef")
	svc := service.New(service.Config{Inventory: inv, AuthSecret: secret})
	api := New(Config{Service: svc, AuthSecret: secret, AdminToken: "admin", EventInterval: 10 * time.Millisecond, MaxStreamsPerUser: streams})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		api.Close()
		ts.Close()
	})
	ctx := context.Background()
	now := time.Now()
	price, stock, start, end := int64(100), 100, now.Add(-time.Minute), now.Add(time.Hour)
	sale, err := seckill.NewSale(seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock, StartsAt: &start, EndsAt: &end}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.LoadSale(ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	buy := func(user string) seckill.Reservation {
		t.Helper()
		r, err := inv.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r.Reservation
	}
	real := buy("alice").ID
	token, err := MintToken(secret, "alice", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	var bogus []string
	var saleEvents []chan string
	for range streams {
		q := "?reservation=" + real
		for range 7 {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			id := "s-" + hex.EncodeToString(b)
			bogus = append(bogus, id)
			q += "&reservation=" + id
		}
		saleEvents = append(saleEvents, openStream(t, ts.URL+"/api/v1/sales/s/events"+q, token))
	}
	time.Sleep(100 * time.Millisecond) // the feed's first reads of the newly watched one
	realBefore := inv.count(real)
	for _, id := range bogus {
		if n := inv.count(id); n != 1 {
			t.Fatalf("made-up id read %d times on connect, want 1", n)
		}
	}

	began := time.Now()
	for i := range changes {
		buy(fmt.Sprintf("u%d", i))
		// Every stream sees the change (so the feed has read the watched reservations after it).
		want := fmt.Sprintf(`"held":%d`, i+2)
		for _, ch := range saleEvents {
			waitFor(t, ch, want)
		}
	}
	time.Sleep(50 * time.Millisecond) // the tick that read the last change reads its reservations
	for _, id := range bogus {
		if n := inv.count(id); n != 1 {
			t.Fatalf("a made-up id was read %d times, want once (on connect)", n)
		}
	}
	// One read per change, a safety-net read per reservationRecheck, and one spare.
	allowed := changes + int(time.Since(began)/reservationRecheck) + 2
	if n := inv.count(real) - realBefore; n > allowed {
		t.Fatalf("the watched reservation was read %d times for %d sale changes and %d streams, want at most %d", n, changes, streams, allowed)
	}
}

// openStream opens an event stream and sends the data of its sale events to the channel
// answered, until the test ends.
func openStream(t *testing.T, url, token string) chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		res.Body.Close()
		t.Fatalf("stream: %d", res.StatusCode)
	}
	ch := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: ") && name == "sale":
				ch <- line
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ch
}

// waitFor waits for a sale event containing want.
func waitFor(t *testing.T, ch chan string, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case d := <-ch:
			if strings.Contains(d, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no sale event with %s within 10 s", want)
		}
	}
}

// TestPerAddrTableBounded: the per-address table keeps an entry only while its count is above
// zero (so it never holds more entries than the bound it shares), refuses a key at its bound
// while others are still taken, and lets a released slot be taken again.
func TestPerAddrTableBounded(t *testing.T) {
	p := newPerAddr(2)
	key := func(i int) netip.Prefix {
		return clientaddr.Key(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	for i := range 1000 {
		for range 2 {
			if !p.acquire(key(i)) {
				t.Fatalf("key %d refused within its bound", i)
			}
		}
		if p.acquire(key(i)) {
			t.Fatalf("key %d taken over its bound", i)
		}
	}
	if n := p.len(); n != 1000 {
		t.Fatalf("%d entries for 1000 keys holding slots", n)
	}
	for i := range 1000 {
		p.release(key(i))
		p.release(key(i))
	}
	if n := p.len(); n != 0 {
		t.Fatalf("%d entries left once every slot was released; want 0", n)
	}
	if !p.acquire(key(7)) {
		t.Fatal("a released slot cannot be taken again")
	}
	// IPv6: one /64 is one client.
	a, b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::2")
	if !p.acquire(clientaddr.Key(a)) || !p.acquire(clientaddr.Key(b)) || p.acquire(clientaddr.Key(a)) {
		t.Fatal("two addresses of one /64 are not one client")
	}
}

// TestReadyFlightShared: probes that arrive while the checks run share that run (one run for
// ten probes, each gets its answer); the next probe after it starts a new run.
func TestReadyFlightShared(t *testing.T) {
	var f readyFlight
	var calls atomic.Int32
	release := make(chan struct{})
	run := func(context.Context) (map[string]any, error) {
		calls.Add(1)
		<-release
		return map[string]any{"status": "ready"}, nil
	}
	answers := make(chan any, 10)
	for range 10 {
		go func() {
			a, err := f.do(context.Background(), run)
			if err != nil {
				answers <- err
				return
			}
			answers <- a["status"]
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		joined := 0
		if f.cur != nil {
			joined = f.cur.joined
		}
		f.mu.Unlock()
		if joined == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d probes joined the run, %d runs; want 9 joined, 1 run", joined, calls.Load())
		}
	}
	close(release)
	for range 10 {
		if a := <-answers; a != "ready" {
			t.Fatalf("a probe's answer: %v", a)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d runs for ten concurrent probes; want 1", n)
	}
	if _, err := f.do(context.Background(), run); err != nil || calls.Load() != 2 {
		t.Fatalf("a probe after the run: %v, %d runs; want a new run", err, calls.Load())
	}
}
