package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw"
)

// benchOptions is one `seckill bench` run (and the demo's preset of it).
type benchOptions struct {
	targets       []string
	adminToken    string
	authSecret    string
	paymentSecret string // the built-in webhook scheme's: the generator signs its webhooks (payThrough)

	// stripeSecret and stripeStandIn, both set, have buyers pay at Stripe Checkout on the
	// targets' Stripe gateway, the generator playing the buyers and Stripe (loadgen.StripeConfig).
	stripeSecret, stripeStandIn string

	saleID      string
	units       int
	segments    int // the sale's segments (docs/API.md "Segments"; the Redis engine's)
	perUser     int
	hold        time.Duration
	buyers      int
	concurrency int
	rate        float64
	mix         loadgen.Mix
	seed        uint64
	deadline    time.Duration
	asJSON      bool
	report      string // Markdown report file (the SVG chart goes next to it)
	title       string
	// auditWait bounds the final audit: how long the instances' audits may take to agree and
	// be ok, and to answer at all (503s are retried as Retry-After says, an unreachable
	// instance a few times) before the report names what it could not verify.
	auditWait time.Duration
	// sales, spread and zipf make a flash-sale day (bench_sales.go): sales sales (1: the single
	// sale, as always), their starts spread over spread, the crowd shared over them by a Zipf law
	// of exponent zipf.
	sales  int
	spread time.Duration
	zipf   float64
	// settle, if set, is waited for after the crowd is done and before the sale is audited
	// (the demo waits for its gateway's last deliveries); extraChecks adds the caller's own
	// checks to the verdict (the demo checks its gateway's count of payments).
	settle      func()
	extraChecks func(loadgen.Audit, *loadgen.Verdict)
}

