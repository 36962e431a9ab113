package redisinv

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/seckill-go/seckill/internal/logsummary"
)

// TestClientLogger: go-redis's lines come out as slog lines (level, the client, the line
// itself), and a line repeated in a redial loop is written once per period, not per attempt.
func TestClientLogger(t *testing.T) {
	var buf bytes.Buffer
	l := clientLogger{logsummary.New(slog.New(slog.NewTextHandler(&buf, nil)), 0)}
	for i := range 100 {
		l.Printf(context.Background(), "redis: dial %s failed (attempt %d)", "127.0.0.1:1", i)
	}
	l.Printf(context.Background(), "sentinel: new master=%q addr=%q", "mymaster", "127.0.0.1:6380")
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("101 lines of two kinds wrote %d lines; want 2:\n%s", n, out)
	}
	if !strings.Contains(out, `level=WARN msg="redis client" client=go-redis line="redis: dial 127.0.0.1:1 failed (attempt 0)"`) ||
		!strings.Contains(out, `new master=\"mymaster\"`) {
		t.Fatalf("go-redis's lines are not slog lines with their text:\n%s", out)
	}
}
