package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/sqlstore"
)

// `seckill events` is the operator's view of the event export (docs/EVENTS.md):
//
//	seckill events tail                 print events as they happen, one JSON object a line
//	seckill events replay --sink URL --since T [--until T]
//	                                    re-send a time range to a sink (consumers dedupe by id)
//	seckill events dead-letters [--sink URL] [--all] [--replay]
//	                                    list the events sinks gave up on, or replay them
//
// They read what the export reads: the order store's outbox and, on the Redis engine, the
// sales' streams (which keep entries only until every reader has them and 30 s have passed:
// replay on the Redis engine reaches back that far for reservation events; the outbox keeps
// refund events, and every event on the memory engine, for 7 days).
func eventsCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, eventsUsage)
			return errFlagHelp
		}
		return usageError{fmt.Errorf("events needs a subcommand: tail, replay or dead-letters\n\n%s", eventsUsage)}
	}
	switch args[0] {
	case "tail":
		return eventsTail(ctx, args[1:], getenv, stdout, stderr)
	case "replay":
		return eventsReplay(ctx, args[1:], getenv, stdout, stderr)
	case "dead-letters":
		return eventsDeadLetters(ctx, args[1:], getenv, stdout, stderr)
	}
	return usageError{fmt.Errorf("events: unknown subcommand %q (want tail, replay or dead-letters)", args[0])}
}

const eventsUsage = `usage: seckill events tail|replay|dead-letters [flags]

  tail          print reservation events as they happen, one JSON object a line
  replay        re-send the events of a time range to a sink
  dead-letters  list the events a sink gave up on (--replay: send them again)

Run "seckill events <subcommand> -h" for its flags.
`

// eventSources is what the events commands read: the order store and, on the Redis engine,
// the engine's streams.
type eventSources struct {
	store   *sqlstore.Store
	engine  *redisinv.Engine
	closeFn func()
}

func openEventSources(ctx context.Context, cfg config) (*eventSources, error) {
	store, err := sqlstore.Open(ctx, cfg.DB)
	if err != nil {
		return nil, scrubError(fmt.Errorf("open database %s: %w", maskURL(cfg.DB), err), urlSecrets(cfg.DB)...)
	}
	src := &eventSources{store: store, closeFn: func() { _ = store.Close() }}
	switch cfg.Engine {
	case "memory":
	case "redis":
		c, err := redisinv.Dial(ctx, cfg.RedisURL)
		if err != nil {
			_ = store.Close()
			return nil, scrubError(fmt.Errorf("connect to redis %s: %w", maskURL(cfg.RedisURL), err), urlSecrets(cfg.RedisURL)...)
		}
		src.engine = redisinv.New(c.Inventory)
		src.closeFn = func() { c.Close(); _ = store.Close() }
	default:
		_ = store.Close()
		return nil, fmt.Errorf("unknown engine %q: use memory or redis", cfg.Engine)
	}
	return src, nil
}

func (s *eventSources) close() { s.closeFn() }

// saleIDs lists the sales to read: the one asked for, else those keep says.
func (s *eventSources) saleIDs(ctx context.Context, only string, keep func(end time.Time) bool) ([]string, error) {
	if only != "" {
		return []string{only}, nil
	}
	sales, _, err := s.store.Sales(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, sale := range sales {
		if keep(sale.EndsAt.Add(sale.HoldDuration())) {
			ids = append(ids, sale.ID)
		}
	}
	return ids, nil
}

func eventsFlags(name string, getenv func(string) string, cfg *config) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	bindEngineStoreConfig(fs, getenv, cfg)
	return fs
}

