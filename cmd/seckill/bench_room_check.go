package main

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/seckill-go/seckill"
)

// The checks of `seckill bench --waiting-room` (bench_room.go), kept apart from the HTTP so
// that a test can feed them a fabricated observation and see each one fail (negative controls).

// roomBuyer is what the bench observed of one buyer of the room's sale: what its tickets said
// (the server's clock) and what it saw and when (the bench's clock).
type roomBuyer struct {
	user     string
	entrant  string // the ticket's
	prequeue bool   // scheduled to arrive before the start
	rank     int    // arrival order: 0 first

	joined   bool          // the join was answered with a ticket
	joinLat  time.Duration // the join request (without the proof's solving)
	solve    time.Duration // solving the proof of work (0 without)
	drawn    bool
	index    int64
	joinedAt time.Time // the ticket's joined_at

	admittedAt time.Time // the ticket's admitted_at (server clock)
	admissions int       // distinct admitted_at values seen (more than 1: admitted twice)
	token      string    // the admission token

	state string    // the last ticket state seen: admitted, sold_out, ended, or still waiting
	told  time.Time // when the bench learned sold_out/ended (its clock)
	by    string    // how it learned: "stream", "poll", or "join" (it joined after the close)
	// arrived is when the stream's closing event reached the buyer's socket (the kernel's
	// receive time, rxstamp), zero when unknown (not by stream, or no stamps here): told is
	// when the bench's goroutine got it, which on a small machine running the whole crowd is
	// later (toldAt). atConnect: the stream's first event was already the close (the buyer
	// connected after it).
	arrived   time.Time
	atConnect bool

	bought  bool      // a buy was answered (held or refused)
	buyAt   time.Time // when the buy was sent (the bench's clock)
	buyLat  time.Duration
	got     bool // the buy was held and paid
	paidAt  time.Time
	failure string // an unexpected error, if any: what it saw last may be stale (the checks
	// do not count its silence as the room's; the run fails on it as buyers_finished)
}

// roomObservation is a whole run's record, with what the room published.
type roomObservation struct {
	rate, burst int // admit_per_second and its documented burst (seckill.RoomPolicy.RoomBurst)
	order       string
	buyers      []*roomBuyer
	written     *closeWrittenJSON  // the servers' own figure for the tell (nil: not served)
	tell        *tellReferenceJSON // this client against a bare server's tell (nil: not measured)

	commitmentBefore string   // the room's commitment read before the start
	commitment, seed string   // read after the start (seed in hex)
	entrants         []string // the published pre-queue entrants
	preQueue         int64    // the room's pre_queue count
	admitted         int64    // the room's serving counter at the end

	// bypass lists what the origin answered a buyer that asked for the purchase path without
	// its admission (no token; another buyer's token): each must be 403 admission_required.
	bypass []string

	soldOut     bool          // every unit was paid: the room must close
	lastPaid    time.Time     // the bench's clock, no later than the last unit's payment (roomRun.paidNow)
	lastPaidAck time.Time     // when the bench learned of the last payment (after the close)
	toldWithin  time.Duration // how soon a waiting buyer must be told after the close
	// closedAt is the room's closed_at (its view after the crowd): the instant the room closed,
	// what told_sold_out measures from (zero when the room did not say).
	closedAt time.Time
}

// roomChecks runs every check; each returns the violations it found (none: it held).
type roomCheck struct {
	name, what string
	bad        []string
}

func checkRoom(o roomObservation) []roomCheck {
	return []roomCheck{
		{"admission_rate", fmt.Sprintf("no second (server clock) with more than admit_per_second + burst = %d + %d admissions", o.rate, o.burst), checkAdmissionRate(o)},
		{"admitted_once", "no buyer admitted twice, no index given twice, the room's serving counter equals the buyers admitted", checkAdmittedOnce(o)},
		{"draw", "the seed matches the commitment published before the start, the published entrants are the pre-queue, and the pre-queue's indexes are seckill.DrawOrder of them", checkDraw(o)},
		{"admission_order", "admitted in index order (the prefix 1…admitted, admitted_at never decreasing with the index), and after the pre-queue in order of arrival (joined_at)", checkAdmissionOrder(o)},
		{"no_bypass", "the purchase path refused without an admission token and with another buyer's (403 admission_required), and every buy came from an admitted buyer", checkBypass(o)},
		{"told_sold_out", fmt.Sprintf("every buyer not admitted told sold out within %s of the room's closed_at", o.toldWithin), checkTold(o)},
	}
}

