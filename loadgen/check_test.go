package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSale is an HTTP stand-in for a sale of units units that answers its buyers in arrival
// order: a fresh hold (201) each while it has units, then sold_out. falseAt, if not zero, is
// the arrival (1-based) answered sold_out although units remain: an engine with a false
// sell-out. Every buyer cancels its hold (the crowd's mix), and the sale's reads answer 404
// (the generator's samples do without them).
func fakeSale(units, falseAt int64) http.Handler {
	var arrivals atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/path"):
			fmt.Fprint(w, `{"path":"/buy"}`)
		case r.Method == "POST" && r.URL.Path == "/buy":
			n := arrivals.Add(1)
			if n == falseAt || n > units {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusConflict)
				fmt.Fprint(w, `{"status":409,"code":"sold_out"}`)
				return
			}
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":"s-%d","status":"held","quantity":1,"expires_at":%q}`, n, time.Now().Add(time.Minute).Format(time.RFC3339Nano))
		case r.Method == "DELETE":
			fmt.Fprint(w, `{"status":"cancelled"}`)
		default:
			http.NotFound(w, r)
		}
	})
}

// TestCheckCatchesSoldOutWhileUnitsFree: the no-false-sell-out check passes a sale that says
// sold_out only once its units are gone, and fails one that says it to one buyer while later
// buyers still get holds (the negative control), from the generator's own records.
func TestCheckCatchesSoldOutWhileUnitsFree(t *testing.T) {
	const what = "no sold_out answered while a unit was free or held"
	for _, c := range []struct {
		name    string
		falseAt int64
		want    bool // a violation
	}{{"sound", 0, false}, {"false sell-out", 3, true}} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(fakeSale(5, c.falseAt))
			defer srv.Close()
			res, err := Run(context.Background(), Config{
				Targets: []string{srv.URL}, SaleID: "s", Buyers: 8, Concurrency: 1, Mix: Mix{Cancel: 100},
				Token: func(string) (string, error) { return "t", nil }, Deadline: 10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.SoldOut == 0 || len(res.SoldOutAt) != int(res.SoldOut) {
				t.Fatalf("sold_out answers %d, recorded %d; want some, all recorded", res.SoldOut, len(res.SoldOutAt))
			}
			// The database's side as a sold-out sale's: only the generator's records can fail.
			a := Audit{OK: true}
			a.Database.Sold, a.Database.PaidUnits = 5, 5
			v := Check(res, SaleFacts{Sellable: 5, PerUserLimit: 1, Sold: 5}, []InstanceAudit{{Target: srv.URL, Audit: a}}, 0)
			if !containsPrefix(v.Checked, what) {
				t.Fatalf("checked %q; want the false sell-out check", v.Checked)
			}
			if c.want != (len(v.Violations) == 1 && containsPrefix(v.Violations, "false sell-out: 1 buyers were told sold_out (the first")) ||
				!c.want && len(v.Violations) > 0 {
				t.Fatalf("violations %q; want the false sell-out reported: %v", v.Violations, c.want)
			}
		})
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestFIFOCatchesDisorder is the FIFO checker's negative control: buyers served in arrival
// order pass, and one served out of turn, or skipped while a later one is served, is caught.
func TestFIFOCatchesDisorder(t *testing.T) {
	t0 := time.Now()
	inOrder := []QueuedBuyer{{Seq: 1, Granted: t0}, {Seq: 2, Granted: t0}, {Seq: 3, Granted: t0.Add(time.Second)}, {Seq: 4, Rejected: true}, {Seq: 5}}
	if seen, pairs, bad := FIFOViolations(inOrder); seen != 4 || pairs != 3 || len(bad) != 0 {
		t.Fatalf("in order: %d seen, %d pairs, violations %v; want 4 seen (the unseen one left out), 3 pairs, none", seen, pairs, bad)
	}
	for _, disorder := range [][]QueuedBuyer{
		{{Seq: 1, Granted: t0.Add(time.Second)}, {Seq: 2, Granted: t0}}, // served out of turn
		{{Seq: 2, Granted: t0}, {Seq: 1, Rejected: true}},               // skipped (given in any order)
	} {
		if _, _, bad := FIFOViolations(disorder); len(bad) != 1 {
			t.Fatalf("disorder %v: violations %v; want 1", disorder, bad)
		}
	}
}

// TestCheckSaysWhatWasNotExercised: a run with no pair of queued buyers, audited by one
// instance, lists the FIFO check and the instances' agreement as not exercised rather than as
// checked; with a pair and two instances, both are checked, and a disordered queue fails.
func TestCheckSaysWhatWasNotExercised(t *testing.T) {
	a := Audit{OK: true}
	a.Database.Sold, a.Database.PaidUnits = 5, 5
	facts := SaleFacts{Sellable: 5, PerUserLimit: 1, Sold: 5}
	one := []InstanceAudit{{Target: "a", Audit: a}}
	two := append(one, InstanceAudit{Target: "b", Audit: a})

	v := Check(&Result{}, facts, one, 0)
	if !v.OK || containsPrefix(v.Checked, "FIFO") || containsPrefix(v.Checked, "instances agree") ||
		!containsPrefix(v.NotExercised, "FIFO") || !containsPrefix(v.NotExercised, "instances agree") {
		t.Fatalf("one instance, no queue: checked %q, not exercised %q; want both FIFO and agreement not exercised", v.Checked, v.NotExercised)
	}

	t0 := time.Now()
	res := &Result{Queue: []QueuedBuyer{{Seq: 1, Granted: t0}, {Seq: 2, Granted: t0.Add(time.Second)}}}
	v = Check(res, facts, two, 0)
	if !v.OK || !containsPrefix(v.Checked, "FIFO") || !containsPrefix(v.Checked, "instances agree") || len(v.NotExercised) != 0 {
		t.Fatalf("two instances, a pair: checked %q, not exercised %q; want both checked", v.Checked, v.NotExercised)
	}
	res.Queue[0].Granted = t0.Add(2 * time.Second)
	if v = Check(res, facts, two, 0); v.OK || !containsPrefix(v.Violations, "FIFO") {
		t.Fatalf("disordered queue passed: violations %q", v.Violations)
	}
}
