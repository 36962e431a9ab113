package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// pingStore is the real store whose Ping fails (down) or waits for its context (hung).
type pingStore struct {
	*sqlstore.Store
	down, hung atomic.Bool
}

func (s *pingStore) Ping(ctx context.Context) error {
	switch {
	case s.hung.Load():
		<-ctx.Done()
		return ctx.Err()
	case s.down.Load():
		return errors.New("dial tcp 127.0.0.1:3306: connect: connection refused")
	}
	return s.Store.Ping(ctx)
}

// TestReadyzFollowsTheEngine: /readyz says whether this instance can serve buys. Its engine
// check (here "redis") decides: 503 when it fails. The database is reported in the body but
// does not make the instance unready, since buys do not need it: 200 "degraded" while it is
// down or hangs (the check is bounded, so the probe still gets its answer). Before, a database
// outage answered 503 on every instance at once, and a load balancer routing on /readyz
// pulled them all while buys still worked.
func TestReadyzFollowsTheEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	real, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = real.Close() })
	store := &pingStore{Store: real}
	clock := seckilltest.NewManualClock(t0)
	svc := service.New(service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte(authSecret)})
	var redisDown atomic.Bool
	api := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte(authSecret), AdminToken: adminToken,
		PaymentSecret: []byte(paySecret), Clock: clock,
		Checks: map[string]func(context.Context) error{"redis": func(context.Context) error {
			if redisDown.Load() {
				return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
			}
			return nil
		}}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() { api.Close(); srv.Close() })

	type answer struct {
		Status any               `json:"status"` // a word in a 200, the HTTP status in a problem
		Checks map[string]string `json:"checks"`
		Code   string            `json:"code"`
		Detail string            `json:"detail"`
	}
	get := func() (int, answer) {
		t.Helper()
		client := srv.Client()
		client.Timeout = 10 * time.Second // a load balancer's probe gives up; an unbounded check would hang here
		resp, err := client.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var a answer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("/readyz: %d %s: %v", resp.StatusCode, b, err)
		}
		return resp.StatusCode, a
	}
	for _, c := range []struct {
		name                  string
		dbDown, dbHung, rDown bool
		status                int
		want                  string // status of a 200, detail of a 503
		database, redis       string
	}{
		{name: "all up", status: 200, want: "ready", database: "ok", redis: "ok"},
		{name: "database down", dbDown: true, status: 200, want: "degraded", database: "unavailable", redis: "ok"},
		{name: "database hangs", dbHung: true, status: 200, want: "degraded", database: "unavailable", redis: "ok"},
		{name: "redis down", rDown: true, status: 503, want: "not ready: database ok, redis unavailable"},
		{name: "both down", dbDown: true, rDown: true, status: 503, want: "not ready: database unavailable, redis unavailable"},
	} {
		store.down.Store(c.dbDown)
		store.hung.Store(c.dbHung)
		redisDown.Store(c.rDown)
		st, a := get()
		if st != c.status {
			t.Errorf("%s: /readyz %d %+v; want %d", c.name, st, a, c.status)
			continue
		}
		if st == 200 && (a.Status != c.want || a.Checks["database"] != c.database || a.Checks["redis"] != c.redis || len(a.Checks) != 2) {
			t.Errorf("%s: /readyz %+v; want status %s, database %s, redis %s", c.name, a, c.want, c.database, c.redis)
		}
		if st == 503 && (a.Code != string(seckill.CodeUnavailable) || a.Detail != c.want) {
			t.Errorf("%s: /readyz %+v; want code unavailable, detail %q", c.name, a, c.want)
		}
	}
}
