package loadgen

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/seckill-go/seckill/client"
)

// Audit is a sale's audit (GET /api/v1/sales/{id}/audit), which the checks read. The refunds
// owed, by where they stand (Database.RefundsRequired…), move while refunders work, so the
// instances' audits are compared without them.
type Audit = client.Audit

// settledCounts are the database's counts that no background work changes once a sale has
// settled, which every instance's audit must agree on.
func settledCounts(a Audit) [4]int {
	d := a.Database
	return [4]int{d.Sold, d.PaidUnits, d.Refunds, d.PaidOrders}
}

// InstanceAudit is one target's audit at the end of a run, or why none could be had.
type InstanceAudit struct {
	Target string `json:"target"`
	Audit  Audit  `json:"-"`
	// Err is set when the instance gave no audit: it was unreachable, or still answered 503
	// (or an error) after a client's retries. Its invariants could not be checked.
	Err string `json:"error,omitempty"`
}

// Verdict is the outcome of Check: every invariant it could check, what failed, and what could
// not be verified (an instance that gave no audit). OK only if nothing failed and everything
// was verified.
type Verdict struct {
	OK         bool     `json:"ok"`
	Violations []string `json:"violations"`
	Unverified []string `json:"unverified"`
	Checked    []string `json:"checked"`
	// Failed are the ids (the Check* constants) of the checks that found a violation, for the
	// programs that read the JSON report: they decide on these, never on a violation's wording.
	Failed []string `json:"failed"`
	// NotExercised are the checks that had nothing to check in this run (no two queued buyers
	// seen to the end, one target to compare with others): neither passed nor failed, and said
	// so, so that a run that never tested the queue does not read as having proved it.
	NotExercised []string `json:"not_exercised"`
}

// Word is the verdict in one word: ok, FAILED (a violation), or UNVERIFIED (no violation, but
// an instance gave no audit).
func (v Verdict) Word() string {
	switch {
	case len(v.Violations) > 0:
		return "FAILED"
	case len(v.Unverified) > 0:
		return "UNVERIFIED"
	}
	return "ok"
}

// The ids of Check's checks, as Verdict.Failed lists them.
const (
	CheckAudits        = "audits"          // every instance's audit is ok
	CheckAgreement     = "instances_agree" // the instances' audits agree on the database's counts
	CheckPerUser       = "per_user_limit"  // nobody told of more paid units than the limit
	CheckFIFO          = "fifo"            // queued buyers served in arrival order
	CheckSoldOutEarly  = "sold_out_early"  // no sold_out while a unit was free or held
	CheckReplays       = "replays"         // idempotent retries return the same reservation
	CheckOversold      = "oversold"        // nothing oversold
	CheckFalseSellOut  = "false_sell_out"  // told sold_out or demand above supply ⇒ everything sold
	CheckPaymentsBegun = "payments_begun"  // payments could be made
	CheckPayments      = "payments"        // every payment answered 200 is one paid order or refund
)

// checker builds a Verdict: check starts a check, bad records a violation of the current one.
type checker struct {
	v       *Verdict
	current string
}

func (c *checker) check(id, what string) {
	c.current = id
	c.v.Checked = append(c.v.Checked, what)
}

func (c *checker) bad(format string, args ...any) {
	c.v.Violations = append(c.v.Violations, fmt.Sprintf(format, args...))
	if !slices.Contains(c.v.Failed, c.current) {
		c.v.Failed = append(c.v.Failed, c.current)
	}
}

// Add records a check made outside Check (the bench's own, on the Stripe stand-in's record,
// say): what it checked, under id, and the violations it found, if any.
func (v *Verdict) Add(id, what string, violations []string) {
	c := &checker{v: v}
	c.check(id, what)
	for _, bad := range violations {
		c.bad("%s", bad)
	}
	v.OK = len(v.Violations) == 0 && len(v.Unverified) == 0
}

// Unverify records something that could not be verified: the verdict is then UNVERIFIED
// (not ok) unless something failed.
func (v *Verdict) Unverify(why string) {
	v.Unverified = append(v.Unverified, why)
	v.OK = false
}

// SaleFacts is what the checks need to know of the sale.
type SaleFacts struct {
	Sellable     int
	PerUserLimit int
	Sold         int // engine's sold units after the run settled
}

