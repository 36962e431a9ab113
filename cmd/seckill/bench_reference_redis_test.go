package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestBenchReferenceWithRedis: `bench-reference --redis` takes one unit of its own stock key per
// buy, answers as the bare handler does, and removes its key when it stops; without a unit it
// answers nothing it was not told to (a 409 reference has no stock, and still answers 409).
func TestBenchReferenceWithRedis(t *testing.T) {
	url := testenv.Redis(t)
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	// The reference runs in this process: its key carries this process's id.
	pattern := fmt.Sprintf("seckill-bench-reference:%d:*", os.Getpid())
	keys := func() []string {
		t.Helper()
		ks, err := rdb.Do(context.Background(), rdb.B().Keys().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	t.Cleanup(func() { // after a failure, the key of a reference that did not stop
		for _, k := range keys() {
			_ = rdb.Do(context.Background(), rdb.B().Del().Key(k).Build()).Error()
		}
	})
	for _, c := range []struct {
		status int
		left   string // the key's value after 3 buys
	}{{201, "999999999999997"}, {409, "0"}} {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel) // a failure below still stops the reference
		r, w := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- benchReference(ctx, []string{"--addr", "127.0.0.1:0", "--status", fmt.Sprint(c.status), "--bytes", "120", "--redis", url}, w, io.Discard)
			_ = w.Close()
		}()
		addr, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, r) }()
		for range 3 {
			resp, err := http.Post("http://"+strings.TrimSpace(addr)+"/api/v1/sales/s/buy/tok", "application/json", strings.NewReader(`{"quantity":1}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || len(b) != 120 {
				t.Fatalf("answer %d of %d bytes, want %d of 120: %s", resp.StatusCode, len(b), c.status, b)
			}
		}
		ks := keys()
		if len(ks) != 1 {
			t.Fatalf("keys %v, want the reference's one", ks)
		}
		if v, err := rdb.Do(context.Background(), rdb.B().Get().Key(ks[0]).Build()).ToString(); err != nil || v != c.left {
			t.Fatalf("status %d: stock %q (%v) after 3 buys, want %s", c.status, v, err, c.left)
		}
		// A reference killed before it removes its key leaves one that expires.
		if ttl, err := rdb.Do(context.Background(), rdb.B().Ttl().Key(ks[0]).Build()).AsInt64(); err != nil || ttl <= 0 {
			t.Fatalf("key %s has TTL %d (%v): want one, so that a killed reference leaves no key for good", ks[0], ttl, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if ks := keys(); len(ks) != 0 {
			t.Fatalf("keys %v left after the reference stopped", ks)
		}
	}
}
