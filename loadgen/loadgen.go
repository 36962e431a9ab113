// Package loadgen simulates a flash-sale crowd over HTTP against a running seckill server: each
// buyer fetches the purchase path, buys, and then pays promptly, cancels, abandons its hold,
// pays late or retries, as a real crowd does. It measures latency and throughput and counts
// what happened, so `seckill demo` (and later `seckill bench`) can print and check it.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Behavior is what a simulated buyer does once it holds a unit.
type Behavior int

// Behaviors.
const (
	PayPromptly Behavior = iota // pays at once; the gateway answers quickly
	Cancel                      // cancels the hold
	Abandon                     // never pays; the hold expires
	PayLate                     // pays, but the gateway's webhook arrives after the hold expired
	Retry                       // repeats the buy with the same Idempotency-Key, then pays
)

var behaviorNames = [...]string{"pay", "cancel", "abandon", "pay_late", "retry"}

func (b Behavior) String() string { return behaviorNames[b] }

// Mix is the share (in percent) of each behavior; the rest pays promptly.
type Mix struct {
	Cancel, Abandon, PayLate, Retry int
}

// DefaultMix is the demo's crowd.
var DefaultMix = Mix{Cancel: 10, Abandon: 20, PayLate: 10, Retry: 10}

// Config describes one run.
type Config struct {
	BaseURL     string
	SaleID      string
	Buyers      int
	Concurrency int
	Mix         Mix
	Seed        uint64
	// Token returns a bearer token for a user id.
	Token func(user string) (string, error)
	// Deadline bounds the whole run; buyers still waiting then give up.
	Deadline time.Duration
	// Progress, if set, is called about every 200 ms with buyers done so far.
	Progress func(done, total int)
	Client   *http.Client
}

// Result counts what happened.
type Result struct {
	Buyers         int
	Requests       int64
	Errors         int64 // transport errors and 5xx answers
	Held           int64 // buys answered 201
	Queued         int64 // buys answered 202
	Handoffs       int64 // queued buyers that later got a hold
	Rejected       int64 // queued buyers rejected
	SoldOut        int64 // buys answered sold_out
	QueueFull      int64 // buys answered queue_full (retried)
	RateLimited    int64
	Replays        int64 // idempotent replays answered 200
	Cancelled      int64
	Abandoned      int64
	PaymentsBegun  int64
	Expired        int64 // holds observed expired
	Elapsed        time.Duration
	Latency        *hdrhistogram.Histogram // microseconds
	ReplayMismatch int64                   // a replay that returned another reservation (must be 0)
}

// BehaviorOf is the behavior of user, fixed by the seed so that the payment gateway of the
// demo can make exactly the late payers' webhooks late.
func BehaviorOf(user string, seed uint64, mix Mix) Behavior {
	h := fnv.New64a()
	_, _ = h.Write([]byte(user))
	_, _ = h.Write([]byte(strconv.FormatUint(seed, 10)))
	p := int(h.Sum64() % 100)
	switch {
	case p < mix.Cancel:
		return Cancel
	case p < mix.Cancel+mix.Abandon:
		return Abandon
	case p < mix.Cancel+mix.Abandon+mix.PayLate:
		return PayLate
	case p < mix.Cancel+mix.Abandon+mix.PayLate+mix.Retry:
		return Retry
	}
	return PayPromptly
}

// UserName is the id of the i-th simulated buyer.
func UserName(i int) string { return "buyer-" + strconv.Itoa(i) }

type runner struct {
	cfg   Config
	res   Result
	mu    sync.Mutex // guards res.Latency
	tok   sync.Map
	start time.Time
}

// Run simulates cfg.Buyers buyers with cfg.Concurrency at a time and returns what happened.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency + 8}}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	r := &runner{cfg: cfg, start: time.Now()}
	r.res.Buyers = cfg.Buyers
	r.res.Latency = hdrhistogram.New(1, 60_000_000, 3)
	var done atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r.buyer(ctx, i)
				done.Add(1)
			}
		}()
	}
	stopProgress := make(chan struct{})
	var pwg sync.WaitGroup
	if cfg.Progress != nil {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					cfg.Progress(int(done.Load()), cfg.Buyers)
					return
				case <-t.C:
					cfg.Progress(int(done.Load()), cfg.Buyers)
				}
			}
		}()
	}
feed:
	for i := range cfg.Buyers {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(stopProgress)
	pwg.Wait()
	r.res.Elapsed = time.Since(r.start)
	return &r.res, nil
}

// reservation is the part of the reservation JSON the buyers read.
type reservation struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
	Position  int        `json:"position"`
}

type problem struct {
	Code string `json:"code"`
}

