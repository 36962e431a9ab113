package background

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

// recorder records, in order, the services that began running and those whose Run returned.
type recorder struct {
	mu      sync.Mutex
	began   []string
	stopped []string
}

func (r *recorder) add(list *[]string, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, name)
}

func (r *recorder) snapshot() (began, stopped []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.began), slices.Clone(r.stopped)
}

// fake is a service that runs until cancelled. It can check, when stopped, that the services
// it depends on are still running (the dependency detector), report errors, fail, or ignore
// its cancellation until released.
type fake struct {
	name    string
	rec     *recorder
	deps    []string      // must not have stopped before this one
	report  []error       // reported once at the start of each Run
	fail    int           // the first fail Runs return an error at once
	stuck   chan struct{} // if set, Run ignores cancellation until it is closed
	running chan struct{} // closed when Run is first entered

	mu       sync.Mutex
	runs     int
	violated []string
	once     sync.Once
}

func (f *fake) Name() string { return f.name }

func (f *fake) Run(ctx context.Context) error {
	f.mu.Lock()
	f.runs++
	runs := f.runs
	f.mu.Unlock()
	if f.running != nil {
		f.once.Do(func() { close(f.running) })
	}
	f.rec.add(&f.rec.began, f.name)
	for _, err := range f.report {
		Report(ctx, err)
	}
	if runs <= f.fail {
		f.rec.add(&f.rec.stopped, f.name)
		return fmt.Errorf("%s: cannot go on", f.name)
	}
	<-ctx.Done()
	if f.stuck != nil {
		<-f.stuck
	}
	_, stopped := f.rec.snapshot()
	for _, d := range f.deps {
		if slices.Contains(stopped, d) {
			f.mu.Lock()
			f.violated = append(f.violated, d)
			f.mu.Unlock()
		}
	}
	f.rec.add(&f.rec.stopped, f.name)
	return nil
}

func newFakes(rec *recorder, names ...string) []*fake {
	fs := make([]*fake, len(names))
	for i, n := range names {
		fs[i] = &fake{name: n, rec: rec, deps: slices.Clone(names[:i]), running: make(chan struct{})}
	}
	return fs
}

func services(fs []*fake) []Service {
	out := make([]Service, len(fs))
	for i, f := range fs {
		out[i] = f
	}
	return out
}

func waitRunning(t *testing.T, fs []*fake) {
	t.Helper()
	for _, f := range fs {
		select {
		case <-f.running:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never ran", f.name)
		}
	}
}

// TestStopsInReverseOrder: services started by two Start calls are stopped last first, each
// awaited before the one it depends on is stopped (no service sees a dependency stopped).
func TestStopsInReverseOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	rec := &recorder{}
	fs := newFakes(rec, "pipeline", "sweeper", "consumer", "closer", "exporter")
	r := NewRunner(nil)
	r.Start(services(fs[:2])...)
	r.Start(services(fs[2:])...)
	waitRunning(t, fs)
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	began, stopped := rec.snapshot()
	if len(began) != 5 {
		t.Fatalf("began %v, want all five", began)
	}
	if want := []string{"exporter", "closer", "consumer", "sweeper", "pipeline"}; !slices.Equal(stopped, want) {
		t.Fatalf("stopped in order %v, want %v", stopped, want)
	}
	for _, f := range fs {
		if len(f.violated) > 0 {
			t.Fatalf("%s saw its dependencies %v stopped before it", f.name, f.violated)
		}
	}
	// Stop again is harmless, and Start after Stop starts nothing.
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	late := &fake{name: "late", rec: rec}
	r.Start(late)
	if late.runs != 0 {
		t.Fatal("Start after Stop ran a service")
	}
}

// TestDetectorSeesStopInStartOrder is the negative control of the detector above: services
// stopped in start order (a runner that got the order wrong) are caught.
func TestDetectorSeesStopInStartOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	rec := &recorder{}
	fs := newFakes(rec, "a", "b", "c")
	var runners []*Runner
	for _, f := range fs { // one runner each, stopped a, b, c: the wrong order
		r := NewRunner(nil)
		r.Start(f)
		runners = append(runners, r)
	}
	waitRunning(t, fs)
	for _, r := range runners {
		if err := r.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(fs[1].violated) == 0 || len(fs[2].violated) == 0 {
		t.Fatalf("the detector missed a dependency stopped first: b saw %v, c saw %v", fs[1].violated, fs[2].violated)
	}
}

