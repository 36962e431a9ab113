package logsummary

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSummarizes: a trouble repeated 500 times within a period is one line; the next
// occurrence after the period is one more line that says how many were not written; another
// key is written at once; many goroutines at once count every occurrence once.
func TestSummarizes(t *testing.T) {
	var buf bytes.Buffer
	s := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Minute)
	clock := time.Unix(1000, 0)
	s.now = func() time.Time { return clock }
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 50 {
				s.Log(ctx, slog.LevelWarn, "route A", "dependency unavailable", "route", "A")
			}
		})
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "\n"); n != 1 || strings.Contains(buf.String(), "repeated") {
		t.Fatalf("500 occurrences within a period wrote %d lines; want 1 without a count:\n%s", n, buf.String())
	}
	s.Log(ctx, slog.LevelError, "service B", "background work failed", "service", "B")
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("another key was not written at once:\n%s", buf.String())
	}
	clock = clock.Add(time.Minute)
	s.Log(ctx, slog.LevelWarn, "route A", "dependency unavailable", "route", "A")
	last := buf.String()[strings.LastIndex(strings.TrimSuffix(buf.String(), "\n"), "\n")+1:]
	if !strings.Contains(last, "repeated=499") || !strings.Contains(last, "over=1m0s") {
		t.Fatalf("the summary line %q does not count the 499 occurrences not written over 1m", last)
	}
	s.Log(ctx, slog.LevelWarn, "route A", "dependency unavailable", "route", "A")
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("an occurrence right after a summary was written:\n%s", buf.String())
	}
}
