package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// urlErrSink refuses everything with an error that names it by its URL, as the sinks do.
type urlErrSink struct{ recordSink }

func (s *urlErrSink) Publish(context.Context, []events.Event) error {
	return fmt.Errorf("httpsink %s: endpoint answered 503", s.name)
}

// TestLogsNameSinksByLabel: a sink whose URL holds a token in its path (a chat webhook's
// /hooks/T…/B…/xoxb…, which the redaction of the query and user info leaves) is named in the
// exporter's log lines, its retries and its give-up, by its label only, even where the sink's
// own error names its URL. The negative control is the same sink without a label: its URL is
// the name, so it is logged (which is why every sink gets a label from export/sinks).
func TestLogsNameSinksByLabel(t *testing.T) {
	const url = "https://hooks.example/services/T0AAAA/B0BBBB/xoxb-secret-path-token"
	for _, c := range []struct {
		name    string
		sink    events.Sink
		leaks   bool
		logName string
	}{
		{"labelled", events.WithLabel(&urlErrSink{recordSink{name: url}}, "orders"), false, "orders"},
		{"unlabelled (control)", &urlErrSink{recordSink{name: url}}, true, url},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logBuf testenv.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			l := seckilltest.NewMemLog("sale s")
			l.Append(someEvents(3)...)
			x := delivery.New(delivery.Config{Sinks: []events.Sink{c.sink}, Logs: logs(l), DeadLetters: &deadLetters{},
				GiveUp: 200 * time.Millisecond, RetryBase: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond, Logger: log})
			r := background.NewRunner(log)
			r.Start(x)
			defer func() { _ = r.Stop(context.Background()) }()
			eventually(t, "the retry and the give-up logged", func() bool {
				s := logBuf.String()
				return strings.Contains(s, "background work failed") && strings.Contains(s, "giving up on events")
			})
			s := logBuf.String()
			if leaked := strings.Contains(s, "xoxb-secret-path-token"); leaked != c.leaks {
				t.Fatalf("the token in the sink's path logged: %v, want %v:\n%s", leaked, c.leaks, s)
			}
			if !strings.Contains(s, c.logName) {
				t.Fatalf("the log does not name the sink %q:\n%s", c.logName, s)
			}
		})
	}
}
