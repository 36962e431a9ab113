package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestExportRushThreeInstances is the event export's acceptance run (docs/EVENTS.md): `seckill
// bench` against three `serve --engine redis` instances (private Redis, a fresh MariaDB
// database) that each export to the same two sinks: a RabbitMQ exchange of the test's own,
// read through a queue bound to "reservation.#", and the shop's signed-callback endpoint (a
// test server that checks every signature). The crowd pays, cancels, abandons holds, pays late
// and is queued, granted and rejected. Once the sale has settled and the exporters report no
// lag on any instance, each sink's record is compared with the database (checkExport): exactly
// the database's reservations, each ending in its final status, every expiry seen, every
// refund owed, valid lifecycles, duplicates identical. The same detector must then find the
// damage done to a copy of the record: one expired event dropped, two events of one
// reservation swapped.
func TestExportRushThreeInstances(t *testing.T) {
	skipShort(t)
	amqpBase := testenv.AMQP(t)
	queue, amqpURL := shopQueue(t, amqpBase)
	hooks, hookURL := shopEndpoint(t, clusterExport)
	shops := []*shopSink{queue, hooks}
	c := startCluster(t, 3, "--export", amqpURL+","+hookURL)
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}

	var b [4]byte
	_, _ = crand.Read(b[:])
	sale := "exrush-" + hex.EncodeToString(b[:])
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth, "SECKILL_PAYMENT_SECRET": clusterPayment}
	var out bytes.Buffer
	err := bench(context.Background(), []string{"--target", strings.Join(urls, ","), "--sale", sale, "--units", "100",
		"--buyers", "3000", "--mix", "cancel=10,abandon=20,late=20,retry=10"},
		func(k string) string { return env[k] }, &out, &out)
	if err != nil || !strings.Contains(out.String(), "100 / 100 of 100") || !strings.Contains(out.String(), "invariants  ok") {
		t.Fatalf("bench against three exporting instances: %v\n%s", err, out.String())
	}
	t.Log(out.String())

	db, err := sql.Open("mysql", mysqlConfig(t, c.db).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	facts := waitForExport(t, c, db, sale, shops, 2*time.Minute)

	var dead int
	if err := db.QueryRow("SELECT COUNT(*) FROM export_dead_letters").Scan(&dead); err != nil {
		t.Errorf("count dead letters: %v", err)
	} else if dead != 0 {
		t.Errorf("%d events went to the dead letters in a rush whose sinks were up throughout", dead)
	}
	statuses := map[string]int{}
	for _, st := range facts.reservations {
		statuses[st]++
	}
	t.Logf("database: %d reservations %v, %d refunds owed", len(facts.reservations), statuses, len(facts.refunds))

	var damageOn []arrival
	for _, s := range shops {
		got := s.arrivals()
		types, distinct := map[string]int{}, map[string]bool{}
		for _, a := range got {
			if !distinct[a.ev.ID] {
				types[a.ev.Type]++
			}
			distinct[a.ev.ID] = true
		}
		t.Logf("%s sink: %d deliveries, %d distinct events %v", s.name, len(got), len(distinct), types)
		for _, p := range s.problems() {
			t.Errorf("%s sink: %s", s.name, p)
		}
		problems := checkExport(facts, got)
		for i, p := range problems {
			if i == 30 {
				t.Errorf("%s sink: … and %d more", s.name, len(problems)-i)
				break
			}
			t.Errorf("%s sink: %s", s.name, p)
		}
		for _, typ := range []string{events.TypeHeld, events.TypeQueued, events.TypeGranted, events.TypePaid,
			events.TypeCancelled, events.TypeExpired, events.TypeRejected, events.TypeRefundRequired} {
			if types[typ] == 0 {
				t.Errorf("%s sink: the rush made no %s event, so the run did not test it (%v)", s.name, typ, types)
			}
		}
		if s == queue {
			damageOn = got
		}
	}

	// Negative control: the same detector, on a damaged copy of what the shop received.
	damaged, dropped, swapped := damage(facts, damageOn)
	if dropped == "" || swapped == "" {
		t.Fatalf("nothing to damage: no expired reservation (%q) or none with two events (%q)", dropped, swapped)
	}
	problems := checkExport(facts, damaged)
	if !reported(problems, "expired", dropped) {
		t.Errorf("the detector missed the expired event dropped from %s: %v", dropped, problems)
	}
	if !reported(problems, "order", swapped) {
		t.Errorf("the detector missed the events of %s swapped: %v", swapped, problems)
	}

	// Every instance, exporting, still shuts down cleanly: SIGTERM, exit 0 well within the
	// 15 s the services get to stop (an exporter that followed its lead forever made it exit 1).
	for i, in := range c.insts {
		in.alive.Store(false)
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- in.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("instance %d did not shut down cleanly: %v\n%s", i, err, tail(in.log.String(), 20))
			}
		case <-time.After(20 * time.Second):
			_ = in.cmd.Process.Kill()
			t.Errorf("instance %d did not stop within 20 s of SIGTERM", i)
		}
	}
}

