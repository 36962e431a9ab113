package httpapi

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// metrics holds the Prometheus series: requests by route and status, reservation and payment
// outcomes, and per-sale stock gauges read live at scrape time.
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	reservations *prometheus.CounterVec
	payments     *prometheus.CounterVec
	// streams and streamsDropped count live event streams, and those cut for reading too slowly.
	streams        prometheus.Gauge
	streamsDropped prometheus.Counter
	// closeWritten is, for each live ticket stream open when its room closed, the time from the
	// close (closed_at, on the engine's clock) to the stream's writing of the closing ticket:
	// how soon this instance told its waiting buyers, whatever their own network and machine
	// add (bench --waiting-room reads it beside what its buyers saw).
	closeWritten prometheus.Histogram
	// outcomes are reservations' counters of the usual outcomes (knownOutcomes), each resolved
	// on its first count; the map is read-only after newMetrics.
	outcomes map[string]*lazySeries[prometheus.Counter]
}

func newMetrics(reg *prometheus.Registry, svc *service.Service) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "seckill_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1},
		}, []string{"route"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reservations_total", Help: "Buy and cancel outcomes (held, queued, replayed, cancelled, or the error code).",
		}, []string{"outcome"}),
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payments_total", Help: "Webhook deliveries by result.",
		}, []string{"result"}),
		outcomes: knownOutcomes(),
	}
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_event_streams", Help: "Open GET /api/v1/sales/{id}/events streams.",
	})
	m.streamsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_event_streams_dropped_total", Help: "Event streams disconnected because the client read too slowly.",
	})
	m.closeWritten = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: CloseWrittenMetric, Help: "Time from a waiting room's close to a live ticket stream open at it being written the closing ticket.",
		Buckets: []float64{.025, .05, .1, .15, .2, .3, .4, .5, .6, .8, 1, 1.25, 1.5, 2, 3, 5},
	})
	reg.MustRegister(m.requests, m.duration, m.reservations, m.payments, m.streams, m.streamsDropped, m.closeWritten,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stockCollector{svc: svc}, &refundCollector{svc: svc})
	return m
}

// CloseWrittenMetric is the histogram of the time from a waiting room's close to each live
// ticket stream open at it being written the closing ticket (seconds).
const CloseWrittenMetric = "seckill_room_close_written_seconds"

// routeMetrics are one route's series, looked up once per route and status rather than per
// request: a request then costs no label hashing, no lookup under the vectors' locks and no
// allocation. Each series is resolved on its first use, so /metrics shows the same series as
// before (none for a route nobody called).
type routeMetrics struct {
	route    string
	m        *metrics
	duration lazySeries[prometheus.Observer]
	byStatus [600]lazySeries[prometheus.Counter] // by status code, 0–599
}

// lazySeries is a series resolved on first use; a race resolves it twice, to the same series.
type lazySeries[T any] struct{ p atomic.Pointer[T] }

func (l *lazySeries[T]) get(resolve func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := resolve()
	l.p.Store(&v)
	return v
}

// route returns the series of route ("METHOD /pattern").
func (m *metrics) route(route string) *routeMetrics {
	return &routeMetrics{route: route, m: m}
}

// observe counts one request of the route answered status after d.
func (rm *routeMetrics) observe(status int, d time.Duration) {
	counter := func() prometheus.Counter { return rm.m.requests.WithLabelValues(rm.route, strconv.Itoa(status)) }
	if status >= 0 && status < len(rm.byStatus) {
		rm.byStatus[status].get(counter).Inc()
	} else {
		counter().Inc()
	}
	rm.duration.get(func() prometheus.Observer { return rm.m.duration.WithLabelValues(rm.route) }).Observe(d.Seconds())
}

// outcome counts a buy or cancel outcome; labels are fixed words or error codes, never ids.
// The usual ones are resolved once each (metrics.outcomes); another is looked up in the vector.
func (m *metrics) outcome(o string) {
	if l, ok := m.outcomes[o]; ok {
		l.get(func() prometheus.Counter { return m.reservations.WithLabelValues(o) }).Inc()
		return
	}
	m.reservations.WithLabelValues(o).Inc()
}

// knownOutcomes are the outcomes metrics.outcomes holds: a buy's (activityOutcomes) and a
// cancel's, and the error codes a buy can end with.
func knownOutcomes() map[string]*lazySeries[prometheus.Counter] {
	m := map[string]*lazySeries[prometheus.Counter]{"cancelled": {}}
	for _, o := range activityOutcomes {
		m[o] = &lazySeries[prometheus.Counter]{}
	}
	for _, c := range []seckill.Code{seckill.CodeInternal, seckill.CodeInvalidArgument, seckill.CodeNotFound, seckill.CodeConflict,
		seckill.CodeHoldExpired, seckill.CodeUnavailable, seckill.CodeAdmissionRequired} {
		m[string(c)] = &lazySeries[prometheus.Counter]{}
	}
	return m
}

func (m *metrics) payment(r string) { m.payments.WithLabelValues(r).Inc() }

// MetricsHandler serves the Prometheus metrics, behind Config.MetricsToken when it is set: on
// the API's listener at /metrics (unless Config.MetricsOff), or on a listener of its own.
func (s *Server) MetricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})
	if s.cfg.MetricsToken == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		switch {
		case !ok:
			s.writeError(w, r, seckill.Errorf(seckill.CodeUnauthorized, "missing bearer token"))
		case subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.MetricsToken)) != 1:
			s.writeError(w, r, seckill.Errorf(seckill.CodeForbidden, "metrics token required"))
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// stockCollector reports the stock state of each hot sale (service.LiveSaleIDs) when
// Prometheus scrapes, so the gauges are never stale and cost nothing between scrapes; and how
// many sales are hot. Cold sales are left out: they do not change by themselves, and a day of
// thousands of sales would otherwise cost a scrape thousands of reads and series.
type stockCollector struct{ svc *service.Service }

var (
	stockDesc = prometheus.NewDesc("seckill_stock_units", "Units of a hot sale by state (sellable, available, held, sold, queued).", []string{"sale", "state"}, nil)
	hotDesc   = prometheus.NewDesc("seckill_sales_hot", "Sales in their hot window now (from their preheat until their last hold could have expired, plus a minute): the sales the background works on.", nil, nil)
)

func (c *stockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stockDesc
	ch <- hotDesc
}

func (c *stockCollector) Collect(ch chan<- prometheus.Metric) {
	if c.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ids, err := c.svc.LiveSaleIDs(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(hotDesc, prometheus.GaugeValue, float64(len(ids)))
	for _, id := range ids {
		s, err := c.svc.Sale(ctx, id)
		if err != nil {
			continue
		}
		st := s.StockState
		for state, v := range map[string]int{"sellable": st.Sellable, "available": st.Available, "held": st.Held, "sold": st.Sold, "queued": st.Queued} {
			ch <- prometheus.MustNewConstMetric(stockDesc, prometheus.GaugeValue, float64(v), s.ID, state)
		}
	}
}