// bench drives running seckill instances with a crowd of buyers and checks the invariants.
// It starts no instance (--calibrate's reference is a bare handler), so it cannot switch their
// per-address bounds off: its whole crowd is one client address to them, and the targets of a
// load test from one machine are to be run with `--max-conns-per-addr -1 --max-inflight-per-addr
// -1` (README, docs/SECURITY.md), or past a quarter of an instance's bounds it measures those
// (its buyers retry the 429s, so the run still finishes). demo, which starts its own instance,
// switches them off (httpLimits.withoutPerAddr).
func bench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "strategies" {
		return benchStrategies(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	env := envOr(getenv)
	var o benchOptions
	targets := fs.String("target", env("SECKILL_BENCH_TARGET", "http://127.0.0.1:8080"), "instance URL(s), comma-separated (SECKILL_BENCH_TARGET)")
	fs.StringVar(&o.adminToken, "admin-token", env("SECKILL_ADMIN_TOKEN", ""), "admin token of the targets (SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&o.authSecret, "auth-secret", env("SECKILL_AUTH_SECRET", ""), "auth secret of the targets, to mint buyers' tokens (SECKILL_AUTH_SECRET)")
	fs.StringVar(&o.paymentSecret, "payment-secret", env("SECKILL_PAYMENT_SECRET", ""), "webhook secret of the targets' built-in webhook scheme: when they take payments that way, the generator signs them; targets with the mock or Stripe gateway are paid through it (SECKILL_PAYMENT_SECRET)")
	fs.StringVar(&o.stripeSecret, "stripe-webhook-secret", env("SECKILL_STRIPE_WEBHOOK_SECRET", ""), "with --stripe-stand-in: the targets run --gateway stripe; the generator signs Stripe's events with this secret (SECKILL_STRIPE_WEBHOOK_SECRET)")
	fs.StringVar(&o.stripeStandIn, "stripe-stand-in", env("SECKILL_BENCH_STRIPE_STAND_IN", ""), "URL of the Stripe stand-in the targets' --stripe-api-url points at, where buyers pay and refunds are counted (SECKILL_BENCH_STRIPE_STAND_IN)")
	fs.StringVar(&o.saleID, "sale", "", "id of the sale to create (default bench-<time>)")
	fs.IntVar(&o.units, "units", 100, "sellable units")
	fs.IntVar(&o.perUser, "per-user", 1, "per-user limit")
	fs.IntVar(&o.segments, "segments", 1, fmt.Sprintf("split the sale's stock into this many segments (1 to %d; more than 1 needs the Redis engine, and helps on a Redis Cluster)", seckill.MaxSegments))
	fs.DurationVar(&o.hold, "hold", 2*time.Second, "hold duration (whole seconds)")
	fs.IntVar(&o.buyers, "buyers", 3000, "simulated buyers")
	fs.IntVar(&o.concurrency, "concurrency", 64, "closed loop: buyers in flight")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: buyers arriving per second (0: closed loop)")
	mix := fs.String("mix", "cancel=10,abandon=20,late=10,retry=10", "percent of buyers that cancel, abandon their hold, pay late, retry their buy; the rest pay")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for the crowd's behaviour")
	fs.DurationVar(&o.deadline, "deadline", 3*time.Minute, "longest the crowd may take")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&o.report, "report", "", "also write a Markdown report to this file, with an SVG chart next to it")
	fs.DurationVar(&o.auditWait, "audit-wait", defaultAuditWait, "longest the final audit may take (instances catching up, 503s retried); an instance without an audit by then is reported as unverified")
	fs.IntVar(&o.sales, "sales", 1, "run this many sales at once, each with --units, their starts spread over --spread and the crowd (--buyers) over them by a Zipf law; a verdict per sale and overall")
	fs.DurationVar(&o.spread, "spread", 10*time.Second, "with --sales: the sales' starts are spread evenly over this")
	fs.Float64Var(&o.zipf, "zipf", 1.1, "with --sales: exponent of the Zipf law that shares the crowd over the sales (above 1; higher: hotter few)")
	var room roomOptions
	withRoom := fs.Bool("waiting-room", false, "run the start instant of a sale with a waiting room, then the same crowd at the same sale without one, side by side (tuned by --admit-rate, --max-active, --pow-bits, --prequeue, --arrival, --lead, --streams, --poll, --told-within, --no-room-run, --tell-reference)")
	fs.IntVar(&room.admitRate, "admit-rate", 500, "waiting room: admissions per second (0: none, then --max-active)")
	fs.IntVar(&room.maxActive, "max-active", 0, "waiting room: most admitted buyers without an outcome (0: no bound)")
	fs.IntVar(&room.powBits, "pow-bits", 0, "waiting room: proof of work per join, in bits (0: none)")
	fs.IntVar(&room.prequeue, "prequeue", 1000, "waiting room: buyers that join before the start (the draw's)")
	fs.DurationVar(&room.arrival, "arrival", 5*time.Second, "waiting room: the other buyers arrive evenly over this from the start")
	fs.DurationVar(&room.lead, "lead", 5*time.Second, "waiting room: from the sale's creation to its start; the pre-queue joins in its first half")
	fs.IntVar(&room.streams, "streams", 900, "waiting room: live ticket streams per target (keep under the targets' --max-streams); the other buyers poll their ticket")
	fs.DurationVar(&room.poll, "poll", 500*time.Millisecond, "waiting room: longest pause between a polling buyer's reads of its ticket")
	fs.DurationVar(&room.toldWithin, "told-within", time.Second, "waiting room: every buyer left waiting must be told sold out within this of the last unit paid")
	noRoomRun := fs.Bool("no-room-run", true, "waiting room: also run the same crowd at the same sale without a room, side by side")
	fs.BoolVar(&room.tellRef, "tell-reference", true, "waiting room: after the room's run, time this client reading as many live streams told at once by a bare SSE server in a process of its own (the tell's floor on this machine)")
	cal := fs.Bool("calibrate", false, "compare the buy path's rate with a bare net/http handler instead (tuned by --duration, --rounds, --clients)")
	calDuration := fs.Duration("duration", 5*time.Second, "calibrate: length of each flood")
	calRounds := fs.Int("rounds", 3, "calibrate: rounds, alternating target and reference")
	calClients := fs.Int("clients", 64, "calibrate: client connections")
	calRedis := fs.String("calibrate-redis", "", "calibrate: also flood the bare handler with one Redis script call per buy, on this Redis URL (a key of its own)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimRight(strings.TrimSpace(t), "/"); t != "" {
			o.targets = append(o.targets, t)
		}
	}
	if len(o.targets) == 0 {
		return errors.New("bench: no --target")
	}
	var err error
	if o.mix, err = parseMix(*mix); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if *withRoom {
		room.noRoom = *noRoomRun
		return runRoomBench(ctx, o, room, stdout, stderr)
	}
	if *cal {
		return calibrate(ctx, o, *calDuration, *calRounds, *calClients, *calRedis, stdout, stderr)
	}
	if o.sales > 1 {
		return runManySales(ctx, o, stdout, stderr)
	}
	return runBench(ctx, o, stdout, stderr)
}

