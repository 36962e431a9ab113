package sqlstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchRetentionRows is how many outbox entries and dead letters the retention benchmarks start
// with; SECKILL_BENCH_RETENTION_ROWS is not read: change it here for a bigger run.
const benchRetentionRows = 200_000

// fillRetention writes n outbox entries (at = t0 + seq ms) and n dead letters directly, in
// multi-row INSERTs, and a cursor that has them all.
func fillRetention(b *testing.B, s *Store, n int, t0 time.Time) {
	b.Helper()
	ctx := b.Context()
	const chunk = 500
	for from := 1; from <= n; from += chunk {
		to := min(n, from+chunk-1)
		var ob, dl []string
		var oargs, dargs []any
		for i := from; i <= to; i++ {
			ob = append(ob, "(?, ?, 's', ?, 'held', ?, '{}')")
			oargs = append(oargs, i, fmt.Sprintf("e%d:held", i), fmt.Sprintf("r%d", i), t0.UnixMilli()+int64(i))
			dl = append(dl, "('sink', ?, '{}', 'refused', ?)")
			dargs = append(dargs, fmt.Sprintf("d%d", i), t0.UnixMilli()+int64(i))
		}
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO export_outbox (seq, event_id, sale_id, reservation_id, type, at, body) VALUES `+strings.Join(ob, ", ")), oargs...); err != nil {
			b.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO export_dead_letters (sink, event_id, body, reason, failed_at) VALUES `+strings.Join(dl, ", ")), dargs...); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok, err := s.ClaimExportCursor(ctx, "sink", "o", t0, time.Hour); err != nil || !ok {
		b.Fatal(ok, err)
	}
	if err := s.SaveExportCursor(ctx, "sink", "o", int64(n), t0, time.Hour); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRetention measures, on each dialect with 200,000 outbox entries and as many dead
// letters, an idle pass (nothing past the bounds: what every instance pays every minute) and
// the deleting (rows/s, in batches of 500, by count and by age).
func BenchmarkRetention(b *testing.B) {
	dialects := map[string]func(t testing.TB) string{
		"SQLite":   func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "seckill.db") },
		"MySQL":    freshMySQL,
		"Postgres": freshPostgres,
	}
	for _, name := range []string{"SQLite", "MySQL", "Postgres"} {
		b.Run(name, func(b *testing.B) {
			dsn := dialects[name](b)
			s, err := Open(b.Context(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			fillRetention(b, s, benchRetentionRows, t0)
			ctx := b.Context()
			idle := func() {
				if _, _, err := s.TrimOutboxOverCount(ctx, benchRetentionRows, t0, 500); err != nil {
					b.Fatal(err)
				}
				if _, err := s.TrimOutboxAcknowledged(ctx, t0, t0, 500); err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.TrimDeadLetters(ctx, t0, benchRetentionRows, 500); err != nil {
					b.Fatal(err)
				}
				if _, err := s.OutboxRows(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := s.DeadLetterRows(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				idle()
			}
			b.StopTimer()
			// Deleting: half the outbox by count, the rest but 1000 by age; half the dead letters.
			start := time.Now()
			var deleted int64
			for {
				n, _, err := s.TrimOutboxOverCount(ctx, benchRetentionRows/2, t0, 500)
				if err != nil {
					b.Fatal(err)
				}
				deleted += n
				if n < 500 {
					break
				}
			}
			for {
				n, err := s.TrimOutboxAcknowledged(ctx, t0.Add(time.Duration(benchRetentionRows-1000)*time.Millisecond), t0, 500)
				if err != nil {
					b.Fatal(err)
				}
				deleted += n
				if n < 500 {
					break
				}
			}
			for {
				n, _, err := s.TrimDeadLetters(ctx, t0, benchRetentionRows/2, 500)
				if err != nil {
					b.Fatal(err)
				}
				deleted += n
				if n < 500 {
					break
				}
			}
			b.ReportMetric(float64(deleted)/time.Since(start).Seconds(), "deleted-rows/s")
		})
	}
}