// firstFew bounds the violations a check lists.
const firstFew = 5

func appendBad(bad []string, format string, args ...any) []string {
	if len(bad) == firstFew {
		return append(bad, "… (more)")
	}
	if len(bad) > firstFew {
		return bad
	}
	return append(bad, fmt.Sprintf(format, args...))
}

func admittedBuyers(o roomObservation) []*roomBuyer {
	var out []*roomBuyer
	for _, b := range o.buyers {
		if !b.admittedAt.IsZero() {
			out = append(out, b)
		}
	}
	return out
}

// checkAdmissionRate: in every window of one second that starts at an admission, at most
// rate + burst admissions (docs/MODEL.md: at most rate·w + burst in any w seconds).
func checkAdmissionRate(o roomObservation) []string {
	if o.rate <= 0 {
		return nil
	}
	ts := make([]time.Time, 0, len(o.buyers))
	for _, b := range admittedBuyers(o) {
		ts = append(ts, b.admittedAt)
	}
	slices.SortFunc(ts, time.Time.Compare)
	var bad []string
	j := 0
	for i := 0; i < len(ts); i++ {
		for j < len(ts) && ts[j].Sub(ts[i]) < time.Second {
			j++
		}
		if n := j - i; n > o.rate+o.burst {
			bad = appendBad(bad, "%d admissions in the second from %s", n, ts[i].Format(time.RFC3339Nano))
			i = j - 1 // one report per crowded stretch
		}
	}
	return bad
}

func checkAdmittedOnce(o roomObservation) []string {
	var bad []string
	byIndex := map[int64]string{}
	n, unknown := int64(0), int64(0)
	for _, b := range o.buyers {
		if b.failure != "" && b.admittedAt.IsZero() {
			unknown++ // its wait ended in an error: it may have been admitted unseen
		}
		if b.admissions > 1 {
			bad = appendBad(bad, "buyer %s admitted %d times", b.user, b.admissions)
		}
		if !b.admittedAt.IsZero() {
			n++
		}
		if b.index > 0 {
			if other, ok := byIndex[b.index]; ok {
				bad = appendBad(bad, "index %d given to %s and %s", b.index, other, b.user)
			}
			byIndex[b.index] = b.user
		}
	}
	if o.admitted < n || o.admitted > n+unknown {
		bad = appendBad(bad, "the room's serving counter says %d admitted; the buyers saw %d admissions (and %d buyers failed before seeing theirs)", o.admitted, n, unknown)
	}
	return bad
}

func checkDraw(o roomObservation) []string {
	var bad []string
	if o.seed == "" {
		return append(bad, "no seed published after the start")
	}
	seed, err := hex.DecodeString(o.seed)
	if err != nil {
		return append(bad, "seed: "+err.Error())
	}
	if c := seckill.RoomCommitment(seed); c != o.commitmentBefore || c != o.commitment {
		bad = appendBad(bad, "hex(SHA-256(seed)) = %s; the commitment read before the start was %s, after %s", c, o.commitmentBefore, o.commitment)
	}
	if int64(len(o.entrants)) != o.preQueue {
		bad = appendBad(bad, "%d entrants published; the room's pre_queue is %d", len(o.entrants), o.preQueue)
	}
	published := make(map[string]bool, len(o.entrants))
	for _, e := range o.entrants {
		published[e] = true
	}
	if o.order != seckill.RoomDraw {
		return bad
	}
	place := map[string]int64{}
	for i, e := range seckill.DrawOrder(seed, o.entrants) {
		place[e] = int64(i + 1)
	}
	for _, b := range o.buyers {
		switch {
		case !b.joined || b.index == 0:
		case b.drawn && !published[b.entrant]:
			bad = appendBad(bad, "buyer %s joined before the start (entrant %s) but is not in the published list", b.user, b.entrant)
		case b.drawn && place[b.entrant] != b.index:
			bad = appendBad(bad, "buyer %s has index %d; the draw places it %d", b.user, b.index, place[b.entrant])
		case !b.drawn && published[b.entrant]:
			bad = appendBad(bad, "buyer %s joined after the start but is in the published list", b.user)
		case !b.drawn && b.index <= o.preQueue:
			bad = appendBad(bad, "buyer %s joined after the start with index %d, within the pre-queue's %d", b.user, b.index, o.preQueue)
		}
	}
	return bad
}

