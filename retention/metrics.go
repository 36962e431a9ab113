package retention

import "github.com/prometheus/client_golang/prometheus"

var (
	rowsDesc = prometheus.NewDesc("seckill_retention_rows",
		"Rows a bounded table holds after this process's last retention pass (outbox, dead_letters: counted from the primary key's span, an upper bound); for redis_stream, the entries of the fullest sale's stream this process trimmed in the last minute.",
		[]string{"table"}, nil)
	maxRowsDesc = prometheus.NewDesc("seckill_retention_max_rows",
		"The most rows a bounded table keeps (redis_stream: per sale's stream); past it the oldest go.", []string{"table"}, nil)
	maxAgeDesc = prometheus.NewDesc("seckill_retention_max_age_seconds",
		"How long a bounded table keeps a row (outbox: once every sink has it).", []string{"table"}, nil)
	deletedDesc = prometheus.NewDesc("seckill_retention_deleted_total",
		"Rows this process's retention passes deleted.", []string{"table"}, nil)
	lostDesc = prometheus.NewDesc("seckill_retention_lost_total",
		"Rows deleted before anyone had them: outbox entries a sink had not acknowledged (the count bound's overflow), dead letters never replayed.",
		[]string{"table"}, nil)
)

// Collector returns the trimmer's metrics for /metrics.
func (t *Trimmer) Collector() prometheus.Collector { return collector{t} }

type collector struct{ t *Trimmer }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rowsDesc, maxRowsDesc, maxAgeDesc, deletedDesc, lostDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	t := c.t
	gauge := func(d *prometheus.Desc, v float64, table string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, table)
	}
	counter := func(d *prometheus.Desc, v int64, table string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), table)
	}
	t.mu.Lock()
	measured := t.measured
	rows := map[string]int64{TableOutbox: t.rows[TableOutbox], TableDeadLetters: t.rows[TableDeadLetters]}
	deleted := map[string]int64{TableOutbox: t.deleted[TableOutbox], TableDeadLetters: t.deleted[TableDeadLetters]}
	lost := map[string]int64{TableOutbox: t.lost[TableOutbox], TableDeadLetters: t.lost[TableDeadLetters]}
	t.mu.Unlock()
	for _, table := range []string{TableOutbox, TableDeadLetters} {
		if measured {
			gauge(rowsDesc, float64(rows[table]), table)
		}
		counter(deletedDesc, deleted[table], table)
		counter(lostDesc, lost[table], table)
	}
	gauge(maxRowsDesc, float64(t.cfg.OutboxMaxRows), TableOutbox)
	gauge(maxAgeDesc, t.cfg.OutboxKeep.Seconds(), TableOutbox)
	gauge(maxRowsDesc, float64(t.cfg.DeadLetterMaxRows), TableDeadLetters)
	gauge(maxAgeDesc, t.cfg.DeadLetterKeep.Seconds(), TableDeadLetters)
	if t.cfg.Streams != nil {
		entries, most := t.cfg.Streams()
		gauge(rowsDesc, float64(entries), TableRedisStream)
		if most > 0 {
			gauge(maxRowsDesc, float64(most), TableRedisStream)
		}
	}
}
