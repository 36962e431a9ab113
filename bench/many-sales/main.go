// Command many-sales is the measuring half of bench/many-sales/run.sh (docs/BENCHMARKS.md
// "A flash-sale day: many sales at once"): run.sh starts the Redis Cluster, MariaDB's database
// and three instances, measures what only the machine can see (Redis commands/s and
// connections, RSS), and calls this for what needs the API:
//
//	many-sales create -sales N -selling 100   N listed sales, 100 of them selling now
//	many-sales holds  -count 500 -rate 50     holds bought in the selling sales, each timed
//	                                          from its 201 to its row in the database
//	many-sales list   -n 200                  GET /api/v1/sales?limit=50: cached and cold
//	many-sales flush  -nodes h:p,h:p,h:p      FLUSHALL every node while buyers buy: how soon a
//	                                          touched sale and every selling sale serve again,
//	                                          and the holds answered before the flush that
//	                                          never reached the database
//
// Each prints one line of name=value pairs for run.sh's table. Every call goes through the
// public Go client, except the list's, which needs the query string (?limit=) and the
// answer's size, and works against a server that pages as against one that ignores limit.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/wait"
)

type options struct {
	targets            []string
	adminToken, secret string
	prefix             string
	sales, selling     int
	count              int
	rate               float64
	dsn                string
	nodes              []string
	n                  int
	timeout, budget    time.Duration
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: many-sales create|holds|list|flush [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var o options
	targets := fs.String("targets", "http://127.0.0.1:8080", "instance URLs, comma-separated")
	fs.StringVar(&o.adminToken, "admin-token", os.Getenv("SECKILL_ADMIN_TOKEN"), "admin token")
	fs.StringVar(&o.secret, "auth-secret", os.Getenv("SECKILL_AUTH_SECRET"), "auth secret, to mint buyers' tokens")
	fs.StringVar(&o.prefix, "prefix", "day", "sale ids are <prefix>-<n>; the selling ones <prefix>-1 … <prefix>-<selling>")
	fs.IntVar(&o.sales, "sales", 100, "create, list: sales in all")
	fs.IntVar(&o.selling, "selling", 100, "sales selling now (the first ones)")
	fs.IntVar(&o.count, "count", 500, "holds: holds to buy")
	fs.Float64Var(&o.rate, "rate", 50, "holds, flush: holds bought per second")
	fs.StringVar(&o.dsn, "dsn", "", "holds, flush: the database (go-sql-driver DSN: user@tcp(host:port)/db)")
	nodes := fs.String("nodes", "", "flush: Redis nodes, host:port, comma-separated")
	fs.IntVar(&o.n, "n", 200, "list: requests per measure")
	fs.DurationVar(&o.budget, "budget", 30*time.Second, "list: longest each measure (cached, cold) may take; at least 3 requests")
	fs.DurationVar(&o.timeout, "timeout", 90*time.Second, "flush: longest wait for every selling sale")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	o.targets = strings.Split(*targets, ",")
	if *nodes != "" {
		o.nodes = strings.Split(*nodes, ",")
	}
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "create":
		err = create(ctx, o)
	case "holds":
		err = holds(ctx, o)
	case "list":
		err = list(ctx, o)
	case "flush":
		err = flush(ctx, o)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "many-sales:", err)
		os.Exit(1)
	}
}

func (o options) admin(i int) *client.Client {
	return client.New(o.targets[i%len(o.targets)], client.WithToken(o.adminToken))
}

func (o options) saleID(i int) string { return fmt.Sprintf("%s-%d", o.prefix, i+1) }