// eventsTail prints every event from now on, until interrupted.
func eventsTail(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := eventsFlags("events tail", getenv, &cfg)
	sale := fs.String("sale", "", "only this sale's events")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	src, err := openEventSources(ctx, cfg)
	if err != nil {
		return err
	}
	defer src.close()
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	print := func(evs []events.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if *sale == "" || e.SaleID == *sale {
				_ = enc.Encode(e)
			}
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// The outbox: refund events, and every event on the memory engine. Entries of the last
	// few seconds are shown too: an event is written to the outbox a moment after it happened.
	wg.Go(func() {
		since, after := time.Now().Add(-5*time.Second), int64(0)
		for ctx.Err() == nil {
			entries, err := src.store.OutboxSince(ctx, since, time.Unix(math.MaxInt32, 0), after, 256)
			if err != nil && ctx.Err() == nil {
				fmt.Fprintln(stderr, "seckill events tail: reading the outbox:", err)
			}
			for _, en := range entries {
				print([]events.Event{en.Event})
				after = en.Seq
			}
			if len(entries) == 0 {
				wait.Sleep(ctx, 200*time.Millisecond)
			}
		}
	})
	if src.engine == nil {
		<-ctx.Done()
		return nil
	}
	// The Redis engine: each live sale's streams (one per segment), from their newest entries on.
	following := map[string]bool{}
	for ctx.Err() == nil {
		ids, err := src.saleIDs(ctx, *sale, func(end time.Time) bool { return time.Now().Before(end.Add(time.Minute)) })
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "seckill events tail: listing the sales:", err)
		}
		for _, id := range ids {
			if following[id] {
				continue
			}
			following[id] = true
			wg.Go(func() {
				r := src.engine.NewEventReader(id, "$", "+")
				for ctx.Err() == nil {
					evs, err := r.Next(ctx, 256, time.Second)
					if err != nil {
						wait.Sleep(ctx, time.Second)
						continue
					}
					print(evs)
				}
			})
		}
		wait.Sleep(ctx, time.Second)
	}
	return nil
}