func (o *benchOptions) validate() error {
	switch {
	case o.adminToken == "" || o.authSecret == "":
		return errors.New("bench: --admin-token and --auth-secret are needed (or SECKILL_ADMIN_TOKEN, SECKILL_AUTH_SECRET): the generator creates its sale and mints its buyers' tokens")
	case o.hold < time.Second || o.hold%time.Second != 0:
		return errors.New("bench: --hold must be a whole number of seconds, at least 1s")
	case o.units < 1 || o.buyers < 1 || o.perUser < 1 || o.concurrency < 1 || o.rate < 0:
		return errors.New("bench: --units, --buyers, --per-user and --concurrency must be at least 1, --rate at least 0")
	case o.auditWait < 0:
		return errors.New("bench: --audit-wait must not be negative")
	case o.sales < 0 || o.sales > maxBenchSales || o.spread < 0 || o.sales > 1 && !(o.zipf > 1):
		return fmt.Errorf("bench: --sales must be 1 to %d, --spread not negative, --zipf above 1", maxBenchSales)
	case o.segments == 0:
		o.segments = 1 // a caller that builds benchOptions itself (the demo) leaves it unset
	case o.segments < 1 || o.segments > seckill.MaxSegments:
		return fmt.Errorf("bench: --segments must be 1 to %d", seckill.MaxSegments)
	}
	if o.auditWait == 0 {
		o.auditWait = defaultAuditWait
	}
	if o.sales == 0 {
		o.sales = 1 // as segments: a caller's own benchOptions
	}
	if o.saleID == "" {
		o.saleID = fmt.Sprintf("bench-%d", time.Now().UnixMilli())
	}
	return nil
}

// parseMix reads "cancel=10,abandon=20,late=10,retry=10".
func parseMix(s string) (loadgen.Mix, error) {
	var m loadgen.Mix
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || err != nil {
			return m, fmt.Errorf("bench: --mix %q: want name=percent, e.g. cancel=10", part)
		}
		switch strings.TrimSpace(k) {
		case "cancel":
			m.Cancel = n
		case "abandon":
			m.Abandon = n
		case "late":
			m.PayLate = n
		case "retry":
			m.Retry = n
		default:
			return m, fmt.Errorf("bench: --mix: unknown behaviour %q (cancel, abandon, late, retry)", k)
		}
	}
	if !m.Valid() {
		return m, errors.New("bench: --mix: each share 0–100, at most 100 in all")
	}
	return m, nil
}