// parallel calls f(0…n-1), workers at a time, and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// create makes o.sales listed sales through the admin API, 32 at a time over the instances:
// the first o.selling sell now (for two hours, a stock that outlasts the run, holds of five
// minutes), of the others half start later today and half ended an hour ago, as a day's
// program has them.
func create(ctx context.Context, o options) error {
	now := time.Now().UTC().Truncate(time.Second)
	start := time.Now()
	err := parallel(o.sales, 32, func(i int) error {
		s := client.NewSale{ID: o.saleID(i), PriceCents: 999, Stock: 100_000, HoldSeconds: 300, Listed: client.Ptr(true)}
		switch {
		case i < o.selling:
			s.StartsAt, s.EndsAt = now.Add(-time.Minute), now.Add(2*time.Hour)
		case i%2 == 0:
			s.StartsAt = now.Add(time.Hour + time.Duration(i)*time.Second)
			s.EndsAt = s.StartsAt.Add(time.Hour)
		default:
			s.StartsAt, s.EndsAt = now.Add(-2*time.Hour-time.Duration(i)*time.Second), now.Add(-time.Hour)
		}
		_, err := o.admin(i).CreateSale(ctx, s)
		if err != nil {
			return fmt.Errorf("create %s: %w", s.ID, err)
		}
		return nil
	})
	fmt.Printf("created=%d create_s=%.1f\n", o.sales, time.Since(start).Seconds())
	return err
}

// hold is one hold bought: its reservation id and when its 201 was read.
type hold struct {
	id       string
	answered time.Time
}

// buyer buys holds in the first o.selling sales, round robin over the sales and the instances,
// one new user each, at o.rate a second, until stop is closed or count holds are bought (0: no
// bound). Every 201 is sent on got; other answers are counted in failed.
func (o options) buyer(ctx context.Context, tag string, count int, stop <-chan struct{}, got chan<- hold, failed *atomic.Int64) {
	gap := time.Duration(float64(time.Second) / o.rate)
	var wg sync.WaitGroup
	defer wg.Wait()
	next := time.Now()
	for i := 0; count == 0 || i < count; i++ {
		select {
		case <-stop:
			return
		default:
		}
		wait.Sleep(ctx, time.Until(next))
		next = next.Add(gap)
		wg.Go(func() {
			user := fmt.Sprintf("%s-%d", tag, i)
			token, err := httpapi.MintToken([]byte(o.secret), user, time.Now(), time.Hour)
			if err != nil {
				failed.Add(1)
				return
			}
			c := client.New(o.targets[i%len(o.targets)], client.WithToken(token))
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			p, err := c.Path(cctx, o.saleID(i%o.selling))
			if err == nil {
				var b client.Bought
				if b, err = c.Buy(cctx, p.Path, 1, "k-"+user); err == nil {
					got <- hold{id: b.ID, answered: time.Now()}
					return
				}
			}
			failed.Add(1)
		})
	}
}

// openDB opens the database with one connection, taken now and kept: a MariaDB shared with
// other work may be at its max_connections later (Error 1040), which is retried for 30 s.
func openDB(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	by := time.Now().Add(30 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return db, nil
		}
		if time.Now().After(by) || !wait.Sleep(ctx, 500*time.Millisecond) {
			db.Close()
			return nil, err
		}
	}
}