// waitForExport waits until the sale has settled in the database (no hold, no queue, no refund
// still open) and the export has caught up: every instance reports seckill_export_lag_events 0
// for every sink, and no sink's set of event ids has grown for 3 s. It returns the database's
// facts, read after that.
func waitForExport(t *testing.T, c *cluster, db *sql.DB, sale string, shops []*shopSink, limit time.Duration) dbFacts {
	t.Helper()
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 5 * time.Second}
	last, stableSince := "", time.Now()
	for {
		facts := readFacts(t, db, sale)
		settled := facts.openRefunds() == 0
		for _, st := range facts.reservations {
			settled = settled && st != "held" && st != "queued"
		}
		lagging := []string{}
		for i, in := range c.insts {
			lag, ok := exportMetrics(context.Background(), client, in.url, "seckill_export_lag_events")
			if !ok {
				lagging = append(lagging, fmt.Sprintf("instance %d shows no seckill_export_lag_events", i))
			}
			for sink, v := range lag {
				if v != 0 {
					lagging = append(lagging, fmt.Sprintf("instance %d: %s %v behind", i, sink, v))
				}
			}
		}
		var counts []string
		for _, s := range shops {
			counts = append(counts, fmt.Sprintf("%s %d", s.name, s.ids()))
		}
		now := strings.Join(counts, ", ")
		if now != last {
			last, stableSince = now, time.Now()
		}
		if settled && len(lagging) == 0 && time.Since(stableSince) >= 3*time.Second {
			t.Logf("export caught up: distinct events %s", now)
			return facts
		}
		if time.Now().After(deadline) {
			t.Fatalf("the export did not catch up within %s: settled %v, %d refunds open, lag: %v, distinct events: %s",
				limit, settled, facts.openRefunds(), lagging, now)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestExportDetectorCatchesDamage is the detector's negative control on a record made by
// hand, so it runs without any service: a clean record passes; a dropped expiry, two events
// swapped, a duplicate with other content, a missing reservation, a wrong final status and a
// missing refund event are each reported.
func TestExportDetectorCatchesDamage(t *testing.T) {
	at := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	n := 0
	ev := func(res, typ, status string) arrival {
		n++
		e := events.Event{ID: res + ":" + typ, Type: typ, SchemaVersion: 1, SaleID: "s", ReservationID: res, UserID: "u" + res,
			Quantity: 1, AmountCents: 100, Status: status, At: at.Add(time.Duration(n) * time.Millisecond)}
		raw, _ := json.Marshal(e)
		return arrival{ev: e, raw: string(raw), at: e.At}
	}
	refund := func(res, pid, typ string) arrival {
		a := ev(res, typ, "refund_required")
		a.ev.ID, a.ev.PaymentID = pid+":"+typ, pid
		raw, _ := json.Marshal(a.ev)
		a.raw = string(raw)
		return a
	}
	facts := dbFacts{sale: "s", reservations: map[string]string{
		"a": "paid", "b": "expired", "c": "rejected", "d": "paid", "e": "refund_required", "f": "cancelled",
	}, refunds: map[string]refundFact{"p-e": {reservation: "e", status: "refund_failed"}}}
	clean := []arrival{
		ev("a", "held", "held"), ev("b", "held", "held"), ev("c", "queued", "queued"), ev("d", "queued", "queued"),
		ev("e", "held", "held"), ev("f", "held", "held"),
		ev("a", "paid", "paid"), ev("b", "expired", "expired"), ev("d", "granted", "held"), ev("c", "rejected", "rejected"),
		ev("e", "expired", "expired"), ev("d", "paid", "paid"), ev("f", "cancelled", "cancelled"),
		refund("e", "p-e", "refund_required"), refund("e", "p-e", "refund_failed"),
	}
	clean = append(clean, clean[1], clean[7]) // redelivered, identical
	if p := checkExport(facts, clean); len(p) != 0 {
		t.Fatalf("a clean record was reported: %v", p)
	}

	// The refund events come from another log (docs/EVENTS.md, "Order"): arriving before the
	// expiry they follow is allowed; their `at` places them.
	early := append([]arrival(nil), clean[:10]...)
	early = append(early, clean[13], clean[10], clean[11], clean[12], clean[14])
	early = append(early, clean[15:]...)
	if p := checkExport(facts, early); len(p) != 0 {
		t.Fatalf("a refund event arriving before the expiry it follows was reported: %v", p)
	}

	damaged, dropped, swapped := damage(facts, clean)
	p := checkExport(facts, damaged)
	if dropped != "b" || !reported(p, "expired", "b") {
		t.Errorf("dropped the expiry of %q; reported: %v", dropped, p)
	}
	if swapped == "" || !reported(p, "order", swapped) {
		t.Errorf("swapped two events of %q; reported: %v", swapped, p)
	}

	cases := []struct {
		name, kind, res string
		edit            func([]arrival) []arrival
	}{
		{"a duplicate with other content", "duplicate", "a", func(g []arrival) []arrival {
			d := g[6]
			d.raw = strings.Replace(d.raw, `"quantity":1`, `"quantity":2`, 1)
			return append(g, d)
		}},
		{"a reservation never seen", "missing", "f", func(g []arrival) []arrival {
			return deleteRes(g, "f")
		}},
		{"a final status not reached", "final", "d", func(g []arrival) []arrival {
			return deleteID(g, "d:paid")
		}},
		{"a refund's end not seen", "refund", "e", func(g []arrival) []arrival {
			return deleteID(g, "p-e:refund_failed")
		}},
		{"an event of a reservation the database lacks", "extra", "z", func(g []arrival) []arrival {
			return append(g, ev("z", "held", "held"))
		}},
		{"a wrong status in an event", "field", "a", func(g []arrival) []arrival {
			g = append([]arrival(nil), g...)
			g[0].ev.Status = "paid"
			return g
		}},
	}
	for _, tc := range cases {
		if p := checkExport(facts, tc.edit(clean)); !reported(p, tc.kind, tc.res) {
			t.Errorf("%s: no %s problem about %s in %v", tc.name, tc.kind, tc.res, p)
		}
	}
}

func deleteRes(g []arrival, res string) []arrival {
	var out []arrival
	for _, a := range g {
		if a.ev.ReservationID != res {
			out = append(out, a)
		}
	}
	return out
}

func deleteID(g []arrival, id string) []arrival {
	var out []arrival
	for _, a := range g {
		if a.ev.ID != id {
			out = append(out, a)
		}
	}
	return out
}
