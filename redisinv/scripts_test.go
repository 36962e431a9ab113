package redisinv

// Tests of the Lua scripts themselves (docs/MODEL.md and the ways peers broke theirs): every script validates all of its
// keys and arguments before its first write, a sale that was never loaded is answered as such
// and never half-written, the boundaries (stock 0 and 1, quantity above what is free) hold,
// Lua's "0 is true" trap is avoided, and no reader ever sees negative stock.
//
// "No key changed" is asserted exactly: a snapshot takes DUMP and PTTL of each of a sale's
// seven keys (the stream included: XADD changes it), plus a canonical text form of each key
// for readable failure messages.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// ---------------------------------------------------------------------------------------------
// Snapshots

// keyState is one key as a snapshot saw it.
type keyState struct {
	exists bool
	dump   string // DUMP: the exact serialized value (encoding included)
	pttl   int64
}

// snapshot is the state of a list of keys. It is taken in one pipelined round trip; the
// readable form of a key is built only for a key that changed (describe).
type snapshot struct {
	rdb    rueidis.Client
	keys   []string
	states []keyState
}

// takeSnapshot reads DUMP and PTTL of every key.
func takeSnapshot(t testing.TB, rdb rueidis.Client, keys []string) snapshot {
	t.Helper()
	s := snapshot{rdb: rdb, keys: slices.Clone(keys)}
	cmds := make(rueidis.Commands, 0, 2*len(keys))
	for _, k := range keys {
		cmds = append(cmds, rdb.B().Dump().Key(k).Build(), rdb.B().Pttl().Key(k).Build())
	}
	res := rdb.DoMulti(context.Background(), cmds...)
	for i, k := range keys {
		var st keyState
		d, err := res[2*i].ToString()
		switch {
		case rueidis.IsRedisNil(err):
		case err != nil:
			t.Fatalf("DUMP %s: %v", k, err)
		default:
			st.exists, st.dump = true, d
		}
		if st.pttl, err = res[2*i+1].AsInt64(); err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		s.states = append(s.states, st)
	}
	return s
}

// describe is the canonical form of state i of the snapshot: its DUMP is restored into a
// scratch key (in the same hash slot) and read back.
func (s snapshot) describe(t testing.TB, i int) string {
	t.Helper()
	st := s.states[i]
	if !st.exists {
		return "none"
	}
	ctx := context.Background()
	scratch := s.keys[i] + ":scratch"
	if err := s.rdb.Do(ctx, s.rdb.B().Arbitrary("RESTORE").Keys(scratch).Args("0", st.dump, "REPLACE").Build()).Error(); err != nil {
		return fmt.Sprintf("(cannot restore the DUMP: %v)", err)
	}
	defer s.rdb.Do(ctx, s.rdb.B().Del().Key(scratch).Build())
	return canonical(t, s.rdb, scratch)
}

// diff describes how o differs from s; "" when every key is byte for byte the same.
func (s snapshot) diff(t testing.TB, o snapshot) string {
	t.Helper()
	var b strings.Builder
	for i, k := range s.keys {
		a, c := s.states[i], o.states[i]
		if a == c {
			continue
		}
		fmt.Fprintf(&b, "  %s changed", k)
		if a.pttl != c.pttl {
			fmt.Fprintf(&b, " (PTTL %d -> %d)", a.pttl, c.pttl)
		}
		at, ct := s.describe(t, i), o.describe(t, i)
		if at == ct {
			b.WriteString(" (same content, different DUMP)")
		}
		fmt.Fprintf(&b, ":\n    before: %s\n    after:  %s\n", at, ct)
	}
	return b.String()
}

// restore puts every key back as the snapshot saw it, so that one failing case does not
// spoil the cases after it.
func (s snapshot) restore(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for i, k := range s.keys {
		st := s.states[i]
		var err error
		if !st.exists {
			err = s.rdb.Do(ctx, s.rdb.B().Del().Key(k).Build()).Error()
		} else {
			ttl := "0"
			if st.pttl > 0 {
				ttl = strconv.FormatInt(st.pttl, 10)
			}
			err = s.rdb.Do(ctx, s.rdb.B().Arbitrary("RESTORE").Keys(k).Args(ttl, st.dump, "REPLACE").Build()).Error()
		}
		if err != nil {
			t.Fatalf("restoring %s: %v", k, err)
		}
	}
}

// canonical is a key's type and content in a stable, readable form.
func canonical(t testing.TB, rdb rueidis.Client, k string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := rdb.Do(ctx, rdb.B().Type().Key(k).Build()).ToString()
	if err != nil {
		t.Fatalf("TYPE %s: %v", k, err)
	}
	var parts []string
	switch typ {
	case "none":
		return "none"
	case "string":
		v, err := rdb.Do(ctx, rdb.B().Get().Key(k).Build()).ToString()
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		parts = append(parts, strconv.Quote(v))
	case "hash":
		m, err := rdb.Do(ctx, rdb.B().Hgetall().Key(k).Build()).AsStrMap()
		if err != nil {
			t.Fatalf("HGETALL %s: %v", k, err)
		}
		for f, v := range m {
			parts = append(parts, fmt.Sprintf("%s=%q", f, v))
		}
		sort.Strings(parts)
	case "zset":
		zs, err := rdb.Do(ctx, rdb.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatalf("ZRANGE %s: %v", k, err)
		}
		for _, z := range zs {
			parts = append(parts, z.Member+"@"+strconv.FormatFloat(z.Score, 'f', -1, 64))
		}
	case "stream":
		es, err := rdb.Do(ctx, rdb.B().Xrange().Key(k).Start("-").End("+").Build()).AsXRangeSlices()
		if err != nil {
			t.Fatalf("XRANGE %s: %v", k, err)
		}
		for _, e := range es { // fields in order: an entry holds a call's events, one e each
			parts = append(parts, e.ID+fmt.Sprintf("%q", e.FieldValues))
		}
		for _, cmd := range []rueidis.Completed{
			rdb.B().XinfoStream().Key(k).Build(), rdb.B().XinfoGroups().Key(k).Build(),
		} {
			v, err := rdb.Do(ctx, cmd).ToAny()
			if err != nil {
				t.Fatalf("XINFO %s: %v", k, err)
			}
			parts = append(parts, render(v))
		}
	default:
		parts = append(parts, "?")
	}
	return typ + "[" + strings.Join(parts, " ") + "]"
}

// render prints what ToAny returns with sorted map keys and quoted strings.
func render(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]string: // rendered as the same map of strings (a string renders quoted)
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = x
		}
		return render(m)
	case map[string]any:
		ks := make([]string, 0, len(v))
		for k := range v {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var b strings.Builder
		b.WriteString("{")
		for i, k := range ks {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(k + ":" + render(v[k]))
		}
		return b.String() + "}"
	case []any:
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = render(x)
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	return fmt.Sprint(v)
}

// keysExisting counts how many of keys exist.
func keysExisting(t testing.TB, rdb rueidis.Client, keys []string) int64 {
	t.Helper()
	n, err := rdb.Do(context.Background(), rdb.B().Exists().Key(keys...).Build()).AsInt64()
	if err != nil {
		t.Fatalf("EXISTS: %v", err)
	}
	return n
}

// ---------------------------------------------------------------------------------------------
// Calling scripts raw

// execScript runs s with exactly keys and argv and returns its reply as strings.
func execScript(rdb rueidis.Client, s *script, keys, argv []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res := s.lua.Exec(ctx, rdb, keys, argv)
	if err := res.Error(); err != nil {
		return nil, err
	}
	msgs, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	if len(msgs) >= 2 {
		msgs = msgs[:len(msgs)-1] // the sale's version (with_version in common.lua)
	}
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = msgText(&msgs[i])
	}
	return out, nil
}

func msgText(m *rueidis.RedisMessage) string {
	if m.IsInt64() {
		n, _ := m.AsInt64()
		return strconv.FormatInt(n, 10)
	}
	if s, err := m.ToString(); err == nil {
		return s
	}
	if m.IsNil() {
		return "<nil>"
	}
	v, _ := m.ToAny()
	return render(v)
}

// isValidationError reports whether err is a script's refusal of its keys or arguments: a
// Redis error reply "ERR seckill: ..." (rueidis drops the "ERR " of an error reply).
func isValidationError(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "ERR seckill: ") || strings.HasPrefix(msg, "seckill: ")
}

// ---------------------------------------------------------------------------------------------
// The fixture

// t0 is the fixed time of every test clock here.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a loaded sale in every state a script can meet: a live hold, a held one that was
// bought with an idempotency key, a paid one, a queued one, and a hold that expired but has
// not been reclaimed yet (any script that reclaims before it validates changes the state
// visibly), with a consumer group on the stream that has delivered and acknowledged entries
// (so a trim would change the stream).
type fixture struct {
	e     *Engine
	rdb   rueidis.Client
	clock *seckilltest.ManualClock
	def   seckill.Sale
	keys  []string

	expired, idem, paid, held, queued string // reservation suffixes (32 hex)
	idemUser, idemKey                 string
}

