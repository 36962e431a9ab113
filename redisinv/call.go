// The core's door to Redis: one script call for one sale (or one segment of a segmented sale),
// and its reply decoded.
// Every operation of the engine reaches Redis through exec (execRaw, execTag): the sale's eight
// keys (keys; common.lua's KEYS), the clock as ARGV[1] (clockArg), then the operation's own ARGV,
// written next to each Go caller. Around the call, two other rooms are told, each through one
// door: the versions (version.go: versions.mark before, versions.check after) and the local answers
// (localanswers.go: noteVersion), and the sweeper's due-time index learns which sales this
// instance changed (sweeper.go: touched.note). A segment's missing keys are the segments' business
// (segment.go segmentMissing); a missing sale, the rebuild's (rebuild.go).

package redisinv

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/seckill-go/seckill"
)

// keyParts are the suffixes of a sale's keys, in the order of the scripts' KEYS.
var keyParts = [...]string{"sale", "res", "holds", "queue", "users", "idem", "events", "rate"}

// keys returns the eight keys of a sale (common.lua).
func (e *Engine) keys(saleID string) []string {
	base := e.prefix + "{sale:" + saleID + "}:"
	ks := make([]string, len(keyParts))
	for i, p := range keyParts {
		ks[i] = base + p
	}
	return ks
}

// streamKey is the sale's event stream.
func (e *Engine) streamKey(saleID string) string { return e.prefix + "{sale:" + saleID + "}:events" }

// clockArg is ARGV[1] of every script: empty for Redis TIME, or the test clock in ms.
func (e *Engine) clockArg() string {
	if e.clock == nil {
		return ""
	}
	return strconv.FormatInt(e.clock.Now().UnixMilli(), 10)
}

// errUnavailable is the client-facing error for a Redis that does not answer.
func errUnavailable(cause error) error {
	return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable, "the inventory is unavailable; retry shortly"), cause)
}

// exec runs s for one sale with args after the clock. A sale that is missing is handed to the
// rebuilder (not_found, or unavailable while it is rebuilt); one being rebuilt is unavailable.
// Transport failures and timeouts are unavailable; a Redis error reply means a script refused
// its arguments, which is a bug on this side, and is internal.
func (e *Engine) exec(ctx context.Context, s *script, saleID string, args ...string) (reply, error) {
	r, err := e.execRaw(ctx, s, saleID, args...)
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "not_loaded":
		err := e.missing(ctx, saleID, s)
		if !errors.Is(err, errRebuilt) {
			return nil, err
		}
		// Rebuilt while the call waited (a touch): once more, now that the sale is back.
		if r, err = e.execRaw(ctx, s, saleID, args...); err != nil {
			return nil, err
		}
		if code := r.code(); code == "not_loaded" || code == "loading" {
			return nil, seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", saleID)
		}
		return r, nil
	case "loading":
		if e.rebuild != nil {
			// A rebuild may have stopped half way (its instance died, it lost its lock): if
			// nobody holds the lock any more, this instance takes over.
			e.rebuild.start(saleID, urgencyOf(s))
		}
		return nil, seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", saleID)
	}
	return r, nil
}

// execRaw is exec without the handling of missing and loading sales.
func (e *Engine) execRaw(ctx context.Context, s *script, saleID string, args ...string) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	argv := make([]string, 0, 1+len(args))
	argv = append(argv, e.clockArg())
	argv = append(argv, args...)
	var keys []string
	switch {
	case s.room: // room.go: the sale's hash and the room's keys
		keys = e.roomKeys(saleID)
	case (s.name == "cool" || s.name == "sale_admin") && !strings.Contains(saleID, "#"):
		keys = append(e.keys(saleID), e.roomKeys(saleID)[1:]...) // room.go: removed with the sale's
	default:
		keys = e.keys(saleID)
	}
	floor := e.versions.mark(saleID)       // version.go
	msgs, err := e.run(ctx, s, keys, argv) // replicas.go
	if err != nil {
		wrapped := fmt.Errorf("redisinv: %s script for sale %s: %w", s.name, saleID, err)
		if transient(err) {
			return nil, errUnavailable(wrapped)
		}
		return nil, wrapped
	}
	r, v, err := splitVersion(msgs)
	if err != nil {
		return nil, fmt.Errorf("redisinv: %s script for sale %s: %w", s.name, saleID, err)
	}
	if !s.room { // a room changes nothing of its sale: no view goes stale, nothing comes due
		e.local.noteVersion(saleID, s.name, v) // localanswers.go: a view older than this call is stale
		e.touched.note(saleID, s, r.code())    // sweeper.go: the sale may have something new coming due
	}
	if err := e.versions.check(ctx, saleID, floor, v); err != nil {
		return nil, err
	}
	return r, nil
}

// transient reports whether err is worth a retry later (unavailable, 503): a failure to reach
// Redis or one of transientReplies. Other error replies mean a script refused its keys or
// arguments, or found a key of the wrong type: a bug or a corrupted key, internal.
func transient(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return true // transport, timeout
	}
	word, _, _ := strings.Cut(re.Error(), " ")
	return slices.Contains(transientReplies, word)
}

// missing decides what a call on a sale whose keys are missing answers.
func (e *Engine) missing(ctx context.Context, saleID string, s *script) error {
	if e.rebuild == nil {
		return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	return e.rebuild.missing(ctx, saleID, urgencyOf(s), coldAnswers(s))
}

// execTag is exec for an id that may be a segment's tag ("X#i.k", segTag).
func (e *Engine) execTag(ctx context.Context, s *script, tag string, args ...string) (reply, error) {
	saleID, _, seg := strings.Cut(tag, "#")
	if !seg {
		return e.exec(ctx, s, tag, args...)
	}
	r, err := e.execRaw(ctx, s, tag, args...)
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "not_loaded", "loading":
		return nil, e.segs.segmentMissing(ctx, saleID)
	}
	return r, nil
}

