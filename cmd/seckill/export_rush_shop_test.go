package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/amqpsink"
	"github.com/seckill-go/seckill/payment"
)

// The shop's side of the event export, as a shop would run it: an HTTP endpoint that checks
// every callback's signature before taking its events, and a RabbitMQ queue bound to
// "reservation.#". Each records every event it receives, in arrival order, duplicates
// included; the detector (checkExport) then compares what one sink delivered with the
// database.

// arrival is one event as one sink delivered it.
type arrival struct {
	ev  events.Event
	raw string    // the event's JSON as received, compacted: a duplicate must carry the same
	at  time.Time // when it reached the shop
}

// shopSink records what one sink delivered.
type shopSink struct {
	name string
	mu   sync.Mutex
	got  []arrival
	bad  []string // malformed or unsigned deliveries
}

func (s *shopSink) add(raw []byte, at time.Time) {
	var c bytes.Buffer
	var e events.Event
	err := json.Compact(&c, raw)
	if err == nil {
		err = json.Unmarshal(raw, &e)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.bad = append(s.bad, fmt.Sprintf("an event that is not JSON (%v): %.200s", err, raw))
		return
	}
	s.got = append(s.got, arrival{ev: e, raw: c.String(), at: at})
}

func (s *shopSink) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) < 100 {
		s.bad = append(s.bad, fmt.Sprintf(format, args...))
	}
}

// arrivals is a copy of what arrived so far.
func (s *shopSink) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// ids counts the distinct event ids received so far.
func (s *shopSink) ids() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(s.got))
	for _, a := range s.got {
		seen[a.ev.ID] = true
	}
	return len(seen)
}

func (s *shopSink) problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bad)
}

