package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
	"pgregory.net/rapid"
)

// listed is what the walk knows of a sale: its place in the list's order and what the
// filters look at.
type listed struct {
	id             string
	starts, ends   time.Time
	listed         bool
	createdAfterAt *service.SalePosition // nil: before the walk; else the walk's position then
}

func (l listed) pos() service.SalePosition { return service.SalePosition{StartsAt: l.starts, ID: l.id} }

func posBefore(p, q service.SalePosition) bool {
	if !p.StartsAt.Equal(q.StartsAt) {
		return p.StartsAt.Before(q.StartsAt)
	}
	return p.ID < q.ID
}

func keeps(f service.SaleFilter, all bool, l listed, now time.Time) bool {
	if !all && !l.listed {
		return false
	}
	switch f {
	case service.FilterUpcoming:
		return now.Before(l.starts)
	case service.FilterSelling:
		return !now.Before(l.starts) && now.Before(l.ends)
	case service.FilterEnded:
		return !now.Before(l.ends)
	}
	return true
}

// checkWalk is the detector: the walk answered got (ids, in order); sales are every sale that
// existed. It fails on a sale out of order, answered twice, outside the filter, or left out
// although it existed before the walk, or was created at a place after the walk's position.
func checkWalk(got []string, sales map[string]listed, f service.SaleFilter, all bool, now time.Time) error {
	seen := map[string]bool{}
	for i, id := range got {
		l, ok := sales[id]
		switch {
		case !ok:
			return fmt.Errorf("answered %s, no such sale", id)
		case seen[id]:
			return fmt.Errorf("answered %s twice", id)
		case !keeps(f, all, l, now):
			return fmt.Errorf("answered %s, outside the filter", id)
		case i > 0 && !posBefore(sales[got[i-1]].pos(), l.pos()):
			return fmt.Errorf("answered %s after %s: out of order", id, got[i-1])
		}
		seen[id] = true
	}
	for id, l := range sales {
		if !keeps(f, all, l, now) || seen[id] {
			continue
		}
		if l.createdAfterAt == nil || posBefore(*l.createdAfterAt, l.pos()) {
			return fmt.Errorf("left out %s (created during the walk: %v)", id, l.createdAfterAt != nil)
		}
	}
	return nil
}

// TestListWalkIsExact: walking every page of any filter, at any limit, answers exactly the
// filtered sales in (starts_at, id) order, each once, while sales are created between pages:
// one created at a place after the page already read is answered, one before it is not.
func TestListWalkIsExact(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		ctx := t.Context()
		clock := seckilltest.NewManualClock(t0)
		store, err := sqlstore.Open(ctx, "sqlite://:memory:")
		if err != nil {
			rt.Fatal(err)
		}
		defer store.Close()
		svc := service.New(service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte("k")})
		sales := map[string]listed{}
		var at *service.SalePosition // the walk's position; nil before it starts
		create := func(label string) {
			id := fmt.Sprintf("s%03d", len(sales))
			starts := t0.Add(time.Duration(rapid.IntRange(-3, 3).Draw(rt, label+"Start")) * time.Minute)
			ends := starts.Add(time.Duration(rapid.IntRange(1, 3).Draw(rt, label+"Length")) * time.Minute)
			isListed := rapid.Bool().Draw(rt, label+"Listed")
			price, stock := int64(100), 1
			if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: id, PriceCents: &price, Stock: &stock,
				StartsAt: &starts, EndsAt: &ends, Listed: &isListed}); err != nil {
				rt.Fatal(err)
			}
			l := listed{id: id, starts: starts, ends: ends, listed: isListed}
			if at != nil {
				p := *at
				l.createdAfterAt = &p
			}
			sales[id] = l
		}
		for range rapid.IntRange(0, 25).Draw(rt, "sales") {
			create("before")
		}
		f := rapid.SampledFrom([]service.SaleFilter{service.FilterAny, service.FilterUpcoming, service.FilterSelling, service.FilterEnded}).Draw(rt, "filter")
		all := rapid.Bool().Draw(rt, "all")
		limit := rapid.IntRange(1, 6).Draw(rt, "limit")
		var got []string
		q := service.SalePageQuery{All: all, Filter: f, Limit: limit}
		for pages := 0; ; pages++ {
			if pages > 100 {
				rt.Fatal("more than 100 pages")
			}
			page, err := svc.SalePage(ctx, q)
			if err != nil {
				rt.Fatal(err)
			}
			if len(page.Sales) > limit {
				rt.Fatalf("page of %d at limit %d", len(page.Sales), limit)
			}
			for _, v := range page.Sales {
				got = append(got, v.ID)
			}
			if page.Next == nil {
				break
			}
			if last := page.Sales[len(page.Sales)-1]; page.Next.ID != last.ID || !page.Next.StartsAt.Equal(last.StartsAt) {
				rt.Fatalf("next %v is not the page's last sale %s", page.Next, last.ID)
			}
			at, q.After = page.Next, page.Next
			for range rapid.IntRange(0, 2).Draw(rt, "created") {
				create("during")
			}
		}
		if err := checkWalk(got, sales, f, all, clock.Now()); err != nil {
			rt.Fatalf("walk %v: %v", got, err)
		}
	})
}

// TestListWalkDetector is the negative control: the detector finds a duplicate, a gap, a sale
// out of order and one outside the filter.
func TestListWalkDetector(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sales := map[string]listed{
		"a": {id: "a", starts: t0, ends: t0.Add(time.Hour), listed: true},
		"b": {id: "b", starts: t0, ends: t0.Add(time.Hour), listed: true},
		"c": {id: "c", starts: t0.Add(time.Minute), ends: t0.Add(time.Hour), listed: false},
	}
	if err := checkWalk([]string{"a", "b"}, sales, service.FilterAny, false, t0); err != nil {
		t.Fatalf("the right walk: %v", err)
	}
	for _, bad := range [][]string{{"a", "b", "b"}, {"a"}, {"b", "a"}, {"a", "b", "c"}} {
		if err := checkWalk(bad, sales, service.FilterAny, false, t0); err == nil {
			t.Errorf("walk %v passed the detector", bad)
		}
	}
	if err := checkWalk([]string{"a", "b", "c"}, sales, service.FilterAny, true, t0); err != nil {
		t.Fatalf("all=true: %v", err)
	}
}