// runBench creates the sale, lets the crowd buy, waits until the sale has settled and every
// instance's audit has caught up, and reports; an invariant that does not hold is an error.
func runBench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	start := time.Now().UTC().Add(time.Second).Truncate(time.Millisecond)
	sale, err := o.admin(0).CreateSale(ctx, client.NewSale{
		ID: o.saleID, Name: "seckill bench " + o.saleID, PriceCents: 999, Stock: o.units,
		StartsAt: start, EndsAt: start.Add(10 * time.Minute),
		PerUserLimit: o.perUser, HoldSeconds: int(o.hold.Seconds()),
		Listed:   client.Ptr(false), // a load test's sale is not for shoppers: kept off the storefront's list
		Segments: o.segments,
	})
	if err != nil {
		if _, isNetErr := errors.AsType[net.Error](err); isNetErr {
			return fmt.Errorf("create sale: no server answers at %s (start one with seckill serve --dev, or point --target at yours): %w", o.targets[0], err)
		}
		return fmt.Errorf("create sale: %w", err)
	}
	cfg := loadgen.Config{
		Targets: o.targets, SaleID: o.saleID, Buyers: o.buyers, Concurrency: o.concurrency, Rate: o.rate,
		Mix: o.mix, Seed: o.seed, Hold: o.hold, Deadline: o.deadline,
		Token: func(u string) (string, error) {
			return httpapi.MintToken([]byte(o.authSecret), u, time.Now(), time.Hour)
		},
	}
	gw, err := fetchAudit(ctx, o.targets[0], o.saleID, o.adminToken, time.Now().Add(o.auditWait))
	if err != nil {
		return fmt.Errorf("ask the target which payment gateway it runs (the sale's audit): %w", err)
	}
	if err := o.payThrough(gw.Gateway, &cfg); err != nil {
		return err
	}
	title := o.title
	if title == "" {
		title = fmt.Sprintf("seckill bench: %d units, %d per user, %s holds", o.units, o.perUser, o.hold)
		if o.segments > 1 {
			title += fmt.Sprintf(", %d segments", o.segments)
		}
	}
	if !o.asJSON {
		fmt.Fprintf(stdout, "%s\n%s\nagainst %s\n", title, cfg.Describe(), strings.Join(o.targets, ", "))
	}
	bar := newProgressBar(stderr)
	cfg.Progress = bar.update
	res, err := loadgen.Run(ctx, cfg)
	bar.finish()
	if err != nil {
		return err
	}
	// The last holds expire, late payments land, the streams drain; then every instance's
	// audit must be ok.
	fmt.Fprintf(stderr, "crowd done in %s; waiting for the last holds to expire and the last payments to land…\n",
		res.Elapsed.Round(100*time.Millisecond))
	if o.settle != nil {
		o.settle()
	}
	sale = settleSale(ctx, o, sale)
	refunds := settleRefunds(ctx, o)
	fmt.Fprintf(stderr, "auditing the sale on %d instance(s) (up to %s)…\n", len(o.targets), o.auditWait)
	audits := auditAll(ctx, o)
	facts := loadgen.SaleFacts{Sellable: sale.StockState.Sellable, PerUserLimit: o.perUser, Sold: sale.StockState.Sold}
	verdict := loadgen.Check(res, facts, audits, loadgen.Payers(o.buyers, o.seed, o.mix))
	first, haveAudit := loadgen.FirstAudit(audits)
	if cfg.Stripe != nil {
		verdict.Add("stripe_refunds", "every refund owed paid back exactly once, and no paid payment refunded (the Stripe stand-in's record)",
			stripeRefundChecks(ctx, o, res, refunds))
	}
	if o.extraChecks != nil && haveAudit {
		o.extraChecks(first, &verdict)
	}
	rp := loadgen.Report{Title: title, Config: cfg.Describe(), Sale: facts, Result: res, Audit: first, Instances: audits, Verdict: verdict,
		Targets: o.targets, SaleID: o.saleID, Date: start, Version: versionString()}
	if first.Database.RefundsFailed > 0 {
		if rp.RefundsByHand, err = refundsByHand(ctx, o); err != nil {
			verdict.Unverified = append(verdict.Unverified, "which failed refunds are owed by hand: "+err.Error())
			verdict.OK = false
			rp.Verdict = verdict
		}
	}
	if o.asJSON {
		err = rp.WriteJSON(stdout)
	} else {
		fmt.Fprintln(stdout)
		err = rp.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if o.report != "" {
		if err := writeReport(rp, o.report); err != nil {
			return err
		}
		if !o.asJSON {
			fmt.Fprintf(stdout, "report: %s\n", o.report)
		}
	}
	switch {
	case len(verdict.Violations) > 0:
		return exitError("invariant check failed")
	case !verdict.OK:
		return exitError(fmt.Sprintf("the run could not be fully verified: %s", strings.Join(verdict.Unverified, "; ")))
	}
	return nil
}

// admin is a client of the i-th target (round robin) with the admin token.
func (o benchOptions) admin(i int) *client.Client {
	return client.New(o.targets[i%len(o.targets)], client.WithToken(o.adminToken))
}