func checkAdmissionOrder(o roomObservation) []string {
	var bad []string
	var indexed []*roomBuyer
	for _, b := range o.buyers {
		if b.index > 0 {
			indexed = append(indexed, b)
		}
	}
	slices.SortFunc(indexed, func(a, b *roomBuyer) int { return cmp.Compare(a.index, b.index) })
	// Admitted: exactly a prefix of the order, admitted_at never falling with the index.
	var last time.Time
	seenWaiting := ""
	for _, b := range indexed {
		if b.admittedAt.IsZero() {
			if seenWaiting == "" && b.failure == "" { // a failed buyer may have been admitted unseen
				seenWaiting = b.user
			}
			continue
		}
		if seenWaiting != "" {
			bad = appendBad(bad, "buyer %s (index %d) admitted while %s, before it, was not", b.user, b.index, seenWaiting)
		}
		if b.admittedAt.Before(last) {
			bad = appendBad(bad, "buyer %s (index %d) admitted at %s, before the index ahead of it (%s)", b.user, b.index,
				b.admittedAt.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
		}
		last = b.admittedAt
	}
	// After the pre-queue (and in a fifo room, everyone): in order of arrival.
	var prev *roomBuyer
	for _, b := range indexed {
		if b.drawn && o.order == seckill.RoomDraw {
			continue
		}
		if prev != nil && b.joinedAt.Before(prev.joinedAt) {
			bad = appendBad(bad, "buyer %s (index %d) joined at %s, before %s (index %d) at %s", b.user, b.index,
				b.joinedAt.Format(time.RFC3339Nano), prev.user, prev.index, prev.joinedAt.Format(time.RFC3339Nano))
		}
		prev = b
	}
	return bad
}

func checkBypass(o roomObservation) []string {
	bad := slices.Clone(o.bypass)
	for _, b := range o.buyers {
		if b.bought && b.admittedAt.IsZero() {
			bad = appendBad(bad, "buyer %s bought without an admission", b.user)
		}
	}
	return bad
}

// toldAt is when the buyer was told: its stream's event's arrival at the buyer's socket when
// known, else when the bench read it (docs/DECISIONS.md "A buyer is told when the close
// reaches the buyer's socket").
func (b *roomBuyer) toldAt() time.Time {
	if !b.arrived.IsZero() {
		return b.arrived
	}
	return b.told
}

func checkTold(o roomObservation) []string {
	var bad []string
	for _, b := range o.buyers {
		if !b.joined || !b.admittedAt.IsZero() || b.by == "join" || b.failure != "" && b.told.IsZero() {
			continue // admitted, joined after the close and told by the join's answer, or failed (buyers_finished)
		}
		switch {
		case !o.soldOut:
			// The stock was not all paid: the room stays open; nobody is owed a "sold out".
		case b.told.IsZero():
			bad = appendBad(bad, "buyer %s was never told the sale sold out (last state %q)", b.user, b.state)
		case o.closedAt.IsZero():
		case b.toldAt().Sub(o.closedAt) > o.toldWithin:
			how := b.by
			if b.atConnect {
				how += ", connected after the close"
			}
			bad = appendBad(bad, "buyer %s told %s after the room closed (closed_at; by %s; read %s after it)", b.user,
				b.toldAt().Sub(o.closedAt).Round(time.Millisecond), how, b.told.Sub(o.closedAt).Round(time.Millisecond))
		}
	}
	if o.soldOut && o.closedAt.IsZero() {
		bad = appendBad(bad, "every unit was paid and the room publishes no closed_at")
	}
	return bad
}

// spearman is the rank correlation of x and y (ties given their average rank): Pearson's
// correlation of the ranks. 0 when either is constant or empty (no order to correlate; and
// JSON has no NaN).
func spearman(x, y []float64) float64 {
	rx, ry := ranks(x), ranks(y)
	n := float64(len(x))
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && v[idx[j]] == v[idx[i]] {
			j++
		}
		avg := float64(i+j-1)/2 + 1
		for k := i; k < j; k++ {
			r[idx[k]] = avg
		}
		i = j
	}
	return r
}

// quantile is the q-quantile (0…1) of d, nearest rank; 0 when empty.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// maxPerSecond is the most of ts in any one-second window starting at one of them.
func maxPerSecond(ts []time.Time) int {
	s := slices.Clone(ts)
	slices.SortFunc(s, time.Time.Compare)
	most, j := 0, 0
	for i := range s {
		for j < len(s) && s[j].Sub(s[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	return most
}