func fixtureSale(id string) seckill.Sale {
	return seckill.Sale{
		ID: id, Name: "fixture " + id, PriceCents: 250, Stock: 5, Holdback: 1,
		StartsAt: t0.Add(-time.Minute), EndsAt: t0.Add(time.Hour), PerUserLimit: 2,
		HoldSeconds: 60, QueueLimit: 10, CreatedAt: t0.Add(-time.Hour),
	}
}

func suffixOf(t testing.TB, id string) string {
	t.Helper()
	_, s, ok := splitID(id)
	if !ok {
		t.Fatalf("reservation id %q is not <sale>-<32 hex>", id)
	}
	return s
}

func mustBuy(t testing.TB, e *Engine, sale, user string, q int, key string, want seckill.ReservationStatus) seckill.Reservation {
	t.Helper()
	r, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: sale, UserID: user, Quantity: q, IdempotencyKey: key})
	if err != nil {
		t.Fatalf("Buy(%s, %s, %d): %v", sale, user, q, err)
	}
	if r.Reservation.Status != want {
		t.Fatalf("Buy(%s, %s, %d) = %s, want %s", sale, user, q, r.Reservation.Status, want)
	}
	return r.Reservation
}

func mustPay(t testing.TB, e *Engine, id, pid string, amount int64, want seckill.PaymentResult) {
	t.Helper()
	got, _, err := e.ConfirmPayment(context.Background(), seckill.PaymentConfirmation{PaymentID: pid, ReservationID: id, AmountCents: amount})
	if err != nil || got != want {
		t.Fatalf("ConfirmPayment(%s) = %q, %v; want %q", id, got, err, want)
	}
}