// payThrough sets how the crowd pays, by the gateway the targets take payments with (their
// audit's gateway; docs/PAYMENTS.md), as the shop's buyers would: the mock's through POST /pay
// (whatever secrets the environment holds: the dev secrets file sets a payment secret too);
// Stripe's on the stand-in's page, the generator playing Stripe's events; the built-in webhook
// scheme's by webhooks the generator signs, as the shop's payment service would. A target
// that does not say (an older seckill) is paid as the flags say.
func (o benchOptions) payThrough(gateway string, cfg *loadgen.Config) error {
	var stripe *loadgen.StripeConfig
	if o.stripeSecret != "" && o.stripeStandIn != "" {
		stripe = &loadgen.StripeConfig{WebhookSecret: o.stripeSecret, StandIn: strings.TrimRight(o.stripeStandIn, "/")}
	}
	switch gateway {
	case payment.MockName:
	case stripegw.Name:
		if stripe == nil {
			return errors.New("bench: the targets take payments through Stripe: pass --stripe-stand-in (the Stripe stand-in their --stripe-api-url points at, e.g. seckill stripe-rehearse's) and --stripe-webhook-secret (SECKILL_STRIPE_WEBHOOK_SECRET)")
		}
		cfg.Stripe = stripe
	case payment.WebhookName:
		if o.paymentSecret == "" {
			return fmt.Errorf("bench: %w", loadgen.ErrNoPaymentPath)
		}
		cfg.PaymentSecret = []byte(o.paymentSecret)
	case "":
		if o.paymentSecret != "" {
			cfg.PaymentSecret = []byte(o.paymentSecret)
		}
		cfg.Stripe = stripe
	default:
		return fmt.Errorf("bench: the targets take payments through %q, which the bench cannot pay through", gateway)
	}
	return nil
}

// settleRefunds waits (up to --audit-wait) until no refund owed in the sale is still open
// (refund_required or refund_pending): the refunders pay each back, or give up on it, within
// seconds. It returns the first target's last audit.
func settleRefunds(ctx context.Context, o benchOptions) loadgen.Audit {
	var a loadgen.Audit
	by := time.Now().Add(o.auditWait)
	for {
		var err error
		a, err = fetchAudit(ctx, o.targets[0], o.saleID, o.adminToken, by)
		open := a.Database.RefundsRequired + a.Database.RefundsPending
		if err == nil && open == 0 || time.Now().After(by) || !wait.Sleep(ctx, 250*time.Millisecond) {
			return a
		}
	}
}

// refundsByHand counts the sale's refunds owed through the built-in webhook scheme, which
// cannot pay money back (docs/PAYMENTS.md): they end refund_failed at once, on the shop's list
// (GET /api/v1/refunds) to be paid back by hand, and are reported as that, not as failures.
// It reads the list's first 1 000 (the most it answers), oldest first.
func refundsByHand(ctx context.Context, o benchOptions) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	refunds, err := o.admin(0).Refunds(ctx, seckill.RefundFailed, 1000)
	n := 0
	for _, r := range refunds {
		if r.SaleID == o.saleID && r.Gateway == payment.WebhookName {
			n++
		}
	}
	return n, err
}

// stripeRefundChecks checks, once the sale's refunds are settled (settleRefunds), against the
// Stripe stand-in's record, that each was paid back exactly once: every payment the targets
// answered refund_required has one refund at Stripe, no paid one has any, and the database
// counts each as refunded (none refund_failed, none still open).
func stripeRefundChecks(ctx context.Context, o benchOptions, res *loadgen.Result, a loadgen.Audit) []string {
	var bad []string
	d := a.Database
	if d.Refunded != d.Refunds || d.RefundsFailed > 0 {
		bad = append(bad, fmt.Sprintf("refunds: %d owed, %d refunded, %d failed, %d still open",
			d.Refunds, d.Refunded, d.RefundsFailed, d.RefundsRequired+d.RefundsPending))
	}
	perSession, err := loadgen.StripeRefunds(ctx, &http.Client{Timeout: 30 * time.Second}, strings.TrimRight(o.stripeStandIn, "/"))
	if err != nil {
		return append(bad, "the Stripe stand-in's refunds could not be read: "+err.Error())
	}
	owed := 0
	for pid, result := range res.Payments {
		want := 0
		if result == string(seckill.PaymentRefundRequired) {
			want, owed = 1, owed+1
		}
		if got := perSession[pid]; got != want {
			bad = append(bad, fmt.Sprintf("payment %s answered %s was refunded %d times at Stripe; want %d", pid, result, got, want))
		}
	}
	if owed != d.Refunds {
		bad = append(bad, fmt.Sprintf("the targets answered refund_required for %d payments; the database owes %d refunds", owed, d.Refunds))
	}
	return bad
}

