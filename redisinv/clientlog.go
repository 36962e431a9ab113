package redisinv

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/internal/logsummary"
)

// LogClientsTo sends the Redis clients' own log lines (go-redis writes its redials, pool
// trouble and Sentinel switches with log.Printf by default, unstructured among the server's
// slog lines) to log at level Warn, summarised per kind of line (its format) so that a redial
// loop during an outage is a line per period, not a line per attempt. go-redis has one logger
// for the whole process, so this is process-wide; the last call wins. (rueidis, the engine's
// client, logs nothing of its own.)
func LogClientsTo(log *slog.Logger) {
	redis.SetLogger(clientLogger{logsummary.New(log, 0)})
}

type clientLogger struct{ s *logsummary.Summarizer }

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	l.s.Log(ctx, slog.LevelWarn, format, "redis client", "client", "go-redis", "line", fmt.Sprintf(format, v...))
}
