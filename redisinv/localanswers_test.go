package redisinv

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
)

// watcherT connects a Watcher to c's deployment for the test's lifetime (closed after the
// engines, whose cleanups run first).
func watcherT(t *testing.T, c *Clients) *Watcher {
	t.Helper()
	w, err := c.NewWatcher()
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// conformanceLocal runs the shared conformance suite on engines that answer locally: the
// rules, the rapid model and the concurrency checker judge the local answers as they judge
// Redis' (the suite's engine is used as one instance would be: its own writes, then reads).
func conformanceLocal(t *testing.T, url string, rounds int) {
	c := dialT(t, url)
	w := watcherT(t, c)
	var engines []*Engine
	seckilltest.TestInventory(t, func(t *testing.T, clock seckill.Clock) seckill.Inventory {
		e := newTestEngine(t, c.Inventory, clock, WithLocalAnswers(w))
		engines = append(engines, e)
		return e
	}, seckilltest.ModelRounds(rounds))
	var local uint64
	for _, e := range engines {
		for _, n := range e.LocalAnswerStats().Answered {
			local += n
		}
	}
	t.Logf("%d engines answered %d buys locally", len(engines), local)
}

// TestConformanceLocalAnswersStandalone: the conformance suite with local answers, standalone,
// with two rounds of the model comparison (the local view is code of its own in front of the
// scripts that TestInventoryStandalone searches with five).
func TestConformanceLocalAnswersStandalone(t *testing.T) {
	conformanceLocal(t, testenv.Redis(t), 2)
}

// TestConformanceLocalAnswersCluster: the same on a Redis Cluster, one round.
func TestConformanceLocalAnswersCluster(t *testing.T) {
	url := testenv.RedisCluster(t)
	if c := dialT(t, url); !c.Cluster {
		t.Fatalf("%s is not a Redis Cluster", url)
	}
	conformanceLocal(t, url, 1)
}

const (
	laSecret = "local-answers-test-secret-0123456789"
	laAdmin  = "local-answers-admin"
)

// laInstance is one instance over a shared Redis prefix: its engine and its HTTP API.
type laInstance struct {
	e   *Engine
	url string
}

func newLAInstance(t *testing.T, rdb rueidis.Client, prefix string, clock seckill.Clock, opts ...Option) *laInstance {
	t.Helper()
	e := New(rdb, append([]Option{WithTestClock(clock), WithPrefix(prefix)}, opts...)...)
	store := sqliteStoreT(t)
	svc := service.New(service.Config{Inventory: e, Windows: e, Store: store, Clock: clock, AuthSecret: []byte(laSecret)})
	api := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte(laSecret), AdminToken: laAdmin, Clock: clock, BuyRate: -1})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		api.Close()
		srv.Close()
		_ = e.Close()
		_ = store.Close()
	})
	return &laInstance{e: e, url: srv.URL}
}

// laAnswer is what a client sees of an answer: the status, the headers that matter, the body.
type laAnswer struct {
	status                  int
	contentType, retryAfter string
	body                    []byte
}

func (a laAnswer) String() string {
	return fmt.Sprintf("%d %s retry-after=%q %s", a.status, a.contentType, a.retryAfter, a.body)
}

func (a laAnswer) equal(b laAnswer) bool {
	return a.status == b.status && a.contentType == b.contentType && a.retryAfter == b.retryAfter && bytes.Equal(a.body, b.body)
}

// laBuy is one buy request.
type laBuy struct {
	sale      seckill.Sale
	user, key string
	quantity  int
}