// do sends one request and decodes a JSON answer into out (if non-nil and 2xx).
func (r *runner) do(ctx context.Context, method, path, token string, body any, hdr map[string]string, out any) (int, string, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.cfg.BaseURL+path, rd)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	resp, err := r.cfg.Client.Do(req)
	atomic.AddInt64(&r.res.Requests, 1)
	if err != nil {
		atomic.AddInt64(&r.res.Errors, 1)
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r.mu.Lock()
	_ = r.res.Latency.RecordValue(max(1, time.Since(t0).Microseconds()))
	r.mu.Unlock()
	if err != nil {
		atomic.AddInt64(&r.res.Errors, 1)
		return 0, "", err
	}
	if resp.StatusCode >= 500 {
		atomic.AddInt64(&r.res.Errors, 1)
	}
	if resp.StatusCode >= 400 {
		var p problem
		_ = json.Unmarshal(b, &p)
		return resp.StatusCode, p.Code, nil
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, "", fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, "", nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// buyer is one simulated customer, from fetching the purchase path to a final outcome.
func (r *runner) buyer(ctx context.Context, i int) {
	user := UserName(i)
	token, err := r.cfg.Token(user)
	if err != nil {
		atomic.AddInt64(&r.res.Errors, 1)
		return
	}
	behavior := BehaviorOf(user, r.cfg.Seed, r.cfg.Mix)
	var path struct {
		Path string `json:"path"`
	}
	for {
		status, code, err := r.do(ctx, "GET", "/api/v1/sales/"+r.cfg.SaleID+"/path", token, nil, nil, &path)
		if err != nil || status == 410 {
			return
		}
		if status == 200 {
			break
		}
		if code != "not_started" || !sleep(ctx, 50*time.Millisecond) {
			return
		}
	}
	key := map[string]string{"Idempotency-Key": "k-" + user}
	var res reservation
	for attempt := 0; ; attempt++ {
		status, code, err := r.do(ctx, "POST", path.Path, token, map[string]int{"quantity": 1}, key, &res)
		if err != nil {
			return
		}
		switch {
		case status == 201:
			atomic.AddInt64(&r.res.Held, 1)
		case status == 202:
			atomic.AddInt64(&r.res.Queued, 1)
		case code == "queue_full" || code == "rate_limited":
			if code == "queue_full" {
				atomic.AddInt64(&r.res.QueueFull, 1)
			} else {
				atomic.AddInt64(&r.res.RateLimited, 1)
			}
			// Every unit is held and the line is full: come back a little later.
			if !sleep(ctx, time.Duration(100+attempt*50)*time.Millisecond) {
				return
			}
			continue
		case code == "sold_out":
			atomic.AddInt64(&r.res.SoldOut, 1)
			return
		default:
			return // ended, limit_exceeded, …
		}
		break
	}
	if behavior == Retry {
		var again reservation
		status, _, err := r.do(ctx, "POST", path.Path, token, map[string]int{"quantity": 1}, key, &again)
		if err == nil && status == 200 {
			atomic.AddInt64(&r.res.Replays, 1)
			if again.ID != res.ID {
				atomic.AddInt64(&r.res.ReplayMismatch, 1)
			}
		}
	}
	if res.Status == "queued" {
		if !r.waitForGrant(ctx, token, &res) {
			return
		}
		atomic.AddInt64(&r.res.Handoffs, 1)
	}
	switch behavior {
	case Cancel:
		if status, _, _ := r.do(ctx, "DELETE", "/api/v1/reservations/"+res.ID, token, nil, nil, nil); status == 200 {
			atomic.AddInt64(&r.res.Cancelled, 1)
		}
		return
	case Abandon:
		atomic.AddInt64(&r.res.Abandoned, 1)
		r.waitForEnd(ctx, token, res)
		return
	}
	if status, _, _ := r.do(ctx, "POST", "/api/v1/reservations/"+res.ID+"/pay", token, nil, nil, nil); status == 200 {
		atomic.AddInt64(&r.res.PaymentsBegun, 1)
	}
	r.waitForEnd(ctx, token, res)
}

// waitForGrant polls a queued reservation until it is held (true) or ends (false).
func (r *runner) waitForGrant(ctx context.Context, token string, res *reservation) bool {
	for sleep(ctx, 100*time.Millisecond) {
		var cur reservation
		status, _, err := r.do(ctx, "GET", "/api/v1/reservations/"+res.ID, token, nil, nil, &cur)
		if err != nil || status != 200 {
			return false
		}
		switch cur.Status {
		case "held":
			*res = cur
			return true
		case "queued":
			continue
		case "rejected":
			atomic.AddInt64(&r.res.Rejected, 1)
			return false
		default:
			return false
		}
	}
	return false
}

// waitForEnd polls a held reservation until it is no longer held, counting expiries.
func (r *runner) waitForEnd(ctx context.Context, token string, res reservation) {
	for sleep(ctx, 200*time.Millisecond) {
		var cur reservation
		status, _, err := r.do(ctx, "GET", "/api/v1/reservations/"+res.ID, token, nil, nil, &cur)
		if err != nil || status != 200 {
			return
		}
		if cur.Status == "held" {
			continue
		}
		if cur.Status == "expired" {
			atomic.AddInt64(&r.res.Expired, 1)
		}
		return
	}
}
