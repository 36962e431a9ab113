package redisinv

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill-go/seckill/internal/background"
)

// backgroundErrors reads seckill_background_errors_total{service} from a runner.
func backgroundErrors(t *testing.T, r *background.Runner, service string) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	r.Collector().Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "service" && l.GetValue() == service {
				return d.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// TestServicesInDependencyOrder: the consumer comes before the sweeper (stopped after it), and
// no consumer runs without a sink.
func TestServicesInDependencyOrder(t *testing.T) {
	e := New(nil)
	names := func(ss []background.Service) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name())
		}
		return out
	}
	list := func(context.Context) ([]string, error) { return nil, nil }
	if got := names(e.Services(ServicesConfig{List: list, Sink: &fakeSink{}})); !slices.Equal(got, []string{"orders-consumer", "sweeper"}) {
		t.Fatalf("services %v", got)
	}
	if got := names(e.Services(ServicesConfig{List: list})); !slices.Equal(got, []string{"sweeper"}) {
		t.Fatalf("services without a sink %v", got)
	}
}

// TestConsumerReportsStoreFailures: a consumer under a runner stores every event although
// the store failed twice, and the failures are counted under its name; a consumer whose store
// never fails counts none (the negative control).
func TestConsumerReportsStoreFailures(t *testing.T) {
	for _, failures := range []int{2, 0} {
		r := newStreamRig(t, 10)
		r.buy("alice")
		sink := &fakeSink{failures: failures}
		runner := background.NewRunner(nil)
		runner.Start(r.e.NewConsumer(sink, ConsumerConfig{RetryDelay: time.Millisecond,
			List: func(context.Context) ([]string, error) { return []string{"st"}, nil }}))
		eventually(t, "the event stored", func() bool { return len(sink.stored()) == 1 })
		if err := runner.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := backgroundErrors(t, runner, "orders-consumer"); got != float64(failures) {
			t.Fatalf("store failed %d times; %v errors counted", failures, got)
		}
	}
}

// TestSweeperReportsListFailures: a sweeper whose sale list fails reports it on every try.
func TestSweeperReportsListFailures(t *testing.T) {
	e := New(nil)
	runner := background.NewRunner(nil)
	runner.Start(e.Sweeper(time.Millisecond, func(context.Context) ([]string, error) { return nil, errors.New("database down") }, nil))
	eventually(t, "a failed listing counted", func() bool { return backgroundErrors(t, runner, "sweeper") >= 1 })
	if err := runner.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