// Check verifies the invariants from the generator's own records and the audits of every
// instance (one per target, in order; one that gave no audit is reported as unverified, and
// the database's counts come from the first that did):
//   - each instance's audit is ok, and they agree on the database's counts;
//   - nothing is oversold (engine and database sold ≤ sellable, paid units == sold);
//   - no false sell-out: if a buyer was told sold_out, or the paying demand exceeded the
//     sellable units, every sellable unit is sold; and every sold_out answer came when no unit
//     was free or held (soldOutTooEarly);
//   - nobody was told of more paid units than the per-user limit;
//   - every payment a target answered 200 (webhook mode) is exactly one paid order or one
//     refund in the database;
//   - FIFO: of two queued buyers whose outcome was seen, the later arrival is not granted a
//     unit before the earlier one, and never while the earlier one is rejected;
//   - idempotent retries returned the reservation they retried.
func Check(res *Result, sale SaleFacts, audits []InstanceAudit, payers int) Verdict {
	v := Verdict{Violations: []string{}, Unverified: []string{}, Failed: []string{}, NotExercised: []string{}}
	c := &checker{v: &v}
	check, bad := c.check, c.bad

	check(CheckAudits, "every instance's audit is ok")
	first, audited := -1, 0
	for i, a := range audits {
		if a.Err != "" {
			v.Unverified = append(v.Unverified, fmt.Sprintf("instance %d (%s) gave no audit: %s", i+1, a.Target, a.Err))
			continue
		}
		audited++
		if first < 0 {
			first = i
		}
		if !a.Audit.OK {
			bad("instance %d: audit not ok: %v", i+1, a.Audit.Violations)
		}
	}
	if audited >= 2 {
		check(CheckAgreement, "instances agree on the database's counts")
		for i, a := range audits {
			if a.Err == "" && settledCounts(a.Audit) != settledCounts(audits[first].Audit) {
				bad("instances %d and %d disagree on the database's counts: %+v vs %+v", first+1, i+1, audits[first].Audit.Database, a.Audit.Database)
			}
		}
	} else {
		v.NotExercised = append(v.NotExercised, fmt.Sprintf("instances agree on the database's counts: %d instance gave an audit, nothing to compare it with", audited))
	}
	if len(audits) == 0 {
		bad("no audit")
		return finish(v)
	}
	if first < 0 {
		// The generator's own records are still checked below; the database's side is not.
		v.Unverified = append(v.Unverified, "no instance gave an audit: nothing that needs the database's counts was checked")
	} else {
		checkDatabase(c, res, sale, audits[first].Audit, payers)
	}

	check(CheckPerUser, "nobody told of more paid units than the per-user limit")
	paid := 0
	for user, n := range res.PaidUnits {
		paid += n
		if n > sale.PerUserLimit {
			bad("user %s was told of %d paid units; the limit is %d", user, n, sale.PerUserLimit)
		}
	}
	if paid > sale.Sellable {
		bad("buyers were told of %d paid units; only %d are sellable", paid, sale.Sellable)
	}

	seen, pairs, out := FIFOViolations(res.Queue)
	if pairs > 0 {
		check(CheckFIFO, fmt.Sprintf("FIFO: queued buyers served in arrival order (%d pairs of %d queued buyers)", pairs, seen))
	} else {
		v.NotExercised = append(v.NotExercised, fmt.Sprintf("FIFO: no queued buyer was granted a unit after another queued buyer was seen to the end (%d seen): the queue was not tested", seen))
	}
	for _, o := range out[:min(len(out), 5)] {
		bad("FIFO: %s", o)
	}
	if len(out) > 5 {
		bad("FIFO: … and %d more pairs out of order (%d pairs of %d queued buyers checked)", len(out)-5, pairs, seen)
	}

	check(CheckSoldOutEarly, "no sold_out answered while a unit was free or held (none received before a later buy held or queued, or a later payment paid)")
	if n, first := soldOutTooEarly(res); n > 0 {
		bad("false sell-out: %d buyers were told sold_out (the first %s into the run) while a unit was still free or held: a buy sent %s into the run was held or queued, or a payment sent then paid",
			n, first.Round(time.Millisecond), res.UnsoldAt.Round(time.Millisecond))
	}

	check(CheckReplays, "idempotent retries return the same reservation")
	if res.ReplayMismatch > 0 {
		bad("%d idempotent retries returned a different reservation", res.ReplayMismatch)
	}
	return finish(v)
}

