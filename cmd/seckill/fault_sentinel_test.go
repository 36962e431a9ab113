package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/payment"
)

// The fault suite's Sentinel rows (docs/RELIABILITY.md "Fault suite"): the same rush as the
// other rows (runFaultScenarioVia: three `seckill serve --engine redis`, a fresh MariaDB
// database, the probe, 3 000 bench buyers on 100 units, the fault once 30 are paid), on a
// private master, its replicas and three sentinels, the instances given the Sentinel URL. The
// fault is the master's SIGKILL; it lasts until the sentinels name another master.

// sentinelDeployment is a private master, its replicas and three sentinels.
type sentinelDeployment struct {
	master    *redistest.Proc
	replicas  []*redistest.Proc
	sentinels []*redistest.Proc
}

// url is the instances' SECKILL_REDIS_URL.
func (d *sentinelDeployment) url() string { return redistest.SentinelURL(d.sentinels) }

// faultRedis is the deployment as runFaultScenarioVia wants it: only its client is used (the
// cluster's, to read the streams' pending counts), here one that follows the failover.
func (d *sentinelDeployment) faultRedis(t *testing.T) *faultRedis {
	return &faultRedis{t: t, rdb: redistest.SentinelClient(t, d.sentinels)}
}

// failover is the fault: the master SIGKILLed, over once the sentinels name another master.
func (d *sentinelDeployment) failover(t *testing.T) {
	t.Helper()
	d.master.Kill()
	redistest.WaitUntil(t, 60*time.Second, "the sentinels name a new master", func() bool {
		a := redistest.SentinelMasterAddr(t, d.sentinels[0])
		return a != "" && a != d.master.Addr()
	})
}

// startReadmeSentinel is the README's "Redis with replicas: Sentinel" deployment, line for
// line but for the ports (free loopback ones), the directories (temporary ones) and running in
// the foreground: a master and two replicas with `--appendonly yes --maxmemory-policy
// noeviction`, and three sentinels whose file says `sentinel monitor mymaster 127.0.0.1 <master>
// 2` and `sentinel down-after-milliseconds mymaster <downAfter>` (the README's 5000, or less to
// keep a row short), nothing else.
func startReadmeSentinel(t *testing.T, downAfter time.Duration) *sentinelDeployment {
	t.Helper()
	data := []string{"appendonly yes", "maxmemory-policy noeviction"}
	d := &sentinelDeployment{master: redistest.Start(t, "master", data)}
	for i := range 2 {
		r := redistest.Start(t, fmt.Sprintf("replica%d", i+1), append(append([]string{}, data...), "replicaof 127.0.0.1 "+d.master.Port))
		redistest.WaitLinked(t, r)
		d.replicas = append(d.replicas, r)
	}
	d.sentinels = redistest.StartSentinels(t, d.master, 3, 2, redistest.SentinelOptions{Conf: []string{
		"sentinel monitor " + redistest.MasterSet + " 127.0.0.1 " + d.master.Port + " 2",
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", redistest.MasterSet, downAfter.Milliseconds()),
	}})
	return d
}

// TestFaultSentinelFailover is the README's new-user story as a test, and the suite's row
// "Sentinel failover, no replica acknowledgement": the README's deployment (a master, two
// replicas, three sentinels with its 5 s down-after-milliseconds), three instances started as
// it says (SECKILL_REDIS_URL naming the three sentinels and master_set=mymaster, nothing
// else), the master killed mid-rush: the sale goes on on the promoted replica without a
// restart, and the audits are ok. Holds answered in the master's last moments may be lost
// (the row reports the probe's).
func TestFaultSentinelFailover(t *testing.T) {
	faultSuite(t)
	d := startReadmeSentinel(t, 5*time.Second)
	row := runFaultScenarioVia(t, "Sentinel failover (master SIGKILL, 2 replicas, down-after 5 s), no replica acknowledgement",
		d.faultRedis(t), d.url(), func() { d.failover(t) })
	if !row.recovered {
		t.Errorf("buys never succeeded again after the failover")
	}
}