// settleSale waits (up to the hold and 30 s more) until the sale has no hold and no queue
// left: the last holds expire, late payments land, the streams drain. It asks the targets in
// turn, so one that died or answers 503 does not end the run; the last state read is
// returned (the one from the sale's creation if no target answered).
func settleSale(ctx context.Context, o benchOptions, sale client.Sale) client.Sale {
	settleBy := time.Now().Add(o.hold + 30*time.Second)
	for i := 0; time.Now().Before(settleBy) && ctx.Err() == nil; i++ {
		if s, err := o.admin(i).Sale(ctx, o.saleID); err == nil {
			sale = s
			if s.StockState.Held == 0 && s.StockState.Queued == 0 {
				break
			}
		}
		wait.Sleep(ctx, 100*time.Millisecond)
	}
	return sale
}

// auditAll reads every instance's audit of the sale until all that answer are ok (their
// stream consumers may still be catching up) or o.auditWait has passed. An instance that
// gives no audit after a client's retries is reported with why, and not asked again: the
// report is written all the same and says what could not be verified.
func auditAll(ctx context.Context, o benchOptions) []loadgen.InstanceAudit {
	audits := make([]loadgen.InstanceAudit, len(o.targets))
	for i, t := range o.targets {
		audits[i].Target = t
	}
	by := time.Now().Add(o.auditWait)
	for {
		allOK := true
		for i := range audits {
			if audits[i].Err != "" {
				continue
			}
			a, err := fetchAudit(ctx, audits[i].Target, o.saleID, o.adminToken, by)
			audits[i].Audit = a
			if err != nil {
				audits[i].Err = err.Error()
				continue
			}
			allOK = allOK && a.OK
		}
		if allOK || !time.Now().Before(by) || !wait.Sleep(ctx, 200*time.Millisecond) {
			return audits
		}
	}
}

// defaultAuditWait is --audit-wait's default (and the demo's).
const defaultAuditWait = 20 * time.Second

// Bounds of fetchAudit's retries: at most auditTries requests, each given auditTimeout, and a
// transport error waited out for auditPause (a 503's Retry-After says how long to wait).
const (
	auditTries   = 8
	auditTimeout = 10 * time.Second
	auditPause   = 500 * time.Millisecond
)

// fetchAudit asks target for the sale's audit as a client would: a 503 or 429 is retried
// after its Retry-After, a transport error (the instance is down or restarting) after a
// pause, at most auditTries times and not past by (but always once). Any other error answer
// is final: asking again would not change it.
func fetchAudit(ctx context.Context, target, saleID, token string, by time.Time) (loadgen.Audit, error) {
	c := client.New(target, client.WithToken(token))
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, auditTimeout)
		a, err := c.Audit(actx, saleID)
		cancel()
		if err == nil {
			return a, nil
		}
		var pause time.Duration
		if e, ok := errors.AsType[*client.Error](err); ok {
			if !e.Temporary() {
				return a, err
			}
			pause = e.RetryAfter
		}
		if pause <= 0 {
			pause = auditPause
		}
		if try >= auditTries || time.Now().Add(pause).After(by) || ctx.Err() != nil {
			return a, fmt.Errorf("%w (gave up after %d tries)", err, try)
		}
		if !wait.Sleep(ctx, pause) {
			return a, ctx.Err()
		}
	}
}