func (in *laInstance) buy(t *testing.T, clock seckill.Clock, b laBuy) laAnswer {
	t.Helper()
	tok, err := httpapi.MintToken([]byte(laSecret), b.user, clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := client.BuyPath(b.sale.ID, purchasetoken.New(purchasetoken.Key([]byte(laSecret)), b.sale.ID, b.user, b.sale.StartsAt))
	req, _ := http.NewRequest("POST", in.url+path, strings.NewReader(fmt.Sprintf(`{"quantity":%d}`, b.quantity)))
	req.Header.Set("Authorization", "Bearer "+tok)
	if b.key != "" {
		req.Header.Set("Idempotency-Key", b.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return laAnswer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), body}
}

func (in *laInstance) localCount() uint64 {
	var n uint64
	for _, c := range in.e.LocalAnswerStats().Answered {
		n += c
	}
	return n
}

// localBuy sends b to in until in answers it locally (its view has been read), and returns
// that answer; ok false if it never did within 30 s.
func (in *laInstance) localBuy(t *testing.T, clock seckill.Clock, b laBuy) (laAnswer, bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		before := in.localCount()
		a := in.buy(t, clock, b)
		if in.localCount() > before {
			return a, true
		}
	}
	return laAnswer{}, false
}

// laSale loads a sale through e.
func laSale(t *testing.T, e *Engine, clock seckill.Clock, id string, in seckill.SaleInput) seckill.Sale {
	t.Helper()
	in.ID = id
	now := clock.Now()
	if in.StartsAt == nil {
		in.StartsAt = ptr(now.Add(-time.Minute))
	}
	if in.PriceCents == nil {
		in.PriceCents = ptr(int64(100))
	}
	def, err := seckill.NewSale(in, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	return def
}

func laHold(t *testing.T, e *Engine, sale, user, key string, q int) seckill.Reservation {
	t.Helper()
	r, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: sale, UserID: user, Quantity: q, IdempotencyKey: key})
	if err != nil {
		t.Fatalf("buy %s %s: %v", sale, user, err)
	}
	return r.Reservation
}

func laPay(t *testing.T, e *Engine, r seckill.Reservation) {
	t.Helper()
	res, _, err := e.ConfirmPayment(t.Context(), seckill.PaymentConfirmation{PaymentID: "pay-" + r.ID, ReservationID: r.ID, AmountCents: r.AmountCents})
	if err != nil || res != seckill.PaymentApplied {
		t.Fatalf("pay %s: %v %v", r.ID, res, err)
	}
}

// TestLocalAnswersEqualEngine: every kind of local answer, over HTTP, is byte for byte the
// answer the engine gives through Redis. Instance A answers locally, instance B (the same
// Redis keys, no local answers) through Redis. A buy that only Redis can answer (a replay)
// is never answered locally. Negative control: a view made wrong on purpose (a buyer's units
// forgotten) gives an answer the comparison tells apart.
func TestLocalAnswersEqualEngine(t *testing.T) {
	a, b, clock, sales := laEqualRig(t)
	so, left, qf, cl, ns, en := sales[0], sales[1], sales[2], sales[3], sales[4], sales[5]
	cases := []struct {
		name string
		buy  laBuy
		want int
	}{
		{"sold out", laBuy{so, "n1", "", 1}, 409},
		{"sold out, with a key", laBuy{so, "n2", "fresh-key", 1}, 409},
		{"per-user limit, units", laBuy{so, "u1", "k9", 1}, 409},
		{"per-user limit, quantity", laBuy{so, "n3", "", 2}, 409},
		{"fewer left than asked", laBuy{left, "n1", "", 2}, 409},
		{"no queue", laBuy{left, "n2", "", 1}, 409},
		{"queue full", laBuy{qf, "n1", "", 1}, 409},
		{"closed", laBuy{cl, "n1", "", 1}, 410},
		{"closed, a replay", laBuy{cl, "u1", "k1", 1}, 410},
		{"not started", laBuy{ns, "n1", "", 1}, 425},
	}
	check := func(name string, buy laBuy, want int) {
		t.Helper()
		local, ok := a.localBuy(t, clock, buy)
		if !ok {
			t.Errorf("%s: never answered locally", name)
			return
		}
		real := b.buy(t, clock, buy)
		if real.status != want {
			t.Errorf("%s: the engine answered %v, want %d", name, real, want)
		}
		if !local.equal(real) {
			t.Errorf("%s: local answer differs from the engine's:\nlocal  %v\nengine %v", name, local, real)
		}
	}
	for _, tc := range cases {
		check(tc.name, tc.buy, tc.want)
	}
	laSaleReadsEqual(t, a, b)
	laSaleNegativeControl(t, a, b)

	// Time-ended: the scripts' clock (here the test clock) is past ends_at.
	clock.Advance(31 * time.Minute)
	check("ended", laBuy{en, "n1", "", 1}, 410)

	// Only Redis knows a replay: A must send it there (and so answer as B does).
	before := a.localCount()
	replay := laBuy{so, "u1", "k1", 1}
	if ra, rb := a.buy(t, clock, replay), b.buy(t, clock, replay); ra.status != 200 || !ra.equal(rb) {
		t.Errorf("replay: A %v, B %v", ra, rb)
	}
	if a.localCount() != before {
		t.Error("a replay was answered locally")
	}

	laBuyNegativeControl(t, a, b, clock, so)
}