// TestFaultSentinelFailoverReplicaAck: the same with `--redis-replicas 1`
// (SECKILL_REDIS_REPLICAS=1) and down-after-milliseconds 1000: every change answered was on a
// replica, and Sentinel promotes the replica with the most data, so no hold the probe was
// answered is lost (asserted). Two replicas, so that the promoted master still has one to
// acknowledge its writes.
func TestFaultSentinelFailoverReplicaAck(t *testing.T) {
	faultSuite(t)
	d := startReadmeSentinel(t, time.Second)
	t.Setenv("SECKILL_REDIS_REPLICAS", "1") // read by the instances (launchCluster passes the environment)
	row := runFaultScenarioVia(t, "Sentinel failover (master SIGKILL, 2 replicas, down-after 1 s), --redis-replicas 1",
		d.faultRedis(t), d.url(), func() { d.failover(t) })
	if row.probeLost != 0 {
		t.Errorf("%d of the probe's %d holds acknowledged by a replica were lost in the failover", row.probeLost, row.probeHeld)
	}
	if !row.recovered {
		t.Errorf("buys never succeeded again after the failover")
	}
}

// laggingDeployment is a master, one replica and three sentinels (down-after 1 s), for the
// failover to a replica left behind (laggingFailover).
func laggingDeployment(t *testing.T) *sentinelDeployment {
	t.Helper()
	master := redistest.StartMaster(t)
	replica := redistest.StartReplica(t, master, "replica")
	return &sentinelDeployment{master: master, replicas: []*redistest.Proc{replica},
		sentinels: redistest.StartSentinels(t, master, 3, 1, redistest.SentinelOptions{})}
}

// laggingFailover is the fault of the lagging rows: the master refuses its replica
// (redistest.CutReplicas), takes writes (during, then for behind), and is killed; the sentinels
// promote the replica, behind by those writes.
func laggingFailover(t *testing.T, d *sentinelDeployment, behind time.Duration, during func()) {
	t.Helper()
	redistest.CutReplicas(t, d.master)
	if during != nil {
		during()
	}
	time.Sleep(behind)
	d.failover(t)
	if a := redistest.SentinelMasterAddr(t, d.sentinels[0]); a != d.replicas[0].Addr() {
		t.Errorf("the sentinels promoted %s, not the lagging replica %s", a, d.replicas[0].Addr())
	}
}

// staleLogLine is what an instance logs when Redis answered with an older state than it had
// seen (redisinv/version.go), once per rebuild.
const staleLogLine = "older state of the sale than already seen"

// TestFaultSentinelLaggingReplica: the failover goes to a replica deliberately behind: its
// master refuses it (its link closed, SYNC and PSYNC denied) when 30 units are paid, the master takes 1.5 s more of the rush
// (holds, payments recorded in the database), then is killed, and the sentinels promote the
// replica, which has the sales at an older version than the instances and the database have
// seen. The version check must find both sales stale and rebuild them from the database
// (asserted: sales rebuilt), so that no stale answer is served: nothing oversold, no paid
// order lost, every audit ok (the audit compares the engine's sold units with the
// database's, which a stale sale would fail: TestFaultSentinelStaleAnswer is its negative
// control). Holds answered in the 1.5 s that the database had not yet stored are lost (the
// row reports the probe's).
func TestFaultSentinelLaggingReplica(t *testing.T) {
	faultSuite(t)
	d := laggingDeployment(t)
	row := runFaultScenarioVia(t, "Sentinel failover to a replica 1.5 s behind (replica cut off, master SIGKILL), no replica acknowledgement",
		d.faultRedis(t), d.url(), func() { laggingFailover(t, d, 1500*time.Millisecond, nil) })
	if row.rebuilds < 1 {
		t.Errorf("no sale rebuilt after a failover to a replica 1.5 s behind: the stale state was not detected")
	}
	if !row.recovered {
		t.Errorf("buys never succeeded again after the failover")
	}
}