func hgetall(t testing.TB, rdb rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := rdb.Do(context.Background(), rdb.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	return m
}

func hexists(t testing.TB, rdb rueidis.Client, key, field string) bool {
	t.Helper()
	n, err := rdb.Do(context.Background(), rdb.B().Hexists().Key(key).Field(field).Build()).AsInt64()
	if err != nil {
		t.Fatalf("HEXISTS %s %s: %v", key, field, err)
	}
	return n == 1
}

// newFixture builds the fixture sale saleID through the Engine's public methods, on an engine
// of its own (own prefix, own manual clock).
func newFixture(t *testing.T, c *Clients, saleID string) *fixture {
	t.Helper()
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock)
	f := &fixture{e: e, rdb: c.Inventory, clock: clock, def: fixtureSale(saleID), keys: e.keys(saleID)}
	ctx := context.Background()
	if err := e.LoadSale(ctx, f.def, 0); err != nil {
		t.Fatalf("LoadSale: %v", err)
	}
	// t0: alice's hold, which expires at t0+60s.
	f.expired = suffixOf(t, mustBuy(t, e, saleID, "alice", 1, "", seckill.StatusHeld).ID)
	clock.Advance(30 * time.Second)
	// t0+30s: bob (idempotency key), carol (paid), dave (held): every sellable unit is taken;
	// erin queues.
	f.idemUser, f.idemKey = "bob", "click-1"
	f.idem = suffixOf(t, mustBuy(t, e, saleID, f.idemUser, 1, f.idemKey, seckill.StatusHeld).ID)
	paid := mustBuy(t, e, saleID, "carol", 1, "", seckill.StatusHeld)
	mustPay(t, e, paid.ID, "pay-carol", paid.AmountCents, seckill.PaymentApplied)
	f.paid = suffixOf(t, paid.ID)
	f.held = suffixOf(t, mustBuy(t, e, saleID, "dave", 1, "", seckill.StatusHeld).ID)
	f.queued = suffixOf(t, mustBuy(t, e, saleID, "erin", 1, "", seckill.StatusQueued).ID)
	// t0+61s: alice's hold is overdue, and no script has run since.
	clock.Advance(31 * time.Second)

	// The order-store group has read 3 of the stream's entries and acknowledged 2.
	stream := f.keys[6]
	entries, err := f.rdb.Do(ctx, f.rdb.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(entries) != 6 {
		t.Fatalf("stream: %d entries, %v; want 6", len(entries), err)
	}
	for _, cmd := range []rueidis.Completed{
		f.rdb.B().XgroupCreate().Key(stream).Group(Group).Id("0").Build(),
		f.rdb.B().Xreadgroup().Group(Group, "fixture").Count(3).Streams().Key(stream).Id(">").Build(),
		f.rdb.B().Xack().Key(stream).Group(Group).Id(entries[0].ID, entries[1].ID).Build(),
	} {
		if err := f.rdb.Do(ctx, cmd).Error(); err != nil {
			t.Fatalf("stream group setup: %v", err)
		}
	}

	// The state is what the fixture claims.
	s := saleFields(t, f.rdb, f.keys[0])
	for field, want := range map[string]string{"avail": "0", "held": "3", "sold": "1", "qunits": "1", "seq": "5", "loading": "0", "closed": "0"} {
		if s[field] != want {
			t.Fatalf("fixture sale hash %s = %q, want %q (%v)", field, s[field], want, s)
		}
	}
	overdue, err := f.rdb.Do(ctx, f.rdb.B().Zrangebyscore().Key(f.keys[2]).Min("-inf").Max(f.clockMS()).Build()).AsStrSlice()
	if err != nil || len(overdue) != 1 || overdue[0] != f.expired {
		t.Fatalf("overdue holds = %v, %v; want [%s]", overdue, err, f.expired)
	}
	return f
}

func (f *fixture) clockMS() string { return strconv.FormatInt(f.clock.Now().UnixMilli(), 10) }

// other returns the seven keys of another sale under the same prefix.
func (f *fixture) other(saleID string) []string { return f.e.keys(saleID) }

// ---------------------------------------------------------------------------------------------
// The invalid-argument tables

// badArg is one invalid value for one ARGV position.
type badArg struct{ label, v string }

func bad(vs ...string) []badArg {
	out := make([]badArg, len(vs))
	for i, v := range vs {
		label := strconv.Quote(v)
		if len(v) > 24 {
			label = fmt.Sprintf("%d bytes", len(v))
		}
		out[i] = badArg{label, v}
	}
	return out
}

// notDigits are values that are not plain decimal digits, or are too long to be exact; Lua's
// tonumber would take several of them.
var notDigits = []string{
	"abc", "1e3", "1E3", "inf", "-inf", "nan", " 1", "1 ", "-1", "+1", "0x10", "1.5", "1\n", "٣",
	"10000000000000000", // 17 digits: beyond 2^53
	"9007199254740994",  // 2^53+2: exact in a double, out of range
}

// digits are the invalid values of a digits position: empty, notDigits and extra (the values
// out of this position's range).
func digits(extra ...string) []badArg {
	return bad(append(append([]string{""}, notDigits...), extra...)...)
}

var (
	badClock  = bad(notDigits...) // '' is valid: Redis TIME
	badUser   = bad("", "a:b", "a|b", strings.Repeat("u", 65), "a b", "é", "a\n", "a*b")
	badSigned = bad("", "-", "--1", "+1", "1-", "- 1", "-1e3", "1e3", "-inf", "inf", "nan", "abc", "0x10",
		"-0x10", "1.5", " 1", "9007199254740994", "-9007199254740994", "10000000000000000", "-10000000000000000")
	badStatus = bad("", "HELD", "bogus", "held ", "pending", "Paid")
	badMode   = bad("", "New", "NEW", "rebuild ", "renew", "load")
	// badTokenSet are invalid non-empty rebuild tokens.
	badTokenSet = bad("abc", "7-ABC", "-ab", "7-", "7-abg", "x7-ab", "7_ab", "7-"+strings.Repeat("a", 63))
)

func badHex(n int) []badArg {
	valid := strings.Repeat("0123456789abcdef", 2)[:n]
	return bad("", strings.ToUpper(valid), valid[:n-1], valid+"0", "g"+valid[1:], " "+valid[1:], valid[:n-1]+"\n")
}

func badStr(max int, nonEmpty bool) []badArg {
	b := bad(strings.Repeat("x", max+1))
	if nonEmpty {
		b = append(bad(""), b...)
	}
	return b
}

// argSpec names one ARGV position and its invalid values.
type argSpec struct {
	name string
	bad  []badArg
}

// wholeCase is an explicit ARGV, built from the fixture.
type wholeCase struct {
	name string
	argv func(f *fixture) []string
}

// scriptSpec is one script, a valid ARGV for the fixture and the invalid values of each of
// its positions.
type scriptSpec struct {
	name  string
	s     *script
	base  func(f *fixture) []string
	args  []argSpec
	extra []wholeCase
}

// loadBase is a valid load.lua ARGV for the fixture's sale (answered 'conflict': it exists).
func loadBase(f *fixture, mode, token string) []string {
	return append([]string{f.clockMS()}, loadArgs(f.def, 1, mode, token)...)
}

func scriptSpecs() []scriptSpec {
	ds := defaultScripts
	clock := argSpec{"clock", badClock}
	res := argSpec{"reservation", badHex(32)}
	user := argSpec{"user", badUser}
	return []scriptSpec{
		{name: "buy", s: ds.buy,
			base: func(f *fixture) []string { return []string{f.clockMS(), "frank", "1", "click-9", "0123456789abcdef"} },
			args: []argSpec{clock, user, {"quantity", digits()}, {"idempotency key", badStr(128, false)}, {"random", badHex(16)}}},
		{name: "reservation", s: ds.reservation,
			base: func(f *fixture) []string { return []string{f.clockMS(), f.held} },
			args: []argSpec{clock, res}},
		{name: "sale", s: ds.sale,
			base: func(f *fixture) []string { return []string{f.clockMS()} },
			args: []argSpec{clock}},
		{name: "cancel", s: ds.cancel,
			base: func(f *fixture) []string { return []string{f.clockMS(), f.held, "dave"} },
			args: []argSpec{clock, res, user}},
		{name: "pay", s: ds.pay,
			base: func(f *fixture) []string { return []string{f.clockMS(), f.held, "pay-dave", "250"} },
			args: []argSpec{clock, res, {"payment id", badStr(255, true)}, {"amount", badSigned}}},
		{name: "add_stock", s: ds.addStock,
			base: func(f *fixture) []string { return []string{f.clockMS(), "2"} },
			args: []argSpec{clock, {"add", digits("1000000001")}}},
		{name: "close", s: ds.close,
			base: func(f *fixture) []string { return []string{f.clockMS()} },
			args: []argSpec{clock}},
		{name: "reclaim", s: ds.reclaim,
			base: func(f *fixture) []string { return []string{f.clockMS(), "100"} },
			args: []argSpec{clock, {"limit", digits("0", "100001")}}},
		{name: "load", s: ds.load,
			base: func(f *fixture) []string { return loadBase(f, "new", "") },
			args: []argSpec{clock, {"mode", badMode}, {"token (mode new)", bad("7-ab", "abc")},
				{"name", badStr(200, false)}, {"price", digits("1000000000001")}, {"stock", digits("1000000001")},
				{"holdback", digits("6")}, {"starts_at", digits()}, {"ends_at", digits()},
				{"per_user_limit", digits("0", "1000000001")}, {"hold_seconds", digits("0", "604801")},
				{"queue_limit", digits("10000000001")}, {"created_at", digits()}, {"sold", digits("5")},
				{"currency", bad("EUR", "eu", "euro", "e1r", "usd ")}, {"listed", bad("", "true", "2", "1 ")}},
			extra: append(
				tokenCases("rebuild token", func(f *fixture, tok string) []string { return loadBase(f, "rebuild", tok) },
					append(bad(""), badTokenSet...)),
				wholeCase{"holdback > stock 0", func(f *fixture) []string {
					a := loadBase(f, "new", "")
					a[5], a[6], a[13] = "0", "1", "0"
					return a
				}},
				wholeCase{"sold > sellable (stock 5, holdback 5, sold 1)", func(f *fixture) []string {
					a := loadBase(f, "new", "")
					a[6] = "5"
					return a
				}},
			)},
		{name: "restore", s: ds.restore,
			base: func(f *fixture) []string {
				// dave's reservation: valid, answered 'conflict' (the id is known).
				return []string{f.clockMS(), "", f.held, "dave", "1", "held", i64toa(t0.Add(90 * time.Second).UnixMilli()), "250",
					i64toa(t0.Add(30 * time.Second).UnixMilli()), "4", "", ""}
			},
			args: []argSpec{clock, {"token", badTokenSet}, res, user, {"quantity", digits("0", "1000000001")},
				{"status", badStatus}, {"expires_at", digits()}, {"amount", digits()}, {"created_at", digits()},
				{"seq", digits("0")}, {"payment id", badStr(255, false)}, {"idempotency key", badStr(128, false)}}},
		{name: "ready", s: ds.ready,
			base: func(f *fixture) []string { return []string{f.clockMS(), "7-abcdef"} },
			args: []argSpec{clock, {"token", append(bad(""), badTokenSet...)}}},
		{name: "trim", s: ds.trim,
			base: func(f *fixture) []string { return []string{f.clockMS(), Group} },
			args: []argSpec{clock, {"group", badStr(64, true)}}},
		{name: "cool", s: ds.cool,
			base: func(f *fixture) []string { return []string{f.clockMS(), "60000"} },
			args: []argSpec{clock, {"margin", digits("86400001")}}},
		{name: "segment", s: ds.segment,
			base: func(f *fixture) []string { return []string{f.clockMS(), "counts"} },
			args: []argSpec{clock, {"op", bad("", "COUNTS", "bogus", "counts ")}}},
		{name: "sale_admin", s: ds.saleAdmin,
			base: func(f *fixture) []string { return []string{f.clockMS(), "list"} },
			args: []argSpec{clock, {"op", bad("", "LIST", "delete", "list ", "close")}}},
	}
}

func tokenCases(prefix string, build func(f *fixture, tok string) []string, toks []badArg) []wholeCase {
	var out []wholeCase
	for _, b := range toks {
		out = append(out, wholeCase{prefix + "=" + b.label, func(f *fixture) []string { return build(f, b.v) }})
	}
	return out
}

// keyCase is a wrong KEYS list, built from the fixture.
type keyCase struct {
	name string
	keys func(f *fixture) []string
}

func keyCases() []keyCase {
	with := func(ks []string, i int, v string) []string { ks = slices.Clone(ks); ks[i] = v; return ks }
	untagged := func(f *fixture, tag string) []string {
		ks := make([]string, len(keyParts))
		for i, p := range keyParts {
			ks[i] = f.e.prefix + tag + ":" + p
		}
		return ks
	}
	return []keyCase{
		{"0 keys", func(f *fixture) []string { return nil }},
		{"1 key", func(f *fixture) []string { return f.keys[:1] }},
		{"6 keys", func(f *fixture) []string { return slices.Clone(f.keys[:6]) }},
		{"8 keys", func(f *fixture) []string { return append(slices.Clone(f.keys), f.keys[0][:len(f.keys[0])-4]+"extra") }},
		{"KEYS[1] of another sale", func(f *fixture) []string { return with(f.keys, 0, f.other("other")[0]) }},
		{"KEYS[2..7] of another sale", func(f *fixture) []string { return append([]string{f.keys[0]}, f.other("other")[1:]...) }},
		{"KEYS[7] of another sale", func(f *fixture) []string { return with(f.keys, 6, f.other("other")[6]) }},
		{"KEYS[2..7] under another prefix", func(f *fixture) []string {
			o := New(f.rdb, WithPrefix(f.e.prefix+"x:")).keys(f.def.ID)
			return append([]string{f.keys[0]}, o[1:]...)
		}},
		{"KEYS[2] and KEYS[3] swapped", func(f *fixture) []string {
			ks := slices.Clone(f.keys)
			ks[1], ks[2] = ks[2], ks[1]
			return ks
		}},
		{"KEYS[6] and KEYS[7] swapped", func(f *fixture) []string {
			ks := slices.Clone(f.keys)
			ks[5], ks[6] = ks[6], ks[5]
			return ks
		}},
		{"keys reversed", func(f *fixture) []string { ks := slices.Clone(f.keys); slices.Reverse(ks); return ks }},
		{"seven times KEYS[1]", func(f *fixture) []string { return slices.Repeat(f.keys[:1], 7) }},
		{"no {sale:<id>} tag", func(f *fixture) []string { return untagged(f, "sale:"+f.def.ID) }},
		{"tag {<id>} without sale:", func(f *fixture) []string { return untagged(f, "{"+f.def.ID+"}") }},
		{"empty tag {sale:}", func(f *fixture) []string { return untagged(f, "{sale:}") }},
		{"tag with a space", func(f *fixture) []string { return untagged(f, "{sale:a b}") }},
		{"KEYS[1] ending :sales", func(f *fixture) []string { return with(f.keys, 0, f.keys[0]+"s") }},
		{"KEYS[1] an empty name", func(f *fixture) []string { return with(f.keys, 0, "") }},
	}
}

// validationCase is one (keys, argv) that a script must refuse.
type validationCase struct {
	name string
	call func(f *fixture) (keys, argv []string)
}

// validationCases lists every refusal case of sp: the wrong keys, each ARGV position missing
// and replaced by each of its invalid values, and sp's explicit cases.
func validationCases(sp scriptSpec) []validationCase {
	var out []validationCase
	for _, kc := range keyCases() {
		out = append(out, validationCase{"keys/" + kc.name, func(f *fixture) ([]string, []string) { return kc.keys(f), sp.base(f) }})
	}
	for i, a := range sp.args {
		pos := fmt.Sprintf("ARGV[%d] %s", i+1, a.name)
		out = append(out, validationCase{pos + "/missing", func(f *fixture) ([]string, []string) { return f.keys, sp.base(f)[:i] }})
		for _, b := range a.bad {
			out = append(out, validationCase{pos + "/" + b.label, func(f *fixture) ([]string, []string) {
				argv := sp.base(f)
				argv[i] = b.v
				return f.keys, argv
			}})
		}
	}
	for _, w := range sp.extra {
		out = append(out, validationCase{"argv/" + w.name, func(f *fixture) ([]string, []string) { return f.keys, w.argv(f) }})
	}
	return out
}

// scriptNames is the name of every script of a set, by reflection, so that a script added to
// scriptSet without a spec here fails TestScriptsValidateBeforeFirstWrite.
func scriptNames(set *scriptSet) []string {
	v := reflect.ValueOf(set).Elem()
	var names []string
	for i := 0; i < v.NumField(); i++ {
		names = append(names, v.Field(i).Elem().FieldByName("name").String())
	}
	sort.Strings(names)
	return names
}

// refuses runs one case that must be refused: a Redis error "ERR seckill: ..." and every key
// of the sale byte for byte unchanged. A changed state is put back for the next case.
func refuses(t *testing.T, f *fixture, s *script, keys, argv []string) {
	t.Helper()
	before := takeSnapshot(t, f.rdb, f.keys)
	got, err := execScript(f.rdb, s, keys, argv)
	if !isValidationError(err) {
		t.Errorf("%s.lua KEYS=%q ARGV=%q: want a Redis error \"ERR seckill: ...\", got reply %q, error %v", s.name, shortKeys(f, keys), argv, got, err)
	}
	if d := before.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
		t.Errorf("%s.lua KEYS=%q ARGV=%q wrote before it refused (reply %q, error %v):\n%s", s.name, shortKeys(f, keys), argv, got, err, d)
		before.restore(t)
	}
}

