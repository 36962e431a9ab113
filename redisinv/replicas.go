package redisinv

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replica-acknowledged writes (WithReplicas). Redis replicates asynchronously: a master that
// answered a script has not yet sent its writes to any replica, and a failover to a replica
// forgets what it had not received. With WithReplicas(n, timeout), every call of a script that
// changes a sale is followed, on the same connection, by WAIT n timeout: Redis answers WAIT
// once n replicas have acknowledged every write this connection made (so the script's, and
// everything the master did before it, replication being one ordered stream), or when the
// timeout passes, with the number that did. Only then does the engine answer; fewer than n
// answers unavailable (503), counted in ReplicaStats.
//
// How the two commands share a connection: rueidis marks WAIT as a blocking command, so a
// DoMulti of [EVALSHA, WAIT] goes, in that order, on one connection taken from rueidis'
// pool of dedicated connections (ClientOption.BlockingPoolSize, 1024 by default) and
// returned to it afterwards, never on the shared auto-pipelined connection, which a WAIT
// would stall for every other caller. On a Cluster, DoMulti sends the keyless WAIT to the
// node of the script's keys. A grouped buy call (buy.go) is one script call and so one
// WAIT, shared by its buys.
//
// What it does not do: a WAIT that times out does not undo the script (Redis cannot): the
// change stays on the master and is replicated later, and the answer 503 tells the buyer only
// that it is not known to be safe; a retry with the same idempotency key finds it. The
// read-only scripts (reservation, sale) do not wait: their only writes are expiries that any
// master redoes from the same state. WAITAOF (Redis 7.2) is not used: the servers this is
// tested on are 7.0.
const (
	// MaxReplicas bounds WithReplicas' n: more replicas than this is a configuration mistake.
	MaxReplicas = 16
	// DefaultReplicaTimeout is how long a call waits for its replicas by default.
	DefaultReplicaTimeout = 100 * time.Millisecond
	// MaxReplicaTimeout bounds the wait: a buyer should get an answer well within the engine's
	// timeout, and every waiting call holds a dedicated connection.
	MaxReplicaTimeout = time.Second
)

// WithReplicas makes every state-changing script call wait until n replicas have it (WAIT n
// timeout) before the engine answers; a call that n replicas did not acknowledge within
// timeout answers unavailable, and its change stays. n is 0 (off, the default) to MaxReplicas;
// timeout is 1 ms to MaxReplicaTimeout, 0 meaning DefaultReplicaTimeout. New panics on values
// out of bounds (the command line checks them first: CheckReplicas).
func WithReplicas(n int, timeout time.Duration) Option {
	return func(e *Engine) {
		if timeout == 0 {
			timeout = DefaultReplicaTimeout
		}
		if err := CheckReplicas(n, timeout); err != nil {
			panic("redisinv: " + err.Error())
		}
		e.acks.n, e.acks.timeout = int64(n), timeout
	}
}

// CheckReplicas reports whether n and timeout are within WithReplicas' bounds.
func CheckReplicas(n int, timeout time.Duration) error {
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("replicas %d: want 0 (off) to %d", n, MaxReplicas)
	}
	if timeout < time.Millisecond || timeout > MaxReplicaTimeout {
		return fmt.Errorf("replica timeout %v: want 1ms to %v", timeout, MaxReplicaTimeout)
	}
	return nil
}

// replicaAcks is the engine's WAIT setting and its counts.
type replicaAcks struct {
	n       int64 // 0: off
	timeout time.Duration

	acked atomic.Int64 // calls that n replicas acknowledged in time
	short atomic.Int64 // calls answered unavailable because fewer did
}

// ReplicaStats counts the script calls that waited for replicas: acknowledged by as many as
// WithReplicas asked, and short (fewer within the timeout: answered unavailable, the change
// kept). Both are zero when the setting is off.
type ReplicaStats struct {
	Acknowledged int64
	Short        int64
}

// ReplicaStats returns the counts so far.
func (e *Engine) ReplicaStats() ReplicaStats {
	return ReplicaStats{Acknowledged: e.acks.acked.Load(), Short: e.acks.short.Load()}
}

// errTooFewReplicas is what a call whose WAIT came back short returns. It is not a Redis error
// reply, so exec counts it transient: unavailable (503).
type errTooFewReplicas struct {
	got, want int64
	timeout   time.Duration
}

func (e errTooFewReplicas) Error() string {
	return fmt.Sprintf("%d of %d replicas acknowledged the change within %v (it stays on the master)", e.got, e.want, e.timeout)
}

var (
	replicaAckDesc = prometheus.NewDesc("seckill_redis_replica_acks_total",
		"State-changing Redis script calls that waited for replicas (--redis-replicas), by result: acknowledged, or short (fewer replicas within the timeout: answered 503, the change kept on the master).",
		[]string{"result"}, nil)
)

// ReplicaCollector exports ReplicaStats to Prometheus as seckill_redis_replica_acks_total.
func (e *Engine) ReplicaCollector() prometheus.Collector { return replicaCollector{e} }

type replicaCollector struct{ e *Engine }

func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicaAckDesc }

func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.ReplicaStats()
	ch <- prometheus.MustNewConstMetric(replicaAckDesc, prometheus.CounterValue, float64(st.Acknowledged), "acknowledged")
	ch <- prometheus.MustNewConstMetric(replicaAckDesc, prometheus.CounterValue, float64(st.Short), "short")
}