// inDatabase answers which of ids have a row in the reservations table.
func inDatabase(ctx context.Context, db *sql.DB, ids []string) (map[string]bool, error) {
	seen := map[string]bool{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := db.QueryContext(ctx, "SELECT id FROM reservations WHERE id IN (?"+strings.Repeat(",?", len(chunk)-1)+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			seen[id] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// holds buys o.count holds at o.rate and times each from its 201 to its row in the database,
// which it polls every 5 ms (so each figure is up to 5 ms and a query late).
func holds(ctx context.Context, o options) error {
	db, err := openDB(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	got := make(chan hold, o.count)
	var failed atomic.Int64
	go func() {
		o.buyer(ctx, fmt.Sprintf("h%d", time.Now().UnixNano()), o.count, nil, got, &failed)
		close(got)
	}()
	pending := map[string]time.Time{}
	var lat []time.Duration
	open := true
	giveUp := time.Now().Add(time.Duration(float64(o.count)/o.rate*float64(time.Second)) + time.Minute)
	for (open || len(pending) > 0) && time.Now().Before(giveUp) {
		for drained := false; open && !drained; {
			select {
			case h, ok := <-got:
				if !ok {
					open = false
					break
				}
				pending[h.id] = h.answered
			default:
				drained = true
			}
		}
		if len(pending) > 0 {
			seen, err := inDatabase(ctx, db, slices.Collect(maps.Keys(pending)))
			if err != nil {
				return err
			}
			now := time.Now()
			for id := range seen {
				lat = append(lat, now.Sub(pending[id]))
				delete(pending, id)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	slices.Sort(lat)
	fmt.Printf("holds=%d failed=%d never_stored=%d hold_db_p50_ms=%.0f hold_db_p99_ms=%.0f hold_db_max_ms=%.0f\n",
		len(lat), failed.Load(), len(pending), msAt(lat, 0.50), msAt(lat, 0.99), msAt(lat, 1))
	return nil
}

// msAt is the q-quantile of sorted durations, in ms (-1 if none).
func msAt(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return -1
	}
	return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
}

// list times GET /api/v1/sales?limit=50 as an anonymous shopper: cached, the same page asked
// o.n times round robin over the instances (after one request each); cold, the page asked
// right after the list changed (the last sale taken off the list and put back by the
// admin), o.n/10 times; each for at most o.budget. It reports p50 and p99, the answer's size and how many sales it held
// (a server that ignores limit answers them all).
func list(ctx context.Context, o options) error {
	hc := &http.Client{Timeout: 60 * time.Second}
	get := func(i int) (time.Duration, int, int, error) {
		start := time.Now()
		resp, err := hc.Get(o.targets[i%len(o.targets)] + "/api/v1/sales?limit=50")
		if err != nil {
			return 0, 0, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		d := time.Since(start)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("GET /api/v1/sales?limit=50: %s", resp.Status)
		}
		return d, len(b), strings.Count(string(b), `"stock_state"`), err
	}
	for i := range o.targets {
		if _, _, _, err := get(i); err != nil {
			return err
		}
	}
	var cached, cold []time.Duration
	var size, sales int
	// Each measure stops at o.n requests or after o.budget, whichever comes first: a server
	// that answers every listed sale can take seconds per page.
	by := time.Now().Add(o.budget)
	for i := 0; i < o.n && (i < 3 || time.Now().Before(by)); i++ {
		d, n, s, err := get(i)
		if err != nil {
			return err
		}
		cached, size, sales = append(cached, d), n, s
	}
	// Toggling the last sale on and off the list changes the list.
	toggle := o.saleID(o.sales - 1)
	by = time.Now().Add(o.budget)
	for i := 0; i < max(1, o.n/10) && (i < 3 || time.Now().Before(by)); i++ {
		if _, err := o.admin(i).SetListed(ctx, toggle, i%2 == 1); err != nil {
			return err
		}
		d, _, _, err := get(i)
		if err != nil {
			return err
		}
		cold = append(cold, d)
	}
	if _, err := o.admin(0).SetListed(ctx, toggle, true); err != nil {
		return err
	}
	slices.Sort(cached)
	slices.Sort(cold)
	fmt.Printf("list_cached_n=%d list_cold_n=%d list_bytes=%d list_sales=%d list_cached_p50_ms=%.1f list_cached_p99_ms=%.1f list_cold_p50_ms=%.1f list_cold_p99_ms=%.1f\n",
		len(cached), len(cold), size, sales, msAt(cached, 0.5), msAt(cached, 0.99), msAt(cold, 0.5), msAt(cold, 0.99))
	return nil
}

// flush has buyers buy holds at o.rate in the selling sales, then FLUSHALLs every node, and
// measures: touched_s, from the flush to the first hold answered in sale 1, which a buyer
// tries every 20 ms; every_s, until every selling sale answered a buy again (each tried once a
// second by a buyer of its own: the probe touches each sale, as returning buyers would);
// and, 5 s after, the holds answered before the flush that never reached the database
// (lost), with how long before the flush the oldest of them was answered.
func flush(ctx context.Context, o options) error {
	db, err := openDB(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	got := make(chan hold, 1<<16)
	stop := make(chan struct{})
	var failed atomic.Int64
	var buying sync.WaitGroup
	buying.Go(func() { o.buyer(ctx, fmt.Sprintf("f%d", time.Now().UnixNano()), 0, stop, got, &failed) })
	time.Sleep(3 * time.Second)

	for _, n := range o.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n})
		err := rc.FlushAll(ctx).Err()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("FLUSHALL %s: %w", n, err)
		}
	}
	flushed := time.Now()

	// back[i] is when sale i first answered a buy after the flush.
	back := make([]time.Time, o.selling)
	var mu sync.Mutex
	tag := fmt.Sprintf("p%d", flushed.UnixNano())
	try := func(sale, attempt int) bool {
		user := fmt.Sprintf("%s-%d-%d", tag, sale, attempt)
		token, _ := httpapi.MintToken([]byte(o.secret), user, time.Now(), time.Hour)
		c := client.New(o.targets[(sale+attempt)%len(o.targets)], client.WithToken(token))
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		p, err := c.Path(cctx, o.saleID(sale))
		if err == nil {
			_, err = c.Buy(cctx, p.Path, 1, "k-"+user)
		}
		if err != nil {
			return false
		}
		mu.Lock()
		if back[sale].IsZero() {
			back[sale] = time.Now()
		}
		mu.Unlock()
		return true
	}
	by := flushed.Add(o.timeout)
	var touched time.Duration = -1
	for attempt := 0; time.Now().Before(by); attempt++ {
		if try(0, attempt) {
			touched = time.Since(flushed)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var probes sync.WaitGroup
	for sale := 1; sale < o.selling; sale++ {
		probes.Go(func() {
			for attempt := 0; time.Now().Before(by); attempt++ {
				next := time.Now().Add(time.Second)
				if try(sale, attempt) {
					return
				}
				time.Sleep(time.Until(next))
			}
		})
	}
	probes.Wait()
	close(stop)
	buying.Wait()
	close(got)
	var every time.Duration
	backN, back30 := 0, 0
	for _, t := range back {
		if !t.IsZero() {
			backN++
			every = max(every, t.Sub(flushed))
			if t.Sub(flushed) <= 30*time.Second {
				back30++
			}
		}
	}
	time.Sleep(5 * time.Second)
	var before []hold
	after := 0
	for h := range got {
		if h.answered.Before(flushed) {
			before = append(before, h)
		} else {
			after++
		}
	}
	ids := make([]string, len(before))
	for i, h := range before {
		ids[i] = h.id
	}
	seen, err := inDatabase(ctx, db, ids)
	if err != nil {
		return err
	}
	lost, oldest := 0, time.Duration(0)
	for _, h := range before {
		if !seen[h.id] {
			lost++
			oldest = max(oldest, flushed.Sub(h.answered))
		}
	}
	everyS := fmt.Sprintf("%.1f", every.Seconds())
	if backN < o.selling {
		everyS = fmt.Sprintf(">%.0f", o.timeout.Seconds())
	}
	touchedS := fmt.Sprintf("%.2f", touched.Seconds())
	if touched < 0 {
		touchedS = fmt.Sprintf(">%.0f", o.timeout.Seconds())
	}
	fmt.Printf("touched_s=%s every_s=%s back=%d/%d back_30s=%d holds_before=%d lost=%d lost_oldest_ms=%d holds_after=%d failed_buys=%d\n",
		touchedS, everyS, backN, o.selling, back30, len(before), lost, oldest.Milliseconds(), after, failed.Load())
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}