// laEqualRig is TestLocalAnswersEqualEngine's two instances on one Redis (a with local answers)
// and its six sales, in the order so, left, qf, cl, ns, en.
func laEqualRig(t *testing.T) (a, b *laInstance, clock *seckilltest.ManualClock, sales []seckill.Sale) {
	c := dialT(t, testenv.Redis(t))
	w := watcherT(t, c)
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	clock = seckilltest.NewManualClock(time.Now().UTC().Truncate(time.Second))
	a = newLAInstance(t, c.Inventory, prefix, clock, WithLocalAnswers(w))
	b = newLAInstance(t, c.Inventory, prefix, clock)

	// Sold out for good: 2 units, both paid; per user 1.
	so := laSale(t, b.e, clock, "so", seckill.SaleInput{Stock: ptr(2), PerUserLimit: ptr(1)})
	laPay(t, b.e, laHold(t, b.e, "so", "u1", "k1", 1))
	laPay(t, b.e, laHold(t, b.e, "so", "u2", "", 1))
	// Fewer left than asked: 3 units, 2 paid, 1 held for 10 minutes; per user 5; no queue.
	left := laSale(t, b.e, clock, "left", seckill.SaleInput{Stock: ptr(3), PerUserLimit: ptr(5), HoldSeconds: ptr(600), QueueLimit: ptr(0)})
	laPay(t, b.e, laHold(t, b.e, "left", "u1", "", 2))
	laHold(t, b.e, "left", "u2", "", 1)
	// Queue full: 1 unit held for 10 minutes, 1 buyer queued, room for 1.
	qf := laSale(t, b.e, clock, "qf", seckill.SaleInput{Stock: ptr(1), HoldSeconds: ptr(600), QueueLimit: ptr(1)})
	laHold(t, b.e, "qf", "u1", "", 1)
	laHold(t, b.e, "qf", "u2", "", 1)
	// Closed, not started, and ending in 30 minutes (the clock moves past it below).
	cl := laSale(t, b.e, clock, "cl", seckill.SaleInput{Stock: ptr(5)})
	if _, _, err := b.e.CloseSale(t.Context(), "cl"); err != nil {
		t.Fatal(err)
	}
	ns := laSale(t, b.e, clock, "ns", seckill.SaleInput{Stock: ptr(5), StartsAt: ptr(clock.Now().Add(time.Hour))})
	en := laSale(t, b.e, clock, "en", seckill.SaleInput{Stock: ptr(5), EndsAt: ptr(clock.Now().Add(30 * time.Minute))})
	// (buy.lua's quantity × price overflow cannot be reached: a sale's per_user_limit × price
	// is at most 2^53 - 1.)
	return a, b, clock, []seckill.Sale{so, left, qf, cl, ns, en}
}