// checkDatabase checks the invariants that need the database's counts, from audit.
func checkDatabase(c *checker, res *Result, sale SaleFacts, audit Audit, payers int) {
	check, bad := c.check, c.bad
	db := audit.Database

	check(CheckOversold, "nothing oversold (engine and database sold ≤ sellable; paid units == sold)")
	if sale.Sold > sale.Sellable || db.Sold > sale.Sellable {
		bad("oversold: engine sold %d, database sold %d, sellable %d", sale.Sold, db.Sold, sale.Sellable)
	}
	if db.PaidUnits != db.Sold {
		bad("database: paid reservations hold %d units but sales.sold is %d", db.PaidUnits, db.Sold)
	}

	check(CheckFalseSellOut, "no false sell-out (told sold_out or demand above supply ⇒ everything sold)")
	if res.SoldOut > 0 && db.Sold < sale.Sellable {
		bad("false sell-out: %d buyers were told sold_out, but only %d of %d units sold", res.SoldOut, db.Sold, sale.Sellable)
	} else if payers >= sale.Sellable && db.Sold < sale.Sellable && res.GaveUp == 0 {
		bad("%d buyers wanted to pay for %d units, but only %d sold", payers, sale.Sellable, db.Sold)
	}

	if payers > 0 && res.Held > 0 {
		check(CheckPaymentsBegun, "payments could be made (a run in which nobody could pay proves nothing)")
		if res.PaymentsBegun == 0 {
			bad("%d buyers held a unit and %d meant to pay, but no payment was ever started", res.Held, payers)
		}
	}

	if len(res.Payments) > 0 {
		check(CheckPayments, "every payment answered 200 is one paid order or one refund in the database")
		if got := db.PaidOrders + db.Refunds; got != len(res.Payments) {
			bad("the targets answered 200 for %d payments; the database records %d paid + %d refunds",
				len(res.Payments), db.PaidOrders, db.Refunds)
		}
	}
}

// soldOutTooEarly counts the sold_out answers received before Result.UnsoldAt, and gives the
// first. A sold_out answer says that no unit was free or held when the engine decided it, so
// that every unit was sold; the bench's sale is never restocked and its sold count never goes
// down, so from then on no buy can be held or queued and no payment can pay. A request sent
// after the answer was received that was held, queued or paid proves the answer false. It costs
// the generator one time per sold_out answer, and it misses only a false sell-out whose free
// units all sold while its answer was on the wire, or never sold (the end-of-run check above).
func soldOutTooEarly(res *Result) (n int, first time.Duration) {
	for _, at := range res.SoldOutAt {
		if at < res.UnsoldAt {
			if n == 0 || at < first {
				first = at
			}
			n++
		}
	}
	return n, first
}

func finish(v Verdict) Verdict {
	v.OK = len(v.Violations) == 0 && len(v.Unverified) == 0
	return v
}

// FirstAudit is the audit of the first instance that gave one, and whether any did.
func FirstAudit(audits []InstanceAudit) (Audit, bool) {
	for _, a := range audits {
		if a.Err == "" {
			return a.Audit, true
		}
	}
	return Audit{}, false
}

// FIFOViolations checks every pair of queued buyers whose outcome was seen (invariant 6): if
// the later arrival was granted a unit, the earlier one was granted one no later, and not
// rejected. Buyers whose outcome was not seen (neither granted nor rejected) are left out. It is
// the one FIFO checker of the bench and of the multi-instance tests; TestFIFOCatchesDisorder is
// its negative control.
func FIFOViolations(queued []QueuedBuyer) (seen, pairs int, bad []string) {
	qs := slices.DeleteFunc(slices.Clone(queued), func(q QueuedBuyer) bool { return q.Granted.IsZero() && !q.Rejected })
	slices.SortFunc(qs, func(a, b QueuedBuyer) int { return cmp.Compare(a.Seq, b.Seq) })
	for i, a := range qs {
		for _, b := range qs[i+1:] {
			if b.Granted.IsZero() {
				continue
			}
			pairs++
			if a.Rejected || a.Granted.After(b.Granted) {
				what := "rejected"
				if !a.Rejected {
					what = "granted at " + a.Granted.Format(time.StampMilli)
				}
				bad = append(bad, fmt.Sprintf("queued buyer #%d was %s, but #%d, queued after it, was granted at %s",
					a.Seq, what, b.Seq, b.Granted.Format(time.StampMilli)))
			}
		}
	}
	return len(qs), pairs, bad
}

// Payers is how many of the first n buyers pay while their hold lasts (promptly, or after an
// idempotent retry): if they are at least the sellable units, every unit must end up sold.
func Payers(n int, seed uint64, mix Mix) int { return PayersFrom(0, n, seed, mix) }

// PayersFrom is Payers for the n buyers numbered from first (Config.FirstUser).
func PayersFrom(first, n int, seed uint64, mix Mix) int {
	p := 0
	for i := first; i < first+n; i++ {
		switch BehaviorOf(UserName(i), seed, mix) {
		case PayPromptly, Retry:
			p++
		}
	}
	return p
}