// TestStopDeadline: a service that does not stop is named in Stop's error once Stop's ctx
// ends, and the services before it are cancelled anyway.
func TestStopDeadline(t *testing.T) {
	defer goleak.VerifyNone(t)
	rec := &recorder{}
	fs := newFakes(rec, "first", "stuck", "last")
	fs[1].stuck = make(chan struct{})
	r := NewRunner(nil)
	r.Start(services(fs)...)
	waitRunning(t, fs)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "stuck") || strings.Contains(err.Error(), "last") ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v; want a deadline error naming stuck and not last", err)
	}
	close(fs[1].stuck)
	// The first one was cancelled although stuck had not stopped: it stops by itself.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, stopped := rec.snapshot(); len(stopped) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the services before the stuck one were not cancelled")
		}
	}
}

// TestErrorsCounted: errors a service reports are counted under its name, cancellation is
// not; a Run that fails is counted and started again.
func TestErrorsCounted(t *testing.T) {
	defer goleak.VerifyNone(t)
	rec := &recorder{}
	quiet := &fake{name: "quiet", rec: rec, running: make(chan struct{})}
	noisy := &fake{name: "noisy", rec: rec, running: make(chan struct{}),
		report: []error{errors.New("read failed"), fmt.Errorf("store: %w", context.Canceled), nil, errors.New("sweep failed")}}
	failing := &fake{name: "failing", rec: rec, running: make(chan struct{}), fail: 2}
	r := NewRunner(nil)
	r.restartBase, r.restartMax = time.Millisecond, 4*time.Millisecond
	r.Start(quiet, noisy, failing)
	waitRunning(t, []*fake{quiet, noisy, failing})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		failing.mu.Lock()
		runs := failing.runs
		failing.mu.Unlock()
		if runs >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failing service ran %d times; want it restarted twice", runs)
		}
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := r.errors
	if got := value(t, c.WithLabelValues("noisy")); got != 2 {
		t.Errorf("noisy: %v errors counted, want 2 (cancellation and nil are not errors)", got)
	}
	if got := value(t, c.WithLabelValues("failing")); got != 2 {
		t.Errorf("failing: %v errors counted, want 2 (two failed runs)", got)
	}
	if got := value(t, c.WithLabelValues("quiet")); got != 0 {
		t.Errorf("quiet: %v errors counted, want 0", got)
	}
	ch := make(chan prometheus.Metric, 10)
	r.Collector().Collect(ch)
	if n := len(ch); n != 3 {
		t.Errorf("%d series, want one per service (3), zero ones included", n)
	}
}

// finisher stores "the batch in hand" on stop with a Finish context and records how that
// context ended.
type finisher struct {
	ended chan error
}

func (finisher) Name() string { return "finisher" }

func (f finisher) Run(ctx context.Context) error {
	<-ctx.Done()
	fctx, cancel := Finish(ctx, time.Hour)
	defer cancel()
	if fctx.Err() != nil {
		f.ended <- errors.New("the Finish context ended with its parent")
		return nil
	}
	<-fctx.Done()
	f.ended <- fctx.Err()
	return nil
}

// TestFinishEndsAtStopDeadline: the exit of a service gets the time left until Stop's deadline,
// not the hour it asked for, and not nothing.
func TestFinishEndsAtStopDeadline(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := finisher{ended: make(chan error, 1)}
	r := NewRunner(nil)
	r.Start(f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_ = r.Stop(ctx) // may or may not see the service return before its own deadline
	select {
	case err := <-f.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the exit's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exit's context outlived Stop's deadline")
	}
}

// TestReportOutsideRunner: a service run without a runner may still report (logged, not counted).
func TestReportOutsideRunner(t *testing.T) {
	Report(context.Background(), errors.New("logged by slog's default logger"))
	Report(context.Background(), nil)
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