// shopEndpoint is the shop's callback endpoint: it verifies Seckill-Signature with secret
// (payment.Verify, as docs/EVENTS.md tells shops to), answers 401 to a bad signature and 204
// once the events are recorded.
func shopEndpoint(t *testing.T, secret string) (*shopSink, string) {
	t.Helper()
	s := &shopSink{name: "http"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		if err := payment.Verify([]byte(secret), r.Header.Get("Seckill-Signature"), body, now); err != nil {
			s.problem("a callback with a bad signature (%v): %.200s", err, body)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var batch struct{ Events []json.RawMessage }
		if err := json.Unmarshal(body, &batch); err != nil || len(batch.Events) == 0 {
			s.problem("a callback whose body is not {\"events\":[…]} (%v): %.200s", err, body)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		for _, raw := range batch.Events {
			s.add(raw, now)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL + "/hooks/seckill"
}

// shopQueue declares a fresh topic exchange on the test RabbitMQ (as the sink will), binds a
// queue of the test's own to it with "reservation.#" and records what arrives; base is the
// broker's URL. It returns the sink URL that publishes to that exchange. The exchange is
// deleted when the test ends.
func shopQueue(t *testing.T, base string) (*shopSink, string) {
	t.Helper()
	var b [6]byte
	_, _ = crand.Read(b[:])
	exchange := "seckill.test.rush." + hex.EncodeToString(b[:])
	conn, err := amqp.Dial(base)
	if err != nil {
		t.Fatalf("dial the test RabbitMQ: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare(exchange+".shop", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "reservation.#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &shopSink{name: "amqp"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range deliveries {
			s.add(d.Body, time.Now())
			var e events.Event
			if json.Unmarshal(d.Body, &e) == nil && (d.MessageId != e.ID || d.RoutingKey != amqpsink.RoutingKey(e.Type)) {
				s.problem("message %s: message_id %q, routing key %q", e.ID, d.MessageId, d.RoutingKey)
			}
		}
	}()
	t.Cleanup(func() {
		_ = ch.ExchangeDelete(exchange, false, false)
		_ = conn.Close()
		<-done
	})
	u := strings.TrimSuffix(base, "/") + "/?exchange=" + exchange
	return s, u
}

// refundFact is one refund owed in the database.
type refundFact struct {
	reservation string
	status      string // refund_required, refund_pending, refunded, refund_failed
}

// dbFacts is what the database holds about one sale once it has settled.
type dbFacts struct {
	sale         string
	reservations map[string]string     // id -> final status
	refunds      map[string]refundFact // payment id -> the refund owed for it
}

// readFacts reads the sale's reservations and refunds from the cluster's MariaDB.
func readFacts(t *testing.T, db *sql.DB, sale string) dbFacts {
	t.Helper()
	f := dbFacts{sale: sale, reservations: map[string]string{}, refunds: map[string]refundFact{}}
	rows, err := db.Query("SELECT id, status FROM reservations WHERE sale_id = ?", sale)
	if err != nil {
		t.Fatalf("read reservations: %v", err)
	}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		f.reservations[id] = st
	}
	if err := errors2(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	rows, err = db.Query(`SELECT p.payment_id, p.reservation_id, r.status FROM payments p
		JOIN refunds r ON r.payment_id = p.payment_id WHERE p.sale_id = ?`, sale)
	if err != nil {
		t.Fatalf("read refunds: %v", err)
	}
	for rows.Next() {
		var pid, rid, st string
		if err := rows.Scan(&pid, &rid, &st); err != nil {
			t.Fatal(err)
		}
		f.refunds[pid] = refundFact{reservation: rid, status: st}
	}
	if err := errors2(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return f
}

func errors2(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// openRefunds counts the refunds not yet ended (refund_required, refund_pending).
func (f dbFacts) openRefunds() int {
	n := 0
	for _, r := range f.refunds {
		if r.status != "refunded" && r.status != "refund_failed" {
			n++
		}
	}
	return n
}

// exportProblem is one thing the detector found wrong.
type exportProblem struct {
	kind        string // duplicate, field, missing, extra, final, expired, order, refund
	reservation string
	detail      string
}

func (p exportProblem) String() string {
	return p.kind + " " + p.reservation + ": " + p.detail
}

// lifecycle are the steps a reservation's events may take (docs/MODEL.md), from the status
// its previous event left it in ("" before the first). The refund events are checked apart:
// they come from another log (the order store's outbox) and name a payment.
var lifecycle = map[string][]string{
	"":          {events.TypeHeld, events.TypeQueued},
	"held":      {events.TypePaid, events.TypeCancelled, events.TypeExpired},
	"queued":    {events.TypeGranted, events.TypeCancelled, events.TypeRejected},
	"granted":   {events.TypePaid, events.TypeCancelled, events.TypeExpired},
	"expired":   {events.TypeLatePaid},
	"cancelled": {events.TypeLatePaid},
}

// statusOfType is the reservation status each lifecycle event leaves.
var statusOfType = map[string]string{
	events.TypeHeld: "held", events.TypeQueued: "queued", events.TypeGranted: "held", events.TypePaid: "paid",
	events.TypeLatePaid: "paid", events.TypeCancelled: "cancelled", events.TypeExpired: "expired", events.TypeRejected: "rejected",
}

func isRefundType(typ string) bool {
	return typ == events.TypeRefundRequired || typ == events.TypeRefunded || typ == events.TypeRefundFailed
}

// checkExport compares what one sink delivered (every arrival, in order, duplicates
// included) with the database's facts about the sale:
//
//   - every copy of an event id carries the same content, and its fields are well formed
//     (schema version, a known type, the id derived from the reservation or payment, the
//     status the type leaves);
//   - the shop sees exactly the database's reservations: none missing, none unknown;
//   - per reservation, the lifecycle events in order of first arrival are a valid lifecycle
//     (held or queued first; held before paid, expired, cancelled; queued before granted,
//     rejected; late_paid only after expired or cancelled);
//   - each reservation's last event leaves the status the database has (lastEvent: refund
//     events, from another log, placed by their time; a reservation whose status became
//     refund_required ends with a refund event that says so);
//   - every expired reservation in the database has its expired event, and every status its
//     event (paid: paid or late_paid; cancelled, rejected);
//   - every refund owed in the database has its refund_required event, and a refund that ended
//     its refunded or refund_failed event after it.
func checkExport(f dbFacts, got []arrival) []exportProblem {
	var out []exportProblem
	add := func(kind, res, format string, args ...any) {
		out = append(out, exportProblem{kind: kind, reservation: res, detail: fmt.Sprintf(format, args...)})
	}
	first := map[string]arrival{} // by event id
	var order []events.Event      // events in order of first arrival
	for _, a := range got {
		if prev, ok := first[a.ev.ID]; ok {
			if prev.raw != a.raw {
				add("duplicate", a.ev.ReservationID, "event %s arrived twice with different content:\n  %s\n  %s", a.ev.ID, prev.raw, a.raw)
			}
			continue
		}
		first[a.ev.ID] = a
		order = append(order, a.ev)
	}
	perRes := map[string][]events.Event{}
	perPayment := map[string][]events.Event{}
	for _, e := range order {
		switch {
		case e.SchemaVersion != events.SchemaVersion:
			add("field", e.ReservationID, "event %s: schema_version %d", e.ID, e.SchemaVersion)
		case e.SaleID != f.sale:
			add("extra", e.ReservationID, "event %s of sale %q, not of the rush's sale %q", e.ID, e.SaleID, f.sale)
			continue
		case e.At.IsZero():
			add("field", e.ReservationID, "event %s has no time", e.ID)
		}
		if isRefundType(e.Type) {
			if e.ID != e.PaymentID+":"+e.Type || e.PaymentID == "" {
				add("field", e.ReservationID, "refund event %s: payment_id %q", e.ID, e.PaymentID)
			}
			perPayment[e.PaymentID] = append(perPayment[e.PaymentID], e)
		} else {
			want, known := statusOfType[e.Type]
			switch {
			case !known:
				add("field", e.ReservationID, "event %s of unknown type %q", e.ID, e.Type)
			case e.Status != want:
				add("field", e.ReservationID, "event %s says status %q; a %s leaves %q", e.ID, e.Status, e.Type, want)
			case e.ID != e.ReservationID+":"+e.Type:
				add("field", e.ReservationID, "event id %s is not <reservation id>:<type>", e.ID)
			}
		}
		if e.ReservationID != "" {
			perRes[e.ReservationID] = append(perRes[e.ReservationID], e)
		}
	}

	ids := make([]string, 0, len(f.reservations))
	for id := range f.reservations {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		status := f.reservations[id]
		evs := perRes[id]
		if len(evs) == 0 {
			add("missing", id, "in the database (%s), never seen by the shop", status)
			continue
		}
		// Lifecycle, over the reservation's own events.
		state, types := "", map[string]bool{}
		for _, e := range evs {
			if isRefundType(e.Type) {
				continue
			}
			types[e.Type] = true
			if !slices.Contains(lifecycle[state], e.Type) {
				add("order", id, "%s after %s (events in arrival order: %s)", e.Type, orStart(state), typesOf(evs))
			}
			state = e.Type
		}
		if last, ok := lastEvent(evs); ok && last.Status != status {
			add("final", id, "the last event (%s) leaves %q; the database has %q (events: %s)", last.Type, last.Status, status, typesOf(evs))
		}
		need := map[string][]string{
			"expired": {events.TypeExpired}, "cancelled": {events.TypeCancelled}, "rejected": {events.TypeRejected},
			"paid": {events.TypePaid, events.TypeLatePaid}, "refund_required": {events.TypeRefundRequired},
		}[status]
		has := false
		for _, typ := range need {
			has = has || types[typ] || (isRefundType(typ) && hasType(evs, typ))
		}
		if len(need) > 0 && !has {
			kind := "final"
			if status == "expired" {
				kind = "expired"
			}
			add(kind, id, "%s in the database, but no %s event reached the shop (events: %s)", status, strings.Join(need, " or "), typesOf(evs))
		}
	}
	for id, evs := range perRes {
		if _, ok := f.reservations[id]; !ok {
			add("extra", id, "the shop saw %s for a reservation the database does not have", typesOf(evs))
		}
	}

	pids := make([]string, 0, len(f.refunds))
	for pid := range f.refunds {
		pids = append(pids, pid)
	}
	sort.Strings(pids)
	for _, pid := range pids {
		r := f.refunds[pid]
		evs := perPayment[pid]
		var typs []string
		for _, e := range evs {
			typs = append(typs, e.Type)
			if e.ReservationID != r.reservation {
				add("refund", r.reservation, "refund event %s names reservation %q", e.ID, e.ReservationID)
			}
		}
		want := []string{events.TypeRefundRequired}
		switch r.status {
		case "refunded":
			want = append(want, events.TypeRefunded)
		case "refund_failed":
			want = append(want, events.TypeRefundFailed)
		}
		if !slices.Equal(typs, want) {
			add("refund", r.reservation, "payment %s is %s in the database; the shop saw %v, want %v in that order", pid, r.status, typs, want)
		}
	}
	for pid, evs := range perPayment {
		if _, ok := f.refunds[pid]; !ok {
			add("extra", evs[0].ReservationID, "refund events for payment %s, which owes no refund in the database", pid)
		}
	}
	return out
}

// lastEvent is a reservation's last event as docs/EVENTS.md tells a shop to find it: its
// lifecycle events keep their order of arrival (one log), while its refund events come from
// another log and are placed by their `at`: the last refund event at or after the last
// lifecycle event, if any, else that lifecycle event.
func lastEvent(evs []events.Event) (events.Event, bool) {
	var life, refund *events.Event
	for i := range evs {
		e := &evs[i]
		switch {
		case !isRefundType(e.Type):
			life = e
		case refund == nil || !e.At.Before(refund.At):
			refund = e
		}
	}
	switch {
	case refund != nil && (life == nil || !refund.At.Before(life.At)):
		return *refund, true
	case life != nil:
		return *life, true
	}
	return events.Event{}, false
}

func hasType(evs []events.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func orStart(state string) string {
	if state == "" {
		return "nothing"
	}
	return state
}

func typesOf(evs []events.Event) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = e.Type
	}
	return strings.Join(s, " → ")
}

// damage returns a copy of got with every copy of one expired event dropped (from a
// reservation that the database has expired) and, for another reservation that has at least
// two lifecycle events, its first two swapped in arrival order. It returns the two
// reservations' ids ("" if got had no such reservation).
func damage(f dbFacts, got []arrival) (out []arrival, dropped, swapped string) {
	out = slices.Clone(got)
	for _, a := range out {
		if a.ev.Type == events.TypeExpired && f.reservations[a.ev.ReservationID] == "expired" {
			dropped = a.ev.ReservationID
			break
		}
	}
	if dropped != "" {
		out = slices.DeleteFunc(out, func(a arrival) bool {
			return a.ev.ReservationID == dropped && a.ev.Type == events.TypeExpired
		})
	}
	pos := map[string][]int{} // reservation -> index of the first arrival of each lifecycle event
	seen := map[string]bool{}
	for i, a := range out {
		if isRefundType(a.ev.Type) || seen[a.ev.ID] {
			continue
		}
		seen[a.ev.ID] = true
		pos[a.ev.ReservationID] = append(pos[a.ev.ReservationID], i)
	}
	var cands []string
	for id, p := range pos {
		if id != dropped && len(p) >= 2 {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return out, dropped, ""
	}
	sort.Strings(cands)
	swapped = cands[0]
	p := pos[swapped]
	out[p[0]], out[p[1]] = out[p[1]], out[p[0]]
	return out, dropped, swapped
}

// reported reports whether problems include one of kind about reservation id.
func reported(problems []exportProblem, kind, id string) bool {
	for _, p := range problems {
		if p.kind == kind && p.reservation == id {
			return true
		}
	}
	return false
}

// exportMetrics reads one instance's /metrics and returns the values of name, by sink; ok is
// false if the instance could not be read or shows no such series.
func exportMetrics(ctx context.Context, client *http.Client, base, name string) (map[string]float64, bool) {
	m := exportMetricsAll(ctx, client, base)[name]
	return m, len(m) > 0
}

// exportMetricsAll reads one instance's /metrics and returns the values of every series with a
// sink label, by metric name and sink; nil if the instance could not be read.
func exportMetricsAll(ctx context.Context, client *http.Client, base string) map[string]map[string]float64 {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return nil
	}
	out := map[string]map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, rest, ok := strings.Cut(line, `{sink="`)
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		sink, _, _ := strings.Cut(rest, `"`)
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if sp < 0 || err != nil {
			continue
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][sink] = v
	}
	return out
}