// laSaleReadsEqual: Sale reads answered from a's views equal the engine's (sale.lua through Redis).
func laSaleReadsEqual(t *testing.T, a, b *laInstance) {
	for _, id := range []string{"so", "left", "qf", "cl", "ns", "en"} {
		var local seckill.Sale
		var localSt seckill.StockState
		answered := false
		for deadline := time.Now().Add(30 * time.Second); !answered && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			before := a.e.LocalAnswerStats().SaleReads
			s, st, err := a.e.Sale(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			local, localSt, answered = s, st, a.e.LocalAnswerStats().SaleReads > before
		}
		real, realSt, err := b.e.Sale(t.Context(), id)
		switch {
		case err != nil:
			t.Fatal(err)
		case !answered:
			t.Errorf("Sale(%s) never answered locally", id)
		case !reflect.DeepEqual(local, real) || localSt != realSt:
			t.Errorf("Sale(%s) local %+v %+v, engine %+v %+v", id, local, localSt, real, realSt)
		}
	}
}

// laSaleNegativeControl: a view with one unit more available answers a Sale that differs.
func laSaleNegativeControl(t *testing.T, a, b *laInstance) {
	// Negative control of that comparison: a view with one unit more available differs. (The
	// view may be re-read meanwhile: the wrong one is put back until a read uses it.)
	_, realSt, _ := b.e.Sale(t.Context(), "so")
	sl := a.e.local.sale("so")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("negative control: the wrong view was never used by Sale")
		}
		v := sl.view.Load()
		if v == nil {
			_, _, _ = a.e.Sale(t.Context(), "so") // starts a read of the view
			continue
		}
		bad := *v
		bad.s.avail++
		sl.view.Store(&bad)
		before := a.e.LocalAnswerStats().SaleReads
		_, st, _ := a.e.Sale(t.Context(), "so")
		if a.e.LocalAnswerStats().SaleReads == before {
			continue
		}
		if st == realSt {
			t.Error("negative control: a wrong view's Sale equals the engine's")
		}
		sl.view.Store(nil) // read again before the buys below
		break
	}

}

// laBuyNegativeControl: a view that forgets u1's unit answers u1 sold_out where the engine says
// limit_exceeded, and the comparison sees it.
func laBuyNegativeControl(t *testing.T, a, b *laInstance, clock seckill.Clock, so seckill.Sale) {
	// Negative control: a view that forgets u1's unit answers u1 sold_out where the engine
	// says limit_exceeded, and the comparison sees it.
	// The view is re-read now and then (localMaxAge), so the wrong one is put back before
	// each try, until a try is answered from it.
	sl := a.e.local.sale("so")
	buy := laBuy{so, "u1", "k10", 1}
	real := b.buy(t, clock, buy)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("negative control: the wrong view was never used")
		}
		v := sl.view.Load()
		if v == nil {
			a.buy(t, clock, laBuy{so, "n1", "", 1}) // starts a read of the view
			continue
		}
		bad := *v
		bad.users = map[string]int64{}
		sl.view.Store(&bad)
		before := a.localCount()
		local := a.buy(t, clock, buy)
		if a.localCount() == before {
			continue
		}
		if local.equal(real) {
			t.Fatalf("negative control: the wrong view's answer %v equals the engine's", local)
		}
		break
	}
}

