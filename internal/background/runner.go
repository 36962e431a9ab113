package background

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-go/seckill/internal/backoff"
	"github.com/seckill-go/seckill/internal/logsummary"
	"github.com/seckill-go/seckill/internal/wait"
)

// Restart bounds: a Run that returned an error is started again after RestartBase, doubling up
// to RestartMax (with jitter); a Run that had lasted longer than RestartMax starts the
// schedule over.
const (
	RestartBase = time.Second
	RestartMax  = time.Minute
)

// Runner runs services: Start starts them in the order given (dependency order: a service
// comes after those it needs), Stop stops them in reverse order, each awaited before the one
// before it is stopped. Build it with NewRunner.
type Runner struct {
	log                     *slog.Logger
	troubles                *logsummary.Summarizer // Report's lines, summarised per service
	errors                  *prometheus.CounterVec
	restartBase, restartMax time.Duration // RestartBase and RestartMax; tests shorten them

	mu       sync.Mutex
	running  []*running // in start order
	stopping bool
}

// running is one started service.
type running struct {
	svc    Service
	st     *state
	cancel context.CancelFunc
	done   chan struct{} // closed when its goroutine has returned
}

// NewRunner returns a runner that logs to log (nil: discard).
func NewRunner(log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{log: log, troubles: logsummary.New(log, 0), restartBase: RestartBase, restartMax: RestartMax, errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_background_errors_total",
		Help: "Errors met by background services (failed sweeps, reads, stores, and failed runs), by service.",
	}, []string{"service"})}
}

// Collector is the runner's error counter, to be registered where /metrics is served.
func (r *Runner) Collector() prometheus.Collector { return r.errors }

// Start starts each service in its own goroutine, in order, after those started before. It may
// be called again to add services that need the ones already running; after Stop it starts
// nothing. A service whose Run returns an error before it is stopped (or returns at all: a Run
// ends only when stopped) is logged and counted, and started again after a backoff.
func (r *Runner) Start(services ...Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	for _, svc := range services {
		ctx, cancel := context.WithCancel(context.Background())
		st := &state{name: svc.Name(), r: r}
		ctx = context.WithValue(ctx, stateKey{}, st)
		run := &running{svc: svc, st: st, cancel: cancel, done: make(chan struct{})}
		r.errors.WithLabelValues(st.name) // so the series exists, at 0, before any error
		r.running = append(r.running, run)
		go r.supervise(ctx, run)
	}
}

// supervise runs one service until its context is cancelled, starting it again after a
// backoff whenever its Run returns early.
func (r *Runner) supervise(ctx context.Context, run *running) {
	defer close(run.done)
	name := run.st.name
	for attempt := 1; ; attempt++ {
		began := time.Now()
		err := run.svc.Run(ctx)
		if ctx.Err() != nil { // stopped: its exit is done
			if err != nil && !errors.Is(err, context.Canceled) {
				r.errors.WithLabelValues(name).Inc()
				r.log.Error("background service did not finish its exit", "service", name, "err", err)
			}
			return
		}
		if err == nil {
			err = errors.New("returned before it was stopped")
		}
		if time.Since(began) > r.restartMax {
			attempt = 1
		}
		pause := backoff.Jittered(r.restartBase, r.restartMax, attempt)
		r.errors.WithLabelValues(name).Inc()
		r.log.Error("background service failed; restarting it", "service", name, "err", err, "restart_in", pause, "failures_in_a_row", attempt)
		if !wait.Sleep(ctx, pause) {
			return
		}
	}
}

// Stop stops the services in the reverse order of their start: it cancels the last one's
// context, waits for its Run to return, then does the same for the one before, and so on. It
// gives up waiting when ctx ends, cancels every service not yet stopped, and returns an error
// naming the services that had not stopped by then (they may still be running). Services see
// ctx's deadline through Finish. Stop is safe to call more than once.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopping = true
	list := r.running
	r.running = nil
	r.mu.Unlock()
	deadline, _ := ctx.Deadline()
	for i := len(list) - 1; i >= 0; i-- {
		run := list[i]
		run.st.setDeadline(deadline)
		run.cancel()
		select {
		case <-run.done:
			continue
		case <-ctx.Done():
		}
		// Out of time: the rest are cancelled (they stop on their own), but not awaited.
		var late []string
		for j := i; j >= 0; j-- {
			list[j].st.setDeadline(deadline)
			list[j].cancel()
			select {
			case <-list[j].done:
			default:
				late = append(late, list[j].st.name)
			}
		}
		if len(late) == 0 {
			return nil
		}
		r.log.Error("background services did not stop in time", "services", late)
		return fmt.Errorf("background services did not stop in time (%w): %s", ctx.Err(), strings.Join(late, ", "))
	}
	return nil
}