// TestFaultSentinelStaleAnswer is the acceptance of the version check across a real failover
// to a lagging replica with the database, and its negative control: one `seckill serve` on the
// lagging deployment, a sale with 3 units bought and paid (replicated), the replica cut off,
// 3 more bought and paid (the database: 6 sold; the replica: 3), the master killed and the
// replica promoted. Then the sale is read until an answer comes: with the check, every answer
// served says 6 sold (the first after the failover is 503 while the sale is rebuilt), and the
// instance logged the stale sale; with the check off (SECKILL_TEST_NO_VERSION_CHECK=1, a
// switch only the tests' binary has) the stale 3 is served and the audit reports the engine
// behind the database.
func TestFaultSentinelStaleAnswer(t *testing.T) {
	faultSuite(t)
	for _, check := range []bool{true, false} {
		name := "check on"
		if !check {
			name = "negative control: check off"
		}
		t.Run(name, func(t *testing.T) {
			if !check {
				t.Setenv("SECKILL_TEST_NO_VERSION_CHECK", "1")
			}
			d := laggingDeployment(t)
			c := launchCluster(t, 1, d.faultRedis(t).rdb, d.url(), freshMySQL(t))
			const sale = "stale"
			start := time.Now().UTC().Add(-time.Second)
			c.admin("create the sale", func(a *client.Client) error {
				_, err := a.CreateSale(context.Background(), client.NewSale{ID: sale, Name: "Stale", PriceCents: 100,
					Stock: 20, StartsAt: start, EndsAt: start.Add(time.Hour), HoldSeconds: 600, Listed: client.Ptr(false)})
				return err
			})
			for i := range 3 {
				buyAndPay(t, c, sale, fmt.Sprint("early-", i))
			}
			master := d.master.Client()
			redistest.WaitUntil(t, 10*time.Second, "the replica has the first 3 sold", func() bool {
				n, err := master.Do(context.Background(), master.B().Wait().Numreplicas(1).Timeout(500).Build()).AsInt64()
				return err == nil && n >= 1
			})
			laggingFailover(t, d, 0, func() {
				for i := range 3 {
					buyAndPay(t, c, sale, fmt.Sprint("late-", i))
				}
			})

			served := map[int]int{} // sold units answered 200 → how many times
			unavailable := 0
			redistest.WaitUntil(t, 30*time.Second, "the sale is answered after the failover", func() bool {
				s, err := c.api(c.insts[0], clusterAdmin).Sale(context.Background(), sale)
				switch {
				case err == nil:
					served[s.StockState.Sold]++
					return served[s.StockState.Sold] >= 3 // a few answers, not the first alone
				case statusOf(err) == http.StatusServiceUnavailable:
					unavailable++
				}
				return false
			})
			var audit client.Audit
			c.admin("audit the sale", func(a *client.Client) (err error) {
				audit, err = a.Audit(context.Background(), sale)
				return err
			})
			logged := strings.Contains(c.insts[0].log.String(), staleLogLine)
			t.Logf("sold units served after the failover: %v; 503 answers %d; stale sale logged %v; audit ok %v %v",
				served, unavailable, logged, audit.OK, audit.Violations)
			if !check {
				if served[3] == 0 || audit.OK {
					t.Fatalf("negative control: with the check off the stale sale (3 sold) was not served (%v, audit ok %v): the detector cannot fail", served, audit.OK)
				}
				return
			}
			for sold, n := range served {
				if sold != 6 {
					t.Errorf("a stale answer was served %d times: %d sold, the database has 6", n, sold)
				}
			}
			if !logged {
				t.Errorf("the instance did not log the stale sale (%q)", staleLogLine)
			}
			if !audit.OK {
				t.Errorf("audit after the failover: %v", audit.Violations)
			}
		})
	}
}

// buyAndPay buys one unit of sale as user and pays it with a signed webhook, retrying 503s;
// both must succeed.
func buyAndPay(t *testing.T, c *cluster, sale, user string) {
	t.Helper()
	tok, _ := httpapi.MintToken([]byte(clusterAuth), user, time.Now(), time.Hour)
	ctx := context.Background()
	retry := func(what string, f func(c *client.Client) error) {
		t.Helper()
		var err error
		redistest.WaitUntil(t, 20*time.Second, what, func() bool {
			err = f(c.api(c.pick(0), tok))
			_, answered := errors.AsType[*client.Error](err)
			return (err == nil || answered) && statusOf(err) != http.StatusServiceUnavailable
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var path client.PurchasePath
	retry("the purchase path", func(c *client.Client) (err error) {
		path, err = c.Path(ctx, sale)
		return err
	})
	var res client.Bought
	retry("the buy", func(c *client.Client) (err error) {
		res, err = c.Buy(ctx, path.Path, 1, user)
		return err
	})
	if res.Status != seckill.StatusHeld {
		t.Fatalf("buy as %s: %+v", user, res)
	}
	ev := payment.Event{PaymentID: "pay-" + user, ReservationID: res.ID, AmountCents: res.AmountCents, Status: payment.StatusSucceeded}
	redistest.WaitUntil(t, 20*time.Second, "the payment of "+user+" answered 200", func() bool {
		result, err := c.api(c.pick(0), "").Webhook(ctx, []byte(clusterPayment), ev)
		if st := statusOf(err); err != nil && st != http.StatusOK && st != http.StatusServiceUnavailable {
			t.Fatalf("payment of %s: %v", user, err)
		}
		if err == nil && result != seckill.PaymentApplied {
			t.Fatalf("payment of %s: %s", user, result)
		}
		return err == nil
	})
}