// eventsReplay re-sends the events of [since, until) to one sink.
func eventsReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := eventsFlags("events replay", getenv, &cfg)
	sinkURL := fs.String("sink", "", "URL of the sink to send to, as in --export (required)")
	sinceS := fs.String("since", "", "start of the range: an RFC 3339 time, or a duration ago such as 30m (required)")
	untilS := fs.String("until", "", "end of the range (excluded): an RFC 3339 time or a duration ago; default now")
	sale := fs.String("sale", "", "only this sale's events")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	now := time.Now()
	since, err := parseWhen(*sinceS, now)
	if err != nil || *sinceS == "" {
		return usageError{fmt.Errorf("--since: want an RFC 3339 time or a duration ago such as 30m (%v)", err)}
	}
	until := now
	if *untilS != "" {
		if until, err = parseWhen(*untilS, now); err != nil {
			return usageError{fmt.Errorf("--until: %w", err)}
		}
	}
	if !since.Before(until) {
		return usageError{errors.New("--since must be before --until")}
	}
	sink, err := openReplaySink(ctx, *sinkURL, getenv)
	if err != nil {
		return err
	}
	defer sink.Close()
	src, err := openEventSources(ctx, cfg)
	if err != nil {
		return err
	}
	defer src.close()
	total := 0 // events sent: those of other sales, with --sale, are read but not sent
	publish := func(evs []events.Event) error {
		var keep []events.Event
		for _, e := range evs {
			if *sale == "" || e.SaleID == *sale {
				keep = append(keep, e)
			}
		}
		if len(keep) == 0 {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := sink.Publish(pctx, keep); err != nil {
			return err
		}
		total += len(keep)
		return nil
	}
	for after := int64(0); ; {
		entries, err := src.store.OutboxSince(ctx, since, until, after, 256)
		if err != nil {
			return fmt.Errorf("read the outbox: %w", err)
		}
		if len(entries) == 0 {
			break
		}
		evs := make([]events.Event, len(entries))
		for i, en := range entries {
			evs[i], after = en.Event, en.Seq
		}
		if err := publish(evs); err != nil {
			return fmt.Errorf("publish to %s: %w (%d events sent before it)", sink.Name(), err, total)
		}
	}
	if src.engine != nil {
		ids, err := src.saleIDs(ctx, *sale, func(end time.Time) bool { return !end.Add(time.Minute).Before(since) })
		if err != nil {
			return fmt.Errorf("list the sales: %w", err)
		}
		from := strconv.FormatInt(since.UnixMilli()-1, 10) + "-18446744073709551615"
		to := strconv.FormatInt(until.UnixMilli()-1, 10) + "-18446744073709551615"
		for _, id := range ids {
			for r := src.engine.NewEventReader(id, from, to); ; {
				evs, err := r.Next(ctx, 256, 0)
				if err != nil {
					return fmt.Errorf("read sale %s's streams: %w", id, err)
				}
				if r.Done() {
					break
				}
				if err := publish(evs); err != nil {
					return fmt.Errorf("publish to %s: %w (%d events sent before it)", sink.Name(), err, total)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "replayed %d events of %s to %s\n", total, since.UTC().Format(time.RFC3339), sink.Name())
	return nil
}

// eventsDeadLetters lists the dead letters, or replays a sink's.
func eventsDeadLetters(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := eventsFlags("events dead-letters", getenv, &cfg)
	sinkURL := fs.String("sink", "", "only this sink's dead letters (its URL, as in --export); required with --replay")
	all := fs.Bool("all", false, "list those already replayed too")
	replay := fs.Bool("replay", false, "send the sink's dead letters not yet replayed again, oldest first, and mark them replayed")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *replay && *sinkURL == "" {
		return usageError{errors.New("--replay needs --sink: the URL of the sink to send them to")}
	}
	var sink events.Sink
	name := ""
	if *sinkURL != "" {
		var err error
		if sink, err = openReplaySink(ctx, *sinkURL, getenv); err != nil {
			return err
		}
		defer sink.Close()
		name = sink.Name()
	}
	src, err := openEventSources(ctx, cfg)
	if err != nil {
		return err
	}
	defer src.close()
	enc := json.NewEncoder(stdout)
	sent, listed := 0, 0
	for after := int64(0); ; {
		dl, err := src.store.DeadLetters(ctx, name, after, 256, *all && !*replay)
		if err != nil {
			return fmt.Errorf("read the dead letters: %w", err)
		}
		if len(dl) == 0 {
			break
		}
		after = dl[len(dl)-1].ID
		if !*replay {
			for _, d := range dl {
				_ = enc.Encode(d)
			}
			listed += len(dl)
			continue
		}
		evs, ids := make([]events.Event, len(dl)), make([]int64, len(dl))
		for i, d := range dl {
			evs[i], ids[i] = d.Event, d.ID
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = sink.Publish(pctx, evs)
		cancel()
		if err != nil {
			return fmt.Errorf("publish to %s: %w (%d dead letters replayed before it)", name, err, sent)
		}
		if err := src.store.MarkDeadLettersReplayed(ctx, ids, time.Now()); err != nil {
			return fmt.Errorf("mark replayed: %w (they were sent: a second replay sends them again)", err)
		}
		sent += len(dl)
	}
	if *replay {
		fmt.Fprintf(stdout, "replayed %d dead letters to %s\n", sent, name)
		return nil
	}
	// The list is JSON lines on stdout, for programs; its count goes to stderr, for the
	// operator, so that an empty list says so instead of printing nothing.
	which := "not yet replayed"
	if *all {
		which = "in all, those already replayed included"
	}
	fmt.Fprintf(stderr, "%d dead letters %s\n", listed, which)
	return nil
}

// openReplaySink opens one sink as --export would (HTTP callbacks signed with
// SECKILL_EXPORT_SECRET unless the URL names another secret), with the same checks.
func openReplaySink(ctx context.Context, raw string, getenv func(string) string) (events.Sink, error) {
	if raw == "" {
		return nil, usageError{errors.New("--sink is required: the URL of a sink, as in --export")}
	}
	cfg := config{ExportSecret: getenv("SECKILL_EXPORT_SECRET")}
	cfg.otherSecretsFromEnv(getenv)
	opts, err := cfg.exportOptions()
	if err != nil {
		return nil, err
	}
	s, err := sinks.Open(ctx, raw, opts)
	if err != nil {
		return nil, fmt.Errorf("--sink: %w", err)
	}
	return s, nil
}

// parseWhen reads an RFC 3339 time, or a duration before now ("30m").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration ago must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return t, nil
}