// shortKeys drops the engine's random prefix from keys, for messages.
func shortKeys(f *fixture, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.Replace(k, f.e.prefix, "<prefix>", 1)
	}
	return out
}

// TestSegmentOpOfOneSegmentSale: an operation of a segmented sale ('take' and the others but
// 'counts', 'halt' and 'freeze') sent to a sale of one segment (a rebuild made it one while the
// caller still took it for segmented) answers 'single' and changes nothing; the engine then
// goes on at segment 0 (segOp).
func TestSegmentOpOfOneSegmentSale(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "single")
	for _, argv := range [][]string{{f.clockMS(), "take", "1", "1"}, {f.clockMS(), "apply", "1", "1", "1"},
		{f.clockMS(), "ack", "1", "1"}, {f.clockMS(), "outbox"}} {
		before := takeSnapshot(t, f.rdb, f.keys)
		got, err := execScript(f.rdb, f.e.scripts.segment, f.keys, argv)
		if err != nil || len(got) == 0 || got[0] != "single" {
			t.Errorf("segment.lua %q on a one-segment sale: reply %q, error %v; want [single]", argv[1], got, err)
		}
		if d := before.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
			t.Errorf("segment.lua %q on a one-segment sale changed the sale:\n%s", argv[1], d)
		}
	}
}

// TestScriptsValidateBeforeFirstWrite calls every script with wrong keys and with each
// argument missing or invalid in turn, against a sale in every state (an overdue hold
// included, so that reclaiming before validating would show), and requires a Redis error
// and no change to any of the sale's eight keys.
func TestScriptsValidateBeforeFirstWrite(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	specs := scriptSpecs()
	var covered []string
	for _, sp := range specs {
		covered = append(covered, sp.s.name)
	}
	sort.Strings(covered)
	if all := scriptNames(defaultScripts); !slices.Equal(covered, all) {
		t.Fatalf("scripts covered %v, scripts of the engine %v", covered, all)
	}
	f := newFixture(t, c, "validate")
	for _, sp := range specs {
		t.Run(sp.name, func(t *testing.T) {
			if n := len(sp.base(f)); n != len(sp.args) {
				t.Fatalf("spec has %d ARGV positions, base ARGV has %d", len(sp.args), n)
			}
			for _, vc := range validationCases(sp) {
				t.Run(vc.name, func(t *testing.T) {
					keys, argv := vc.call(f)
					refuses(t, f, sp.s, keys, argv)
				})
			}
			// The cases above differ from a valid call only where they say: the base call
			// is accepted (it may change the state; it is put back).
			t.Run("valid call is accepted", func(t *testing.T) {
				before := takeSnapshot(t, f.rdb, f.keys)
				defer before.restore(t)
				got, err := execScript(f.rdb, sp.s, f.keys, sp.base(f))
				if err != nil || len(got) == 0 || got[0] != "ok" && got[0] != "conflict" && got[0] != "fenced" {
					t.Fatalf("%s.lua with its valid ARGV %q: reply %q, error %v", sp.name, sp.base(f), got, err)
				}
			})
		})
	}
}

// TestScriptsCatchAWriteBeforeValidation is the negative control of the tests above: a buy.lua
// broken on purpose to write before it validates its arguments (the peers' failure: a
// missing argument took stock) must be caught by the snapshot, although it still answers the
// validation error.
func TestScriptsCatchAWriteBeforeValidation(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "control")
	const from = "  begin()\n  local first, per = 2, 4"
	broken := newScriptSet(func(name string) string {
		src := scriptSource(name)
		if name == "buy.lua" {
			if !strings.Contains(src, from) {
				t.Fatalf("buy.lua no longer contains the text the mutation replaces: %q", from)
			}
			src = strings.Replace(src, from, "  begin()\n  redis.call('HINCRBY', KEYS[5], 'frank', '1')\n  local first, per = 2, 4", 1)
		}
		return src
	})
	before := takeSnapshot(t, f.rdb, f.keys)
	_, err := execScript(f.rdb, broken.buy, f.keys, []string{f.clockMS(), "frank", "abc", "", "0123456789abcdef"})
	if !isValidationError(err) {
		t.Fatalf("the broken buy.lua with quantity \"abc\": %v, want its validation error", err)
	}
	d := before.diff(t, takeSnapshot(t, f.rdb, f.keys))
	if d == "" {
		t.Fatal("the snapshot did not see the writes of a script that reclaimed before it validated")
	}
	t.Logf("caught:\n%s", d)
}

// TestScriptsRejectIntegersAbove2p53 checks the one out-of-range integer that a digits check
// followed by tonumber lets through: 2^53+1 = 9007199254740993 has 16 digits and rounds to
// 2^53 in a Lua double, so a "n <= 2^53" check accepts it. Every position bounded by 2^53 must
// refuse it (and its negative for the signed amount of pay.lua).
func TestScriptsRejectIntegersAbove2p53(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "round")
	const above = "9007199254740993"
	for _, sp := range scriptSpecs() {
		positions := map[string][]int{
			"buy": {2}, "pay": {3}, "load": {7, 8, 12}, "restore": {6, 7, 8, 9},
		}[sp.name]
		positions = append([]int{0}, positions...)
		for _, i := range positions {
			vals := []string{above}
			if sp.name == "pay" && i == 3 {
				vals = append(vals, "-"+above)
			}
			for _, v := range vals {
				t.Run(fmt.Sprintf("%s/ARGV[%d] %s=%s", sp.name, i+1, sp.args[i].name, v), func(t *testing.T) {
					argv := sp.base(f)
					argv[i] = v
					refuses(t, f, sp.s, f.keys, argv)
				})
			}
		}
	}
}

