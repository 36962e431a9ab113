package delivery

import "github.com/prometheus/client_golang/prometheus"

var (
	publishedDesc = prometheus.NewDesc("seckill_export_events_total",
		"Events this process published to a sink (a redelivery counts again).", []string{"sink"}, nil)
	failuresDesc = prometheus.NewDesc("seckill_export_failures_total",
		"Failed attempts of this process to read, publish or acknowledge a sink's events (each is retried).", []string{"sink"}, nil)
	deadDesc = prometheus.NewDesc("seckill_export_dead_letters_total",
		"Events this process gave up publishing to a sink and wrote to the dead letters.", []string{"sink"}, nil)
	lagEventsDesc = prometheus.NewDesc("seckill_export_lag_events",
		"Events not yet acknowledged by a sink in the logs this process leads (on the Redis engine, stream entries: one script call's changes each).", []string{"sink"}, nil)
	lagSecondsDesc = prometheus.NewDesc("seckill_export_lag_seconds",
		"Age of the oldest event a sink has not acknowledged, over the logs this process leads (0 when caught up).", []string{"sink"}, nil)
)

// Collector returns the exporter's metrics for /metrics.
func (x *Exporter) Collector() prometheus.Collector { return collector{x} }

type collector struct{ x *Exporter }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{publishedDesc, failuresDesc, deadDesc, lagEventsDesc, lagSecondsDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.x.Status() {
		ch <- prometheus.MustNewConstMetric(publishedDesc, prometheus.CounterValue, float64(s.Published), s.Name)
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(s.Failures), s.Name)
		ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.CounterValue, float64(s.DeadLettered), s.Name)
		ch <- prometheus.MustNewConstMetric(lagEventsDesc, prometheus.GaugeValue, float64(s.LagEvents), s.Name)
		ch <- prometheus.MustNewConstMetric(lagSecondsDesc, prometheus.GaugeValue, s.LagSeconds, s.Name)
	}
}