// run sends one script call: through rueidis' pipeline, or with WAIT after it when the engine
// waits for replicas and the script changes state.
func (e *Engine) run(ctx context.Context, s *script, keys, argv []string) ([]rueidis.RedisMessage, error) {
	if e.acks.n == 0 || s.read {
		return s.lua.Exec(ctx, e.rdb, keys, argv).ToArray()
	}
	wait := func() rueidis.Completed {
		return e.rdb.B().Wait().Numreplicas(e.acks.n).Timeout(e.acks.timeout.Milliseconds()).Build()
	}
	res := e.rdb.DoMulti(ctx,
		e.rdb.B().Evalsha().Sha1(scriptSHA(s)).Numkeys(int64(len(keys))).Key(keys...).Arg(argv...).Build(), wait())
	msgs, err := res[0].ToArray()
	if re, ok := rueidis.IsRedisErr(err); ok && re.IsNoScript() {
		// A server that has not seen the script (restarted, promoted, a new node): EVAL
		// caches it there.
		res = e.rdb.DoMulti(ctx,
			e.rdb.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(argv...).Build(), wait())
		msgs, err = res[0].ToArray()
	}
	if err != nil {
		return nil, err
	}
	got, err := res[1].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("WAIT: %w", err)
	}
	if got < e.acks.n {
		e.acks.short.Add(1)
		return nil, errTooFewReplicas{got: got, want: e.acks.n, timeout: e.acks.timeout}
	}
	e.acks.acked.Add(1)
	return msgs, nil
}

// shas caches each script's SHA-1 (scripts never change once built).
var shas sync.Map // *script → string

func scriptSHA(s *script) string {
	if v, ok := shas.Load(s); ok {
		return v.(string)
	}
	sum := sha1.Sum([]byte(s.src))
	h := hex.EncodeToString(sum[:])
	shas.Store(s, h)
	return h
}

// splitVersion takes the version off the end of a script's reply (with_version in common.lua).
func splitVersion(msgs []rueidis.RedisMessage) (reply, uint64, error) {
	if len(msgs) < 2 {
		return nil, 0, errors.New("reply too short: want a code and a version")
	}
	v, err := msgs[len(msgs)-1].AsInt64()
	if err != nil || v < 0 {
		return nil, 0, fmt.Errorf("reply does not end with a version: %v", err)
	}
	return reply(msgs[:len(msgs)-1]), uint64(v), nil
}

// transientReplies are the error replies of a Redis that cannot serve now but will: out of
// memory, busy with a long script, a replica or a node without its master, a cluster
// reconfiguring, a server loading its data set.
var transientReplies = []string{"OOM", "BUSY", "READONLY", "MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN",
	"LOADING", "TRYAGAIN", "MOVED", "ASK"}

// What the scripts answer, decoded: a reply's code and fields, a sale_reply and a res_reply
// (common.lua), and the small conversions every room uses.
// reply is a script's answer: its first element is "ok" or a domain code.
type reply []rueidis.RedisMessage

func (r reply) code() string { return r.str(0) }

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	s, _ := r[i].ToString()
	return s
}

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	n, _ := r[i].AsInt64()
	return n
}

// saleOf decodes a sale_reply (common.lua).
func saleOf(id string, r reply) (seckill.Sale, seckill.StockState) {
	s := seckill.Sale{
		ID: id, Name: r.str(1), PriceCents: r.int(2), Stock: int(r.int(3)), Holdback: int(r.int(4)),
		StartsAt: fromMillis(r.int(5)), EndsAt: fromMillis(r.int(6)), PerUserLimit: int(r.int(7)),
		HoldSeconds: int(r.int(8)), QueueLimit: int(r.int(9)), CreatedAt: fromMillis(r.int(10)),
		Currency: r.str(15), Listed: r.str(16) != "0", Segments: max(int(r.int(17)), 1),
	}
	s.PreheatSeconds, _ = strconv.Atoi(r.str(21)) // '0' for a sale loaded before it was kept
	s.Room = parseRoom(r.str(22))                 // room.go; '' (nil) for none
	st := seckill.StockState{
		Sellable: s.Sellable(), Available: int(r.int(11)), Held: int(r.int(12)), Sold: int(r.int(13)),
		Queued: int(r.int(14)),
	}
	return s, st
}

// reservationOf decodes a res_reply (common.lua) of sale saleID.
func reservationOf(saleID string, r reply) seckill.Reservation {
	v := seckill.Reservation{
		ID: saleID + "-" + r.str(2), SaleID: saleID, Status: seckill.ReservationStatus(r.str(3)),
		UserID: r.str(4), Quantity: int(r.int(5)), Seq: uint64(r.int(7)), AmountCents: r.int(8),
		CreatedAt: fromMillis(r.int(9)), PaymentID: r.str(10), IdempotencyKey: r.str(11),
		Position: int(r.int(12)),
	}
	if v.Status == seckill.StatusHeld {
		t := fromMillis(r.int(6))
		v.ExpiresAt = &t
	}
	return v
}

func unexpected(script string, r reply) error {
	return fmt.Errorf("redisinv: %s script: unexpected reply %q", script, r.code())
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func itoa(n int) string { return strconv.Itoa(n) }

func i64toa(n int64) string { return strconv.FormatInt(n, 10) }

// errNotFound is the not_found error for a reservation id.
func errNotFound(id string) error {
	return seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
}

// isCode reports whether err is a domain error with code c.
func isCode(err error, c seckill.Code) bool {
	var de *seckill.Error
	return errors.As(err, &de) && de.Code == c
}

// boolArg is a flag as the scripts take it: "1" or "0".
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