// TestScriptsDomainRefusalsWriteNothing: the refusals a script answers before it reclaims
// (quantity 0, add 0, a sale that exists, a rebuild token that does not match) change nothing.
func TestScriptsDomainRefusalsWriteNothing(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "refusals")
	ds := defaultScripts
	restoreArgv := func(f *fixture, token string) []string {
		return []string{f.clockMS(), token, f.held, "dave", "1", "held", i64toa(t0.Add(90 * time.Second).UnixMilli()), "250",
			i64toa(t0.Add(30 * time.Second).UnixMilli()), "4", "", ""}
	}
	for _, tc := range []struct {
		name string
		s    *script
		argv func(f *fixture) []string
		want []string
	}{
		{"buy quantity 0", ds.buy, func(f *fixture) []string { return []string{f.clockMS(), "frank", "0", "", "0123456789abcdef"} }, []string{"ok", `["invalid_argument"]`}},
		{"add_stock 0", ds.addStock, func(f *fixture) []string { return []string{f.clockMS(), "0"} }, []string{"invalid_argument", "1000000000"}},
		{"add_stock beyond the largest stock", ds.addStock, func(f *fixture) []string { return []string{f.clockMS(), "1000000000"} }, []string{"invalid_argument", "1000000000"}},
		{"load new of a loaded sale", ds.load, func(f *fixture) []string { return loadBase(f, "new", "") }, []string{"conflict"}},
		{"load rebuild of a served sale", ds.load, func(f *fixture) []string { return loadBase(f, "rebuild", "7-abcdef") }, []string{"conflict"}},
		{"restore of a known id", ds.restore, func(f *fixture) []string { return restoreArgv(f, "") }, []string{"conflict"}},
		{"restore with a token outside a rebuild", ds.restore, func(f *fixture) []string { return restoreArgv(f, "7-abcdef") }, []string{"fenced"}},
		{"ready outside a rebuild", ds.ready, func(f *fixture) []string { return []string{f.clockMS(), "7-abcdef"} }, []string{"fenced"}},
		{"trim for an unknown group", ds.trim, func(f *fixture) []string { return []string{f.clockMS(), "nobody"} }, []string{"ok", "0", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := takeSnapshot(t, f.rdb, f.keys)
			got, err := execScript(f.rdb, tc.s, f.keys, tc.argv(f))
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("reply %q, error %v; want %q", got, err, tc.want)
			}
			if d := before.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
				t.Errorf("%s changed the sale:\n%s", tc.name, d)
				before.restore(t)
			}
		})
	}
}

// TestScriptErrorIsInternal: a script that fails on a corrupted key (the sale hash replaced by
// a string) is a WRONGTYPE error, which every Engine method reports as internal (HTTP 500, no
// detail for the client), never as a domain answer, and nothing else changes.
func TestScriptErrorIsInternal(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "corrupt")
	ctx := context.Background()
	if err := f.rdb.Do(ctx, f.rdb.B().Set().Key(f.keys[0]).Value("not a hash").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	id := func(suffix string) string { return f.def.ID + "-" + suffix }
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Buy", func() error {
			_, err := f.e.Buy(ctx, seckill.BuyRequest{SaleID: f.def.ID, UserID: "frank", Quantity: 1})
			return err
		}},
		{"Buy with idempotency key", func() error {
			_, err := f.e.Buy(ctx, seckill.BuyRequest{SaleID: f.def.ID, UserID: f.idemUser, Quantity: 1, IdempotencyKey: f.idemKey})
			return err
		}},
		{"Sale", func() error { _, _, err := f.e.Sale(ctx, f.def.ID); return err }},
		{"Reservation", func() error { _, err := f.e.Reservation(ctx, id(f.held)); return err }},
		{"Cancel", func() error { _, err := f.e.Cancel(ctx, id(f.held), "dave"); return err }},
		{"ConfirmPayment", func() error {
			_, _, err := f.e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "pay-dave", ReservationID: id(f.held), AmountCents: 250})
			return err
		}},
		{"AddStock", func() error { _, _, err := f.e.AddStock(ctx, f.def.ID, 1); return err }},
		{"CloseSale", func() error { _, _, err := f.e.CloseSale(ctx, f.def.ID); return err }},
		{"Reclaim", func() error { _, err := f.e.Reclaim(ctx, f.def.ID); return err }},
		{"LoadSale", func() error { return f.e.LoadSale(ctx, f.def, 0) }},
		{"RestoreReservation", func() error {
			exp := t0.Add(time.Hour)
			return f.e.RestoreReservation(ctx, seckill.Reservation{ID: id(strings.Repeat("ab", 16)), SaleID: f.def.ID, UserID: "gina",
				Quantity: 1, Status: seckill.StatusHeld, ExpiresAt: &exp, AmountCents: 250, CreatedAt: t0, Seq: 9})
		}},
	} {
		t.Run(op.name, func(t *testing.T) {
			before := takeSnapshot(t, f.rdb, f.keys)
			err := op.call()
			if code := seckill.ErrorCode(err); code != seckill.CodeInternal {
				t.Fatalf("error %v has code %q, want internal", err, code)
			}
			var re *rueidis.RedisError
			if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "WRONGTYPE") {
				t.Errorf("error %v does not wrap the WRONGTYPE reply", err)
			}
			if msg := seckill.ErrorMessage(err); msg != "internal error" {
				t.Errorf("client message %q, want the generic one", msg)
			}
			// (internal is 500 in httpapi's table: TestErrorCodesMapToDocumentedStatuses)
			if d := before.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
				t.Errorf("a failed %s changed keys:\n%s", op.name, d)
				before.restore(t)
			}
		})
	}
}

// TestScriptsWrongTypeKeyWritesNothing corrupts each of the seven keys in turn (a string where
// a hash, zset or stream belongs) and runs every script with its valid ARGV: a script that
// fails must not have written anything first (Redis keeps the writes of a script that fails
// half way). A script that does not touch the corrupted key may succeed.
func TestScriptsWrongTypeKeyWritesNothing(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "wrongtype")
	clean := takeSnapshot(t, f.rdb, f.keys)
	ctx := context.Background()
	for i, part := range keyParts {
		for _, sp := range scriptSpecs() {
			t.Run(part+"/"+sp.name, func(t *testing.T) {
				defer clean.restore(t)
				if err := f.rdb.Do(ctx, f.rdb.B().Set().Key(f.keys[i]).Value("corrupt").Build()).Error(); err != nil {
					t.Fatal(err)
				}
				before := takeSnapshot(t, f.rdb, f.keys)
				got, err := execScript(f.rdb, sp.s, f.keys, sp.base(f))
				if err == nil {
					return // the script did not need the key
				}
				if _, ok := rueidis.IsRedisErr(err); !ok {
					t.Fatalf("transport error: %v", err)
				}
				if d := before.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
					t.Errorf("%s.lua failed with %q (reply %q) after writing:\n%s", sp.name, err, got, d)
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Missing sales

// TestMissingSaleAnswersNotLoaded: every script that needs the sale answers {'not_loaded'} for
// a sale that was never loaded (trim answers ok 0), and leaves no key of that sale behind.
func TestMissingSaleAnswersNotLoaded(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "present")
	ghost := f.e.keys("ghost")
	neighbour := takeSnapshot(t, f.rdb, f.keys)
	for _, sp := range scriptSpecs() {
		if sp.name == "load" {
			continue // creates the sale: TestMissingSaleLoadCreatesIt
		}
		t.Run(sp.name, func(t *testing.T) {
			want := []string{"not_loaded"}
			if sp.name == "trim" {
				want = []string{"ok", "0", "0"}
			}
			argv := sp.base(f)
			got, err := execScript(f.rdb, sp.s, ghost, argv)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s.lua on a sale never loaded, ARGV %q: reply %q, error %v; want %q", sp.name, argv, got, err, want)
			}
			if n := keysExisting(t, f.rdb, ghost); n != 0 {
				t.Errorf("%s.lua left %d keys of a sale that was never loaded:\n%s", sp.name, n, snapshot{rdb: f.rdb, keys: ghost, states: make([]keyState, 7)}.diff(t, takeSnapshot(t, f.rdb, ghost)))
				dropPrefix(t, f.rdb, f.e.prefix+"{sale:ghost}")
			}
			// A refused call on a missing sale writes nothing either.
			if _, err := execScript(f.rdb, sp.s, ghost, argv[:len(argv)-1]); !isValidationError(err) {
				t.Errorf("%s.lua with ARGV %q on a missing sale: %v, want a validation error", sp.name, argv[:len(argv)-1], err)
			}
			if n := keysExisting(t, f.rdb, ghost); n != 0 {
				t.Errorf("%s.lua with a short ARGV left %d keys of a missing sale", sp.name, n)
			}
		})
	}
	if d := neighbour.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
		t.Errorf("calls on another sale changed this one:\n%s", d)
	}
}

// TestMissingSaleLoadCreatesIt: load.lua is the one script that creates a missing sale: 'new'
// serves at once, 'rebuild' leaves it loading until ready.lua with the same token.
func TestMissingSaleLoadCreatesIt(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "present")
	ctx := context.Background()

	def := fixtureSale("ghost")
	keys := f.e.keys(def.ID)
	got, err := execScript(f.rdb, defaultScripts.load, keys, append([]string{f.clockMS()}, loadArgs(def, 1, "new", "")...))
	if err != nil || !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("load new: %q, %v", got, err)
	}
	h := saleFields(t, f.rdb, keys[0])
	for field, want := range map[string]string{
		"name": def.Name, "price": "250", "stock": "5", "holdback": "1", "avail": "3", "held": "0", "sold": "1",
		"qunits": "0", "seq": "0", "limit": "2", "hold": "60", "qlimit": "10", "closed": "0", "loading": "0", "loader": "",
		"now": f.clockMS(), "starts": i64toa(def.StartsAt.UnixMilli()), "ends": i64toa(def.EndsAt.UnixMilli()),
		"created": i64toa(def.CreatedAt.UnixMilli()),
	} {
		if h[field] != want {
			t.Errorf("sale hash %s = %q, want %q", field, h[field], want)
		}
	}
	if n := keysExisting(t, f.rdb, keys[1:]); n != 0 {
		t.Errorf("load new created %d keys besides the sale hash", n)
	}
	if _, st, err := f.e.Sale(ctx, def.ID); err != nil || st != (seckill.StockState{Sellable: 4, Available: 3, Sold: 1}) {
		t.Errorf("Sale after load = %+v, %v", st, err)
	}

	def2 := fixtureSale("ghost2")
	keys2 := f.e.keys(def2.ID)
	const token = "12-00ff"
	got, err = execScript(f.rdb, defaultScripts.load, keys2, append([]string{f.clockMS()}, loadArgs(def2, 0, "rebuild", token)...))
	if err != nil || !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("load rebuild: %q, %v", got, err)
	}
	if h := saleFields(t, f.rdb, keys2[0]); h["loading"] != "1" || h["loader"] != token {
		t.Errorf("after load rebuild: loading %q loader %q", h["loading"], h["loader"])
	}
	_, err = f.e.Buy(ctx, seckill.BuyRequest{SaleID: def2.ID, UserID: "u1", Quantity: 1})
	if seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Errorf("Buy during a rebuild: %v, want unavailable", err)
	}
	if got, err := execScript(f.rdb, defaultScripts.ready, keys2, []string{f.clockMS(), "13-00ff"}); err != nil || !slices.Equal(got, []string{"fenced"}) {
		t.Errorf("ready with another token: %q, %v; want fenced", got, err)
	}
	if got, err := execScript(f.rdb, defaultScripts.ready, keys2, []string{f.clockMS(), token}); err != nil || !slices.Equal(got, []string{"ok"}) {
		t.Errorf("ready: %q, %v", got, err)
	}
	mustBuy(t, f.e, def2.ID, "u1", 1, "", seckill.StatusHeld)
}