// TestLocalAnswersRestock: a sold-out sale answered locally re-opens when it is restocked: at
// once on the instance that restocked (its own reply is newer than its view), and by the
// invalidation on another; with invalidations lost (negative control), the other instance
// answers sold out after the restock, and re-opens only when the view ages out (localMaxAge).
// The views do not age out by the wall clock here (testMaxAge): with invalidations delivered
// only the invalidation can re-open the sale, and with them lost the sale stays sold out until
// the test ages the view, however slow the machine.
func TestLocalAnswersRestock(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	w := watcherT(t, c)
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	clock := seckilltest.NewManualClock(time.Now().UTC().Truncate(time.Second))
	a := newLAInstance(t, c.Inventory, prefix, clock, WithLocalAnswers(w))
	b := newLAInstance(t, c.Inventory, prefix, clock, WithLocalAnswers(w))
	n := 0
	user := func() string { n++; return fmt.Sprintf("buyer%d", n) }

	for _, tc := range []struct {
		name    string
		restock *laInstance
		drop    bool
	}{
		{"same instance", a, false},
		{"other instance", b, false},
		{"other instance, invalidations lost", b, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.e.local.testMaxAge.Store(int64(time.Hour))
			defer a.e.local.testMaxAge.Store(0)
			id := fmt.Sprintf("rs%d", n)
			sale := laSale(t, a.e, clock, id, seckill.SaleInput{Stock: ptr(1)})
			laPay(t, a.e, laHold(t, a.e, id, user(), "", 1))
			if got, ok := a.localBuy(t, clock, laBuy{sale, user(), "", 1}); !ok || got.status != 409 {
				t.Fatalf("not answered sold out locally: %v %v", got, ok)
			}
			w.drop.Store(tc.drop)
			defer w.drop.Store(false)
			if _, _, err := tc.restock.e.AddStock(t.Context(), id, 1); err != nil {
				t.Fatal(err)
			}
			stale := 0
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				got := a.buy(t, clock, laBuy{sale, user(), "", 1})
				if got.status == 201 {
					break
				}
				if got.status != 409 {
					t.Fatalf("after the restock: %v", got)
				}
				stale++
				if tc.drop && stale == 3 {
					a.e.local.testMaxAge.Store(-1) // the view ages out
				}
				if time.Now().After(deadline) {
					t.Fatalf("still sold out 30 s after the restock (%d answers)", stale)
				}
			}
			t.Logf("re-opened after %d sold-out answers", stale)
			if tc.restock == a && stale != 0 {
				t.Errorf("the restocking instance answered sold out %d times after its own restock", stale)
			}
			if tc.drop && stale < 3 {
				t.Errorf("negative control: with invalidations lost, the view was stale for %d answers, not until it aged out", stale)
			}
		})
	}
}

// TestInFlightBound: with Redis not answering (the proxy holds every byte), an instance lets
// exactly its bound of buys of a sale wait; the next is answered 503 with Retry-After at once.
// With a bound one higher (the control), the same buy waits like the others, and once Redis
// answers again every buy that waited gets its hold: the bound refuses nothing else.
func TestInFlightBound(t *testing.T) {
	ep, err := ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		bound    int
		wantShed bool
	}{{"at the bound", 4, true}, {"under the bound", 5, false}} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newGateProxy(t, ep.Addrs[0])
			defer proxy.close()
			rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.addr}, Username: ep.Username,
				Password: ep.Password, SelectDB: ep.DB, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			prefix := testPrefix()
			defer dropPrefix(t, rdb, prefix)
			clock := seckilltest.NewManualClock(time.Now().UTC().Truncate(time.Second))
			in := newLAInstance(t, rdb, prefix, clock, WithMaxInFlight(tc.bound), WithTimeout(30*time.Second))
			sale := laSale(t, in.e, clock, "ifb", seckill.SaleInput{Stock: ptr(100)})
			// One buy before Redis stops, so that the service knows the sale's start.
			if got := in.buy(t, clock, laBuy{sale, "warm", "", 1}); got.status != 201 {
				t.Fatalf("warm-up buy: %v", got)
			}

			proxy.pause()
			answers := make(chan laAnswer, 4)
			for i := range 4 {
				go func() { answers <- in.buy(t, clock, laBuy{sale, fmt.Sprintf("w%d", i), "", 1}) }()
			}
			for deadline := time.Now().Add(10 * time.Second); in.e.inflight.inFlight("ifb") < 4; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("only %d buys in flight", in.e.inflight.inFlight("ifb"))
				}
			}
			fifth := make(chan laAnswer, 1)
			go func() { fifth <- in.buy(t, clock, laBuy{sale, "w4", "", 1}) }()
			if tc.wantShed {
				got := <-fifth
				if got.status != 503 || got.retryAfter != "1" || got.contentType != "application/problem+json" ||
					!bytes.Contains(got.body, []byte(`"code":"unavailable"`)) {
					t.Errorf("the buy beyond the bound: %v", got)
				}
				if len(answers) != 0 {
					t.Errorf("a buy within the bound was answered while Redis was held")
				}
			} else {
				for deadline := time.Now().Add(10 * time.Second); in.e.inflight.inFlight("ifb") < 5; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the fifth buy is not in flight (%d)", in.e.inflight.inFlight("ifb"))
					}
				}
				go func() { answers <- <-fifth }()
			}
			proxy.resume()
			waiting := 4
			if !tc.wantShed {
				waiting = 5
			}
			for range waiting {
				if got := <-answers; got.status != 201 {
					t.Errorf("a buy within the bound: %v", got)
				}
			}
			if shed := in.e.LocalAnswerStats().Shed; shed != map[bool]uint64{true: 1, false: 0}[tc.wantShed] {
				t.Errorf("shed count %d", shed)
			}
			if n := in.e.inflight.inFlight("ifb"); n != 0 {
				t.Errorf("%d buys still counted in flight", n)
			}
		})
	}
}

