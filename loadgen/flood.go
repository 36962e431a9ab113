package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// FloodConfig is a calibration run: nothing but buys, each by a new user, as fast as Clients
// connections can send them, for Duration. The same flood is sent to a seckill instance and to
// a reference server, so that the ratio of their rates says what the buy path costs.
type FloodConfig struct {
	Target   string
	SaleID   string
	Clients  int
	Duration time.Duration
	// Buyer returns the i-th buyer's purchase path and bearer token; it is called for every
	// buyer before the clock starts, so that the client spends its time sending.
	Buyer func(i int) (path, token string)
	Want  int // the status every answer must have (201 for holds, 409 for sold out)
	Tag   string
}

// FloodResult is a flood's rate and latency.
type FloodResult struct {
	Rate    float64
	Latency *hdrhistogram.Histogram // microseconds
	Sent    int64
}

// Flood runs one calibration flood. Any answer other than Want, or a transport error, is an
// error: a rate is only worth comparing if every request did what it was meant to.
func Flood(ctx context.Context, cfg FloodConfig) (FloodResult, error) {
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients, MaxConnsPerHost: cfg.Clients}}
	defer client.CloseIdleConnections()
	// More buyers than the client could send in the time: about 20 000/s here at most.
	per := int(cfg.Duration.Seconds()*25000)/cfg.Clients + 100
	type buyer struct{ url, auth string }
	buyers := make([][]buyer, cfg.Clients)
	var mint sync.WaitGroup
	for c := range cfg.Clients {
		mint.Go(func() {
			bs := make([]buyer, per)
			for j := range bs {
				path, tok := cfg.Buyer(c*per + j)
				bs[j] = buyer{cfg.Target + path, "Bearer " + tok}
			}
			buyers[c] = bs
		})
	}
	mint.Wait()
	hist := newHist()
	var mu sync.Mutex
	var ok, bad atomic.Int64
	var firstBad atomic.Value
	var wg sync.WaitGroup
	body := []byte(`{"quantity":1}`)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for c := range cfg.Clients {
		wg.Go(func() {
			local := newHist()
			for _, b := range buyers[c] {
				if !time.Now().Before(deadline) || ctx.Err() != nil {
					break
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", b.url, bytes.NewReader(body))
				req.Header.Set("Authorization", b.auth)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				_ = local.RecordValue(max(1, time.Since(t0).Microseconds()))
				if resp.StatusCode != cfg.Want {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("status %d", resp.StatusCode))
					continue
				}
				ok.Add(1)
			}
			mu.Lock()
			hist.Merge(local)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := bad.Load(); n > 0 {
		return FloodResult{}, fmt.Errorf("%s: %d of %d requests failed or were not answered %d (first: %v)",
			cfg.Target, n, n+ok.Load(), cfg.Want, firstBad.Load())
	}
	return FloodResult{Rate: float64(ok.Load()) / elapsed.Seconds(), Latency: hist, Sent: ok.Load()}, nil
}
