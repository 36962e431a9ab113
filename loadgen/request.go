// One request of a buyer: sent, timed, retried after 503/429 or a transport error, and
// counted as an error only when nothing overcame it.

package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/wait"
)

// answer is how one request went: err is nil for a 2xx answer, else the *client.Error of an
// error answer (problem) or a transport error.
type answer struct {
	err     error
	problem *client.Error
	// sent and received are when the request left and its answer was read (since the run's
	// start): the engine decided it in between.
	sent, received time.Duration
}

// code is the error answer's code ("" for a 2xx answer or a transport error).
func (a answer) code() seckill.Code {
	if a.problem == nil {
		return ""
	}
	return a.problem.Code
}

// status is the error answer's HTTP status (0 for a 2xx answer or a transport error).
func (a answer) status() int {
	if a.problem == nil {
		return 0
	}
	return a.problem.Status
}

// do makes one request to target t (an index into Targets), as token, with f, and times it as
// step. since, if set, is when the request was meant to be sent (open loop), and its latency
// counts from then.
func (r *runner) do(t int, step, token string, since time.Time, f func(c *client.Client) error) answer {
	c := r.clients[t%len(r.clients)].WithToken(token)
	sent := time.Since(r.start)
	if since.IsZero() {
		since = time.Now()
	}
	err := f(c)
	atomic.AddInt64(&r.res.Requests, 1)
	a := answer{err: err, sent: sent, received: time.Since(r.start)}
	if err != nil {
		var ok bool
		if a.problem, ok = errors.AsType[*client.Error](err); !ok {
			return a // the caller retries it, or counts it (call, notify)
		}
	}
	r.observe(step, time.Since(since))
	if s := a.status(); s >= 500 && s != http.StatusServiceUnavailable {
		r.fail("%v", err)
	}
	return a
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
func (r *runner) call(ctx context.Context, t int, step, token string, since time.Time, f func(c *client.Client) error) (answer, bool) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		a := r.do(t+attempt, step, token, since, f)
		since = time.Time{} // only the first attempt is timed from the intended send time
		transport := a.err != nil && a.problem == nil
		if a.err == nil || a.problem != nil && !a.problem.Temporary() {
			return a, true
		}
		if step == "pay" && noGateway(a) {
			return a, false // not a passing overload: retrying cannot help (noPaymentPath)
		}
		if ctx.Err() != nil {
			return a, false // the run's end, not the targets' failure
		}
		if time.Now().After(deadline) {
			if transport {
				r.fail("%s: %v (still failing after %v of retries)", step, a.err, retryFor)
			}
			return a, false
		}
		pause := time.Duration(80+rand.IntN(40)) * time.Millisecond
		if transport {
			atomic.AddInt64(&r.res.RetriedTransport, 1)
		} else {
			if a.status() == http.StatusServiceUnavailable {
				atomic.AddInt64(&r.res.Retried503, 1)
			} else {
				atomic.AddInt64(&r.res.RateLimited, 1)
			}
			if ra := a.problem.RetryAfter; ra > 0 {
				pause = ra/2 + time.Duration(rand.Int64N(int64(ra/2)+1))
			}
		}
		if !wait.Sleep(ctx, pause) {
			return a, false
		}
	}
}
