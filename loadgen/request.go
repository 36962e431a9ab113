// One request of a buyer: sent, timed, retried after 503/429 or a transport error, and
// counted as an error only when nothing overcame it.

package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill/internal/wait"
)

// reservation is the part of the reservation JSON the buyers read.
type reservation struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Position    int        `json:"position"`
	Quantity    int        `json:"quantity"`
	AmountCents int64      `json:"amount_cents"`
}

type answer struct {
	status     int
	code       string
	body       []byte
	retryAfter time.Duration
	// sent and received are when the request left and its answer was read (since the run's
	// start): the engine decided it in between.
	sent, received time.Duration
}

// do sends one request to target t (an index into Targets) and times it as step. since, if
// set, is when the request was meant to be sent (open loop), and its latency counts from then.
func (r *runner) do(ctx context.Context, t int, step, method, path, token string, body any, hdr map[string]string, since time.Time) (answer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte: // sent as it is (a signed webhook body)
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.cfg.Targets[t%len(r.cfg.Targets)]+path, rd)
	if err != nil {
		return answer{}, err
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
	sent := time.Since(r.start)
	if since.IsZero() {
		since = time.Now()
	}
	resp, err := r.cfg.Client.Do(req)
	atomic.AddInt64(&r.res.Requests, 1)
	if err != nil {
		return answer{}, err // the caller retries it, or counts it (call, notify)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.observe(step, time.Since(since))
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, body: b, sent: sent, received: time.Since(r.start)}
	if resp.StatusCode >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(b, &p)
		a.code = p.Code
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			a.retryAfter = time.Duration(s) * time.Second
		}
	}
	if resp.StatusCode >= 500 && resp.StatusCode != 503 {
		r.fail("%s %s: %d %s", method, path, resp.StatusCode, excerpt(b))
	}
	return a, nil
}

// maxErrorSample bounds Result.ErrorSample.
const maxErrorSample = 20

// fail counts an error and keeps what it was, up to maxErrorSample of them.
func (r *runner) fail(format string, args ...any) {
	atomic.AddInt64(&r.res.Errors, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.res.ErrorSample) < maxErrorSample {
		r.res.ErrorSample = append(r.res.ErrorSample, fmt.Sprintf(format, args...))
	}
}

// excerpt is the start of an answer's body, for ErrorSample.
func excerpt(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func (r *runner) observe(step string, d time.Duration) {
	us := max(1, d.Microseconds())
	r.mu.Lock()
	_ = r.res.Latency[step].RecordValue(us)
	_ = r.res.All.RecordValue(us)
	_ = r.period.RecordValue(us)
	r.periodN++
	r.mu.Unlock()
}

// retryFor is how long a buyer keeps retrying a 503 (a sale being rebuilt, an instance going
// away) or a 429 before it gives up.
const retryFor = 30 * time.Second

// call is do with a client's retries: on 503 and 429 it waits Retry-After (or about 100 ms)
// and tries again, on the next target after a transport error. It gives up after retryFor.
func (r *runner) call(ctx context.Context, t int, step, method, path, token string, body any, hdr map[string]string, since time.Time) (answer, bool) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		a, err := r.do(ctx, t+attempt, step, method, path, token, body, hdr, since)
		since = time.Time{} // only the first attempt is timed from the intended send time
		if err == nil && a.status != 503 && a.status != 429 {
			return a, true
		}
		if err == nil && step == "pay" && noGateway(a) {
			return a, false // not a passing overload: retrying cannot help (noPaymentPath)
		}
		if ctx.Err() != nil {
			return a, false // the run's end, not the targets' failure
		}
		if time.Now().After(deadline) {
			if err != nil {
				r.fail("%s %s: %v (still failing after %v of retries)", method, path, err, retryFor)
			}
			return a, false
		}
		pause := time.Duration(80+rand.IntN(40)) * time.Millisecond
		if err != nil {
			atomic.AddInt64(&r.res.RetriedTransport, 1)
		} else {
			if a.status == 503 {
				atomic.AddInt64(&r.res.Retried503, 1)
			} else {
				atomic.AddInt64(&r.res.RateLimited, 1)
			}
			if a.retryAfter > 0 {
				pause = a.retryAfter/2 + time.Duration(rand.Int64N(int64(a.retryAfter/2)+1))
			}
		}
		if !wait.Sleep(ctx, pause) {
			return a, false
		}
	}
}