// TestMissingSaleHashWithLeftovers: the sale hash is gone (evicted, or a restart lost it) but
// other keys of the sale are still there: every script that needs the sale answers
// not_loaded without touching the leftovers, and load.lua clears all of them but the stream.
func TestMissingSaleHashWithLeftovers(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "leftovers")
	ctx := context.Background()
	if err := f.rdb.Do(ctx, f.rdb.B().Del().Key(f.keys[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, f.rdb, f.keys)
	for _, sp := range scriptSpecs() {
		if sp.name == "load" || sp.name == "trim" {
			continue // load rebuilds it (below); trim needs only the stream
		}
		t.Run(sp.name, func(t *testing.T) {
			got, err := execScript(f.rdb, sp.s, f.keys, sp.base(f))
			if err != nil || !slices.Equal(got, []string{"not_loaded"}) {
				t.Errorf("reply %q, error %v; want not_loaded", got, err)
			}
			if d := before.diff(t, takeSnapshot(t, f.rdb, f.keys)); d != "" {
				t.Errorf("%s.lua touched the leftovers of a missing sale:\n%s", sp.name, d)
				before.restore(t)
			}
		})
	}
	t.Run("load", func(t *testing.T) {
		got, err := execScript(f.rdb, defaultScripts.load, f.keys, loadBase(f, "new", ""))
		if err != nil || !slices.Equal(got, []string{"ok"}) {
			t.Fatalf("load new over leftovers: %q, %v", got, err)
		}
		if n := keysExisting(t, f.rdb, f.keys[1:6]); n != 0 {
			t.Errorf("load left %d of res/holds/queue/users/idem behind", n)
		}
		after := takeSnapshot(t, f.rdb, f.keys)
		if after.states[6] != before.states[6] {
			t.Errorf("load changed the stream:\n%s", before.diff(t, after))
		}
		if _, st, err := f.e.Sale(ctx, f.def.ID); err != nil || st != (seckill.StockState{Sellable: 4, Available: 3, Sold: 1}) {
			t.Errorf("Sale after the reload = %+v, %v", st, err)
		}
	})
}

// TestMissingSaleThroughEngine: with no rebuild source configured, every Engine call on a sale
// that was never loaded is not_found (ConfirmPayment: refund_required with no reservation), and
// no key of the sale appears.
func TestMissingSaleThroughEngine(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
	ctx := context.Background()
	const sale = "ghost"
	id := sale + "-" + strings.Repeat("0a", 16)
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Buy", func() error {
			_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: sale, UserID: "u1", Quantity: 1, IdempotencyKey: "k"})
			return err
		}},
		{"Sale", func() error { _, _, err := e.Sale(ctx, sale); return err }},
		{"Reservation", func() error { _, err := e.Reservation(ctx, id); return err }},
		{"Cancel", func() error { _, err := e.Cancel(ctx, id, "u1"); return err }},
		{"AddStock", func() error { _, _, err := e.AddStock(ctx, sale, 5); return err }},
		{"AddStock 0", func() error { _, _, err := e.AddStock(ctx, sale, 0); return err }},
		{"CloseSale", func() error { _, _, err := e.CloseSale(ctx, sale); return err }},
		{"Reclaim", func() error { _, err := e.Reclaim(ctx, sale); return err }},
	} {
		t.Run(op.name, func(t *testing.T) {
			if err := op.call(); seckill.ErrorCode(err) != seckill.CodeNotFound {
				t.Errorf("%s on a sale never loaded: %v, want not_found", op.name, err)
			}
		})
	}
	t.Run("ConfirmPayment", func(t *testing.T) {
		res, r, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p1", ReservationID: id, AmountCents: 100})
		if err != nil || res != seckill.PaymentRefundRequired || !reflect.DeepEqual(r, seckill.Reservation{}) {
			t.Errorf("ConfirmPayment on a sale never loaded = %q, %+v, %v; want refund_required, zero reservation", res, r, err)
		}
	})
	t.Run("RestoreReservation", func(t *testing.T) {
		err := e.RestoreReservation(ctx, seckill.Reservation{ID: id, SaleID: sale, UserID: "u1", Quantity: 1,
			Status: seckill.StatusPaid, AmountCents: 100, CreatedAt: t0, Seq: 1, PaymentID: "p1"})
		if seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Errorf("RestoreReservation on a sale never loaded: %v, want not_found", err)
		}
	})
	if n := keysExisting(t, c.Inventory, e.keys(sale)); n != 0 {
		t.Errorf("calls on a sale never loaded left %d of its keys", n)
	}
}

// ---------------------------------------------------------------------------------------------
// Boundaries through the Engine

func boundarySale(id string, stock, holdback, limit, qlimit int) seckill.Sale {
	return seckill.Sale{
		ID: id, Name: id, PriceCents: 100, Stock: stock, Holdback: holdback,
		StartsAt: t0.Add(-time.Minute), EndsAt: t0.Add(time.Hour), PerUserLimit: limit,
		HoldSeconds: 60, QueueLimit: qlimit, CreatedAt: t0.Add(-time.Hour),
	}
}

func loadT(t *testing.T, e *Engine, def seckill.Sale) {
	t.Helper()
	if err := e.LoadSale(context.Background(), def, 0); err != nil {
		t.Fatalf("LoadSale(%s): %v", def.ID, err)
	}
}

func buyErr(e *Engine, sale, user string, q int) error {
	_, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: sale, UserID: user, Quantity: q})
	return err
}

func wantCode(t *testing.T, what string, err error, want seckill.Code) {
	t.Helper()
	if got := seckill.ErrorCode(err); got != want {
		t.Errorf("%s: %v (code %q), want %s", what, err, got, want)
	}
}

func wantStock(t *testing.T, e *Engine, sale string, want seckill.StockState) {
	t.Helper()
	_, st, err := e.Sale(context.Background(), sale)
	if err != nil || st != want {
		t.Errorf("Sale(%s) = %+v, %v; want %+v", sale, st, err, want)
	}
}

func wantStatus(t *testing.T, e *Engine, id string, want seckill.ReservationStatus) {
	t.Helper()
	r, err := e.Reservation(context.Background(), id)
	if err != nil || r.Status != want {
		t.Errorf("Reservation(%s) = %s, %v; want %s", id, r.Status, err, want)
	}
}