// writeReport writes the Markdown report and its SVG chart (same name, .svg).
func writeReport(rp loadgen.Report, mdPath string) error {
	svgPath := strings.TrimSuffix(mdPath, filepath.Ext(mdPath)) + ".svg"
	svg, err := os.Create(svgPath)
	if err != nil {
		return err
	}
	if err := errors.Join(rp.WriteSVG(svg), svg.Close()); err != nil {
		return err
	}
	md, err := os.Create(mdPath)
	if err != nil {
		return err
	}
	return errors.Join(rp.WriteMarkdown(md, filepath.Base(svgPath)), md.Close())
}

// calibrate floods the first target's buy path, then a bare net/http handler answering a
// body of the same size, alternately, and prints the rates and their ratio: once for buys
// that get a hold (201) and once for a sold-out sale (409). With refRedis, each round also
// floods the bare handler that makes one check-and-take script call on that Redis per buy
// (refStock), and prints the target's ratio to it too.
func calibrate(ctx context.Context, o benchOptions, d time.Duration, rounds, clients int, refRedis string, stdout, stderr io.Writer) error {
	key := purchasetoken.Key([]byte(o.authSecret))
	fmt.Fprintf(stdout, "calibrate: %s against a bare net/http handler; %d connections, every buy a new user, %v per flood, %d rounds\n",
		o.targets[0], clients, d, rounds)
	if refRedis != "" {
		fmt.Fprintln(stdout, "calibrate: and against the bare handler with one Redis script call per buy (+redis)")
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	head := "path\tround\tseckill buys/s\tp50\tp99\treference buys/s\tp50\tp99\tratio"
	if refRedis != "" {
		head += "\t+redis buys/s\tp50\tp99\tratio to +redis"
	}
	fmt.Fprintln(tw, head)
	for _, path := range []struct {
		name  string
		stock int
		want  int
	}{{"hold (201)", seckill.MaxQuantity, 201}, {"sold out (409)", 0, 409}} {
		id := fmt.Sprintf("%s-cal%d", o.saleID, path.want)
		in := client.NewSale{ID: id, PriceCents: 1, Stock: path.stock, HoldSeconds: 3600, QueueLimit: client.Ptr(0), Listed: client.Ptr(false)}
		sale, err := o.admin(0).CreateSale(ctx, in)
		if seckill.ErrorCode(err) == seckill.CodeInvalidArgument && strings.Contains(err.Error(), `"listed"`) {
			// A target from before the listed flag (bench/compare.sh measures old commits with
			// this client): its sales have no list to keep off.
			in.Listed = nil
			sale, err = o.admin(0).CreateSale(ctx, in)
		}
		if err != nil {
			return fmt.Errorf("create calibration sale: %w", err)
		}
		buyer := func(tag string) func(int) (string, string) {
			return func(i int) (string, string) {
				user := fmt.Sprintf("cal-%s-%d", tag, i)
				tok, _ := httpapi.MintToken([]byte(o.authSecret), user, time.Now(), time.Hour)
				return client.BuyPath(id, purchasetoken.New(key, id, user, sale.StartsAt)), tok
			}
		}
		// One real answer fixes the references' body (same status, same size).
		probePath, probeTok := buyer("probe")(0)
		status, body, err := post(ctx, o.targets[0]+probePath, probeTok)
		if err != nil || status != path.want {
			return fmt.Errorf("calibration probe: %d %s %v", status, body, err)
		}
		// The floods of a round: the target's, the bare handler's and, with refRedis, the
		// bare handler's with Redis.
		targets := []string{o.targets[0]}
		var stops []func()
		stopAll := func() {
			for _, stop := range stops {
				stop()
			}
		}
		refs := []string{""} // the bare handler, then with refRedis the one with Redis
		if refRedis != "" {
			refs = append(refs, refRedis)
		}
		for _, redisURL := range refs {
			ref, stop, err := startReference(status, len(body), redisURL)
			if err != nil {
				stopAll()
				return err
			}
			targets, stops = append(targets, ref), append(stops, stop)
		}
		ratios := make([][]float64, len(targets))
		for r := range rounds {
			// Each round starts with another flood, so that none always follows the same one;
			// the pause lets a target's background work of a flood (storing its events,
			// collecting its garbage) end before the next flood is timed.
			res := make([]loadgen.FloodResult, len(targets))
			for k := range targets {
				i := (r + k) % len(targets)
				tag := fmt.Sprintf("%d-%d-%d", path.want, r, i)
				res[i], err = loadgen.Flood(ctx, loadgen.FloodConfig{Target: targets[i], SaleID: id, Clients: clients, Duration: d, Buyer: buyer(tag), Want: path.want})
				if err == nil && !wait.Sleep(ctx, calibratePause) {
					err = ctx.Err()
				}
				if err != nil {
					stopAll()
					return err
				}
			}
			line := fmt.Sprintf("%s\t%d", path.name, r+1)
			for i, f := range res {
				line += fmt.Sprintf("\t%.0f\t%.2f ms\t%.2f ms", f.Rate,
					float64(f.Latency.ValueAtQuantile(50))/1000, float64(f.Latency.ValueAtQuantile(99))/1000)
				if i > 0 {
					ratio := res[0].Rate / f.Rate
					ratios[i] = append(ratios[i], ratio)
					line += fmt.Sprintf("\t%.2f×", ratio)
				}
			}
			fmt.Fprintln(tw, line)
		}
		stopAll()
		line := fmt.Sprintf("%s\tmedian\t\t\t", path.name)
		for _, rs := range ratios[1:] {
			slices.Sort(rs)
			line += fmt.Sprintf("\t\t\t\t%.2f×", rs[len(rs)/2])
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// calibratePause separates the floods of a calibration.
const calibratePause = 2 * time.Second

// post sends one buy to url (a target and a buy path) and returns its status and body, as they
// are: the calibration's reference answers with a body of the same size.
func post(ctx context.Context, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"quantity":1}`))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// startReference runs `seckill bench-reference` in a process of its own (so that it does not
// share the client's scheduler) and returns its URL and a stop function.
func startReference(status, size int, redisURL string) (string, func(), error) {
	addr, stop, err := startReferenceProcess("--addr", "127.0.0.1:0", "--status", strconv.Itoa(status), "--bytes", strconv.Itoa(size),
		"--redis", redisURL)
	if err != nil {
		return "", nil, err
	}
	return "http://" + addr, stop, nil
}

// startReferenceProcess runs `seckill bench-reference` with args and returns the line it
// prints first (its address or addresses) and a stop function.
func startReferenceProcess(args ...string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, append([]string{"bench-reference"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	// An interrupt lets the reference remove its Redis key; a kill after a while ends one that
	// does not stop.
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		t := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		_ = cmd.Wait()
		t.Stop()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("bench-reference did not start: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// benchReference is the calibration's bare net/http handler: every buy is answered status
// with a fixed JSON body of the given size. It prints its address, then serves until killed.
// With --tell it is the waiting-room tell's reference instead (serveTellReference).
func benchReference(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-reference", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	status := fs.Int("status", 201, "status of every answer")
	size := fs.Int("bytes", 250, "size of every answer's body")
	redisURL := fs.String("redis", "", "also run one check-and-take script call on this Redis per buy (the reference with Redis)")
	tell := fs.Bool("tell", false, "serve live ticket streams and tell them all the closing --ticket at once on POST /tell (bench --waiting-room's reference)")
	listeners := fs.Int("listeners", 1, "with --tell: listen on this many loopback ports")
	ticket := fs.String("ticket", "", "with --tell: the closing ticket's JSON")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *tell {
		return serveTellReference(ctx, *listeners, *ticket, stdout)
	}
	var stock *refStock
	if *redisURL != "" {
		units := int64(refStockUnits) // a 201 reference never runs out
		if *status != http.StatusCreated {
			units = 0 // a sold-out one has none to take
		}
		var err error
		if stock, err = newRefStock(ctx, *redisURL, units); err != nil {
			return err
		}
		defer stock.close()
	}
	pad := max(0, *size-len(`{"pad":""}`)-1)
	body := []byte(`{"pad":"` + strings.Repeat("x", pad) + `"}` + "\n")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sales/{id}/buy/{token}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if stock != nil {
			if err := stock.take(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(*status)
		_, _ = w.Write(body)
	})
	l, err := listen(*addr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, l.Addr().String())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