// TestLocalAnswersMetrics: the collector exports the counts as they are.
func TestLocalAnswersMetrics(t *testing.T) {
	e := New(nil)
	e.local = &localAnswers{}
	e.local.counts[0].Add(3) // sold_out
	e.local.counts[2].Add(1) // ended
	e.local.refreshes.Add(5)
	e.local.saleReads.Add(7)
	e.inflight.shed.Add(2)
	ch := make(chan prometheus.Metric, 16)
	e.LocalAnswerCollector().Collect(ch)
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		name := m.Desc().String()
		name = name[strings.Index(name, `fqName: "`)+9:]
		name = name[:strings.Index(name, `"`)]
		for _, l := range d.GetLabel() {
			name += "{" + l.GetValue() + "}"
		}
		got[name] = d.GetCounter().GetValue()
	}
	want := map[string]float64{
		"seckill_redis_local_answers_total{sold_out}": 3, "seckill_redis_local_answers_total{queue_full}": 0,
		"seckill_redis_local_answers_total{ended}": 1, "seckill_redis_local_answers_total{not_started}": 0,
		"seckill_redis_local_answers_total{limit_exceeded}": 0, "seckill_redis_local_answers_total{invalid_argument}": 0,
		"seckill_redis_local_view_reads_total": 5, "seckill_redis_buys_shed_total": 2,
		"seckill_redis_local_sale_reads_total": 7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
}

// TestLocalAnswersRedisClock: with Redis TIME (no test clock), the view answers ended only
// once the lower bound of Redis' clock has reached ends_at, sends the buy to Redis while
// ends_at is within the bounds' uncertainty, and answers from the stock before.
func TestLocalAnswersRedisClock(t *testing.T) {
	ms := int64(time.Millisecond)
	v := &saleView{timeMs: 1_000_000, sent: 0, recv: ms, sets: true,
		s: st{ends: 1_000_500, limit: 1, qlimit: 10}} // nothing available, nothing held
	for _, tc := range []struct {
		after time.Duration // since the snapshot's reply
		code  string
		ok    bool
	}{
		{400 * time.Millisecond, "sold_out", true},
		{497 * time.Millisecond, "", false},
		{501 * time.Millisecond, "", false},
		{510 * time.Millisecond, "ended", true},
	} {
		code, _, ok := v.decide("u", 1, "", v.recv+int64(tc.after))
		if code != tc.code || ok != tc.ok {
			t.Errorf("%v after the snapshot: %q %v, want %q %v", tc.after, code, ok, tc.code, tc.ok)
		}
	}
	// The sale's own clock (the latest time a script used) counts even if TIME is behind.
	v.s.now = 1_000_600
	if code, _, ok := v.decide("u", 1, "", v.recv); !ok || code != "ended" {
		t.Errorf("with the sale's clock past ends_at: %q %v", code, ok)
	}
}