// TestBoundaryStockZero: a sale with nothing to sell (stock 0, or all of it held back) answers
// sold_out and changes nothing.
func TestBoundaryStockZero(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
	for _, def := range []seckill.Sale{boundarySale("zero", 0, 0, 1, 0), boundarySale("heldback", 2, 2, 1, 10)} {
		t.Run(def.ID, func(t *testing.T) {
			loadT(t, e, def)
			keys := e.keys(def.ID)
			before := takeSnapshot(t, c.Inventory, keys)
			for _, user := range []string{"u1", "u2", "u1"} {
				err := buyErr(e, def.ID, user, 1)
				wantCode(t, "Buy on stock 0", err, seckill.CodeSoldOut)
				if err != nil && seckill.ErrorMessage(err) != "sold out" {
					t.Errorf("message %q, want \"sold out\"", seckill.ErrorMessage(err))
				}
			}
			if d := before.diff(t, takeSnapshot(t, c.Inventory, keys)); d != "" {
				t.Errorf("sold_out buys changed the sale:\n%s", d)
			}
			wantStock(t, e, def.ID, seckill.StockState{})
		})
	}
}

// TestBoundaryStockOne: one unit is sold exactly once.
func TestBoundaryStockOne(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	t.Run("queue", func(t *testing.T) {
		e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
		def := boundarySale("one", 1, 0, 1, 10)
		loadT(t, e, def)
		first := mustBuy(t, e, def.ID, "u1", 1, "", seckill.StatusHeld)
		second := mustBuy(t, e, def.ID, "u2", 1, "", seckill.StatusQueued)
		third := mustBuy(t, e, def.ID, "u3", 1, "", seckill.StatusQueued)
		if second.Position != 1 || third.Position != 2 {
			t.Errorf("queue positions %d, %d; want 1, 2", second.Position, third.Position)
		}
		wantStock(t, e, def.ID, seckill.StockState{Sellable: 1, Held: 1, Queued: 2})
		mustPay(t, e, first.ID, "p1", first.AmountCents, seckill.PaymentApplied)
		wantStatus(t, e, second.ID, seckill.StatusRejected)
		wantStatus(t, e, third.ID, seckill.StatusRejected)
		wantCode(t, "Buy after the only unit was paid", buyErr(e, def.ID, "u4", 1), seckill.CodeSoldOut)
		mustPay(t, e, second.ID, "p2", second.AmountCents, seckill.PaymentRefundRequired) // rejected: never sold
		wantStock(t, e, def.ID, seckill.StockState{Sellable: 1, Sold: 1})
	})
	t.Run("no queue", func(t *testing.T) {
		e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
		def := boundarySale("one", 1, 0, 1, 0)
		loadT(t, e, def)
		first := mustBuy(t, e, def.ID, "u1", 1, "", seckill.StatusHeld)
		before := takeSnapshot(t, c.Inventory, e.keys(def.ID))
		wantCode(t, "second buyer, queue_limit 0", buyErr(e, def.ID, "u2", 1), seckill.CodeQueueFull)
		if d := before.diff(t, takeSnapshot(t, c.Inventory, e.keys(def.ID))); d != "" {
			t.Errorf("queue_full changed the sale:\n%s", d)
		}
		mustPay(t, e, first.ID, "p1", first.AmountCents, seckill.PaymentApplied)
		wantCode(t, "Buy after payment", buyErr(e, def.ID, "u2", 1), seckill.CodeSoldOut)
		wantStock(t, e, def.ID, seckill.StockState{Sellable: 1, Sold: 1})
	})
	t.Run("expiry then late payment", func(t *testing.T) {
		clock := seckilltest.NewManualClock(t0)
		e := newTestEngine(t, c.Inventory, clock)
		def := boundarySale("one", 1, 0, 1, 10)
		loadT(t, e, def)
		first := mustBuy(t, e, def.ID, "u1", 1, "", seckill.StatusHeld)
		second := mustBuy(t, e, def.ID, "u2", 1, "", seckill.StatusQueued)
		clock.Advance(61 * time.Second)
		wantStatus(t, e, first.ID, seckill.StatusExpired)
		wantStatus(t, e, second.ID, seckill.StatusHeld)
		// The unit went to u2: u1's late payment must be refunded, not sold twice.
		mustPay(t, e, first.ID, "p1", first.AmountCents, seckill.PaymentRefundRequired)
		mustPay(t, e, second.ID, "p2", second.AmountCents, seckill.PaymentApplied)
		wantStock(t, e, def.ID, seckill.StockState{Sellable: 1, Sold: 1})
	})
}

// TestBoundaryQuantityAboveFree: a buyer asking more than is free queues when held units could
// still come back to cover the request, and is sold_out (with the units left) when even free
// plus held is not enough.
func TestBoundaryQuantityAboveFree(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
	ctx := context.Background()

	def := boundarySale("q3", 3, 0, 3, 10)
	loadT(t, e, def)
	holder := mustBuy(t, e, def.ID, "u1", 2, "", seckill.StatusHeld)
	queued := mustBuy(t, e, def.ID, "u2", 2, "", seckill.StatusQueued) // free 1 + held 2 >= 2
	wantStock(t, e, def.ID, seckill.StockState{Sellable: 3, Available: 1, Held: 2, Queued: 2})
	// A buyer of 1 behind the queued one waits too (FIFO: the head is served first).
	mustBuy(t, e, def.ID, "u3", 1, "", seckill.StatusQueued)
	wantCode(t, "quantity above the per-user limit", buyErr(e, def.ID, "u4", 4), seckill.CodeLimitExceeded)
	// u1 pays: only 1 unit is left unsold, fewer than the 2 the head wants: it is rejected and
	// the buyer of 1 behind it is served.
	mustPay(t, e, holder.ID, "p1", holder.AmountCents, seckill.PaymentApplied)
	wantStatus(t, e, queued.ID, seckill.StatusRejected)
	wantStock(t, e, def.ID, seckill.StockState{Sellable: 3, Held: 1, Sold: 2})

	def = boundarySale("q5", 3, 0, 5, 10)
	loadT(t, e, def)
	mustBuy(t, e, def.ID, "u1", 2, "", seckill.StatusHeld)
	before := takeSnapshot(t, c.Inventory, e.keys(def.ID))
	err := buyErr(e, def.ID, "u2", 4) // free 1 + held 2 = 3 < 4
	wantCode(t, "quantity 4 with 3 left", err, seckill.CodeSoldOut)
	if msg := seckill.ErrorMessage(err); !strings.Contains(msg, "only 3 units left") {
		t.Errorf("sold_out message %q does not tell the 3 units left", msg)
	}
	if d := before.diff(t, takeSnapshot(t, c.Inventory, e.keys(def.ID))); d != "" {
		t.Errorf("a sold_out buy changed the sale:\n%s", d)
	}
	mustBuy(t, e, def.ID, "u2", 3, "", seckill.StatusQueued) // free 1 + held 2 = 3 >= 3
	mustBuy(t, e, def.ID, "u3", 1, "", seckill.StatusQueued) // FIFO: behind the head
	_, st, err := e.Sale(ctx, def.ID)
	if err != nil || st.Available < 0 || st.Available+st.Held+st.Sold != st.Sellable {
		t.Errorf("Sale = %+v, %v", st, err)
	}
}

// TestZeroIsTrueTrap: in Lua 0 is true and a missing hash field is false, not nil. A user with
// no units (new, or back to 0 after a cancel or an expiry) can buy; the per-user count's field
// is deleted when it reaches 0; an idempotency key that misses does not replay.
func TestZeroIsTrueTrap(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock)
	ctx := context.Background()
	def := boundarySale("trap", 10, 0, 2, 10)
	loadT(t, e, def)
	users := e.keys(def.ID)[4]
	rdb := c.Inventory

	t.Run("new user", func(t *testing.T) {
		if hexists(t, rdb, users, "newbie") {
			t.Fatal("newbie has a count before buying")
		}
		r := mustBuy(t, e, def.ID, "newbie", 1, "", seckill.StatusHeld)
		if got := hgetall(t, rdb, users)["newbie"]; got != "1" {
			t.Errorf("users[newbie] = %q, want 1", got)
		}
		if _, err := e.Cancel(ctx, r.ID, "newbie"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("back to 0 after cancel", func(t *testing.T) {
		r := mustBuy(t, e, def.ID, "u1", 2, "", seckill.StatusHeld)
		if _, err := e.Cancel(ctx, r.ID, "u1"); err != nil {
			t.Fatal(err)
		}
		if hexists(t, rdb, users, "u1") {
			t.Errorf("users still has a field for u1 after its only hold was cancelled: %v", hgetall(t, rdb, users))
		}
		mustBuy(t, e, def.ID, "u1", 2, "", seckill.StatusHeld) // the full limit again
	})
	t.Run("back to 0 after a cancelled queue place", func(t *testing.T) {
		d := boundarySale("trapq", 1, 0, 1, 10)
		loadT(t, e, d)
		mustBuy(t, e, d.ID, "holder", 1, "", seckill.StatusHeld)
		q := mustBuy(t, e, d.ID, "waiter", 1, "", seckill.StatusQueued)
		if _, err := e.Cancel(ctx, q.ID, "waiter"); err != nil {
			t.Fatal(err)
		}
		if qu := e.keys(d.ID)[4]; hexists(t, rdb, qu, "waiter") {
			t.Errorf("users still has a field for a buyer whose queue place was cancelled: %v", hgetall(t, rdb, qu))
		}
		mustBuy(t, e, d.ID, "waiter", 1, "", seckill.StatusQueued)
	})
	t.Run("back to 0 after expiry", func(t *testing.T) {
		d := boundarySale("trapx", 5, 0, 1, 10)
		loadT(t, e, d)
		r := mustBuy(t, e, d.ID, "u2", 1, "", seckill.StatusHeld)
		clock.Advance(61 * time.Second)
		if n, err := e.Reclaim(ctx, d.ID); err != nil || n != 1 {
			t.Fatalf("Reclaim = %d, %v; want 1", n, err)
		}
		wantStatus(t, e, r.ID, seckill.StatusExpired)
		if xu := e.keys(d.ID)[4]; hexists(t, rdb, xu, "u2") {
			t.Errorf("users still has a field for u2 after its only hold expired: %v", hgetall(t, rdb, xu))
		}
		mustBuy(t, e, d.ID, "u2", 1, "", seckill.StatusHeld)
	})
	t.Run("paid units stay counted", func(t *testing.T) {
		d := boundarySale("trapp", 5, 0, 1, 10)
		loadT(t, e, d)
		r := mustBuy(t, e, d.ID, "u3", 1, "", seckill.StatusHeld)
		mustPay(t, e, r.ID, "p3", r.AmountCents, seckill.PaymentApplied)
		if got := hgetall(t, rdb, e.keys(d.ID)[4])["u3"]; got != "1" {
			t.Errorf("users[u3] = %q after payment, want 1", got)
		}
		wantCode(t, "a second buy over the limit", buyErr(e, d.ID, "u3", 1), seckill.CodeLimitExceeded)
	})
	t.Run("idempotency miss does not replay", func(t *testing.T) {
		d := boundarySale("trapi", 10, 0, 3, 10)
		loadT(t, e, d)
		buy := func(user, key string) seckill.BuyResult {
			t.Helper()
			r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: d.ID, UserID: user, Quantity: 1, IdempotencyKey: key})
			if err != nil {
				t.Fatalf("Buy(%s, %s): %v", user, key, err)
			}
			return r
		}
		a := buy("u1", "k1")
		b := buy("u1", "k2")
		other := buy("u2", "k1") // keys are per user
		again := buy("u1", "k1")
		if a.Replayed || b.Replayed || other.Replayed {
			t.Errorf("a first use of a key replayed: %v %v %v", a.Replayed, b.Replayed, other.Replayed)
		}
		if a.Reservation.ID == b.Reservation.ID || a.Reservation.ID == other.Reservation.ID {
			t.Errorf("distinct keys or users shared a reservation: %s %s %s", a.Reservation.ID, b.Reservation.ID, other.Reservation.ID)
		}
		if !again.Replayed || again.Reservation.ID != a.Reservation.ID {
			t.Errorf("a repeated key did not replay: %+v", again)
		}
		wantStock(t, e, d.ID, seckill.StockState{Sellable: 10, Available: 7, Held: 3})
	})
	t.Run("quantity 0", func(t *testing.T) {
		before := takeSnapshot(t, rdb, e.keys(def.ID))
		wantCode(t, "Buy quantity 0", buyErr(e, def.ID, "u9", 0), seckill.CodeInvalidArgument)
		if d := before.diff(t, takeSnapshot(t, rdb, e.keys(def.ID))); d != "" {
			t.Errorf("quantity 0 changed the sale:\n%s", d)
		}
	})
}

// ---------------------------------------------------------------------------------------------
// "Decrement first, check after"

// TestNeverNegativeAvailable: 200 buyers at a time race for 5 units (no queue) while six
// readers watch, four through Sale() and two on the raw counters of the sale hash. In four
// churn rounds every winner cancels at once (units come and go); in the last round every
// winner pays. No read ever shows a negative count, more than 5 units held, or counts that do
// not add up to the sellable units, and exactly 5 units are sold.
func TestNeverNegativeAvailable(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
	rdb := c.Inventory
	ctx := context.Background()
	def := boundarySale("race", 5, 0, 1, 0)
	loadT(t, e, def)
	key := e.keys(def.ID)[0]

	stop := make(chan struct{})
	var readers sync.WaitGroup
	var reads atomic.Int64
	var bad sync.Map
	report := func(s string) { bad.Store(s, true) }
	consistent := func(avail, held, sold int64) bool {
		return avail >= 0 && held >= 0 && sold >= 0 && held <= 5 && avail+held+sold == 5
	}
	watch := func(read func() (avail, held, sold int64, err error)) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, h, s, err := read()
			if err != nil {
				report(err.Error())
				return
			}
			if !consistent(a, h, s) {
				report(fmt.Sprintf("read available %d, held %d, sold %d of 5", a, h, s))
			}
			reads.Add(1)
		}
	}
	for range 4 {
		readers.Go(func() {
			watch(func() (int64, int64, int64, error) {
				_, st, err := e.Sale(ctx, def.ID)
				return int64(st.Available), int64(st.Held), int64(st.Sold), err
			})
		})
	}
	for range 2 {
		readers.Go(func() {
			watch(func() (int64, int64, int64, error) {
				st := rawState(t, rdb, key)
				return st["avail"], st["held"], st["sold"], nil
			})
		})
	}

	var won, paid, refused atomic.Int64
	for round := range 5 {
		final := round == 4
		var buyers sync.WaitGroup
		for i := range 200 {
			buyers.Go(func() {
				r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: def.ID, UserID: fmt.Sprintf("r%d-u%03d", round, i), Quantity: 1})
				switch seckill.ErrorCode(err) {
				case "":
					if !final {
						if _, err := e.Cancel(ctx, r.Reservation.ID, r.Reservation.UserID); err != nil {
							report("Cancel: " + err.Error())
						}
						return
					}
					won.Add(1)
					res, _, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p" + r.Reservation.ID, ReservationID: r.Reservation.ID, AmountCents: r.Reservation.AmountCents})
					if err != nil || res != seckill.PaymentApplied {
						report(fmt.Sprintf("pay: %s %v", res, err))
					}
					paid.Add(1)
				case seckill.CodeSoldOut, seckill.CodeQueueFull:
					if final {
						refused.Add(1)
					}
				default:
					report("Buy: " + err.Error())
				}
			})
		}
		buyers.Wait()
		if !final {
			wantStock(t, e, def.ID, seckill.StockState{Sellable: 5, Available: 5})
		}
	}
	close(stop)
	readers.Wait()
	bad.Range(func(k, _ any) bool { t.Error(k); return true })
	if won.Load() != 5 || paid.Load() != 5 || refused.Load() != 195 {
		t.Errorf("last round: won %d, paid %d, refused %d; want 5, 5, 195", won.Load(), paid.Load(), refused.Load())
	}
	wantStock(t, e, def.ID, seckill.StockState{Sellable: 5, Sold: 5})
	if reads.Load() == 0 {
		t.Error("the readers never read")
	}
	t.Logf("%d consistent reads", reads.Load())
}

// TestNeverNegativeDuplicateClicks: 50 simultaneous clicks of one buyer with one idempotency
// key make one reservation and take one unit: the duplicate check comes before any decrement.
func TestNeverNegativeDuplicateClicks(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
	ctx := context.Background()
	def := boundarySale("clicks", 5, 0, 1, 0)
	loadT(t, e, def)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]int{}
	fresh := 0
	for range 50 {
		wg.Go(func() {
			r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: def.ID, UserID: "clicker", Quantity: 1, IdempotencyKey: "click"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ids["error: "+err.Error()]++
				return
			}
			ids[r.Reservation.ID]++
			if !r.Replayed {
				fresh++
			}
		})
	}
	wg.Wait()
	if len(ids) != 1 || fresh != 1 {
		t.Errorf("50 clicks with one key: reservations %v, %d not replayed; want one reservation, one fresh", ids, fresh)
	}
	wantStock(t, e, def.ID, seckill.StockState{Sellable: 5, Available: 4, Held: 1})
}
