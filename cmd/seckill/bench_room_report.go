package main

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/seckill-go/seckill/httpapi"
)

// The waiting-room bench's report (bench_room.go runs it): each side's figures, the room's tell
// and the checks, as text and as JSON.

// roomSide is one side's figures in the report.
type roomSide struct {
	Sale          string  `json:"sale"`
	Buyers        int     `json:"buyers"`
	Failed        int     `json:"failed"`
	FirstFailure  string  `json:"first_failure,omitempty"`
	Paid          int     `json:"paid"`
	Buys          int     `json:"buys"`
	BuysPerSecMax int     `json:"buys_per_second_max"`
	BuyP50Ms      float64 `json:"buy_p50_ms"`
	BuyP99Ms      float64 `json:"buy_p99_ms"`
	// RhoOutcome is the rank correlation of arrival order and getting a unit (1) or not (0):
	// negative, the earlier the likelier; near 0, arrival did not matter.
	RhoOutcome float64 `json:"rho_arrival_outcome"`
	// RhoServed is the rank correlation of arrival order and the order buys were sent, among
	// the buyers who bought.
	RhoServed float64 `json:"rho_arrival_served"`
	// RhoPreQueue is RhoServed among the pre-queue's buyers only: with a room their order is
	// the draw's (near 0), without one whoever sends first at the start.
	RhoPreQueue float64 `json:"rho_arrival_served_prequeue"`
}

type roomReportJSON struct {
	WithRoom   roomSide       `json:"with_room"`
	WithoutRm  *roomSide      `json:"without_room,omitempty"`
	JoinP50Ms  float64        `json:"join_p50_ms"`
	JoinP99Ms  float64        `json:"join_p99_ms"`
	SolveP50Ms float64        `json:"pow_solve_p50_ms,omitempty"`
	SolveP99Ms float64        `json:"pow_solve_p99_ms,omitempty"`
	VerifyUs   float64        `json:"pow_verify_us,omitempty"`
	Admitted   int64          `json:"admitted"`
	PreQueue   int64          `json:"pre_queue"`
	Streamed   int            `json:"told_by_stream"`
	Polled     int            `json:"told_by_poll"`
	AtJoin     int            `json:"told_at_join"` // joined after the close: the join answered sold_out
	States     map[string]int `json:"last_states"`  // the buyers' last ticket states
	ToldP50Ms  float64        `json:"told_after_last_paid_p50_ms"`
	ToldMaxMs  float64        `json:"told_after_last_paid_max_ms"`
	// ToldLow… are from when the bench learned of the last payment (the payment's answer),
	// after the close: a lower bound, where Told… is an upper one (from the payment's sending).
	ToldLowP50Ms float64 `json:"told_after_last_paid_answer_p50_ms"`
	ToldLowMaxMs float64 `json:"told_after_last_paid_answer_max_ms"`
	// ToldClosed… are from the room's closed_at (the checked figure): the bench's clock against
	// the engine's, one clock when they share a machine. A buyer told by stream is told when
	// the event reached its socket (roomBuyer.toldAt), as the Told… figures above; ReadClosed…
	// are when this process read it, later when it is short of CPU.
	ToldClosedP50Ms float64 `json:"told_after_closed_at_p50_ms"`
	ToldClosedMaxMs float64 `json:"told_after_closed_at_max_ms"`
	ReadClosedP50Ms float64 `json:"read_after_closed_at_p50_ms"`
	ReadClosedMaxMs float64 `json:"read_after_closed_at_max_ms"`
	// Arrived is how many of the buyers told by stream have the event's arrival time (all of
	// them on Linux; none where the kernel gives no receive timestamps).
	Arrived int `json:"told_by_stream_arrival_known"`
	// AtConnect… are the buyers told by stream whose stream connected after the close (its
	// first event was the close): they joined before it, and are told when they connect.
	AtConnect      int     `json:"told_at_stream_connect"`
	AtConnectMaxMs float64 `json:"told_at_stream_connect_after_closed_at_max_ms"`
	// CloseWritten is the servers' side of the same (closeWritten): absent when a target does
	// not serve its metrics.
	CloseWritten *closeWrittenJSON `json:"close_written,omitempty"`
	// TellReference is this client reading as many streams told at once by a bare server
	// (measureTell): absent with --tell-reference=false or when no buyer was told by stream.
	TellReference *tellReferenceJSON `json:"tell_reference,omitempty"`
	Checks        []struct {
		Name       string   `json:"name"`
		What       string   `json:"what"`
		OK         bool     `json:"ok"`
		Violations []string `json:"violations,omitempty"`
	} `json:"checks"`
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sideOf(rr *roomRun) roomSide {
	s := roomSide{Sale: rr.saleID, Buyers: len(rr.buyers)}
	var lats []time.Duration
	var sends []time.Time
	var arr, got, arrB, served, arrP, servedP []float64
	for _, b := range rr.buyers {
		if b.failure != "" {
			s.Failed++
			if s.FirstFailure == "" {
				s.FirstFailure = b.failure
			}
		}
		outcome := 0.0
		if b.got {
			s.Paid++
			outcome = 1
		}
		arr, got = append(arr, float64(b.rank)), append(got, outcome)
		if b.bought {
			s.Buys++
			lats, sends = append(lats, b.buyLat), append(sends, b.buyAt)
			arrB, served = append(arrB, float64(b.rank)), append(served, float64(b.buyAt.UnixNano()))
			if b.prequeue {
				arrP, servedP = append(arrP, float64(b.rank)), append(servedP, float64(b.buyAt.UnixNano()))
			}
		}
	}
	s.BuysPerSecMax = maxPerSecond(sends)
	s.BuyP50Ms, s.BuyP99Ms = msOf(quantile(lats, .5)), msOf(quantile(lats, .99))
	s.RhoOutcome, s.RhoServed, s.RhoPreQueue = spearman(arr, got), spearman(arrB, served), spearman(arrP, servedP)
	return s
}

func roomReport(withRoom, plain *roomRun, ob roomObservation, checks []roomCheck, verifyNs float64) roomReportJSON {
	rp := roomReportJSON{WithRoom: sideOf(withRoom), Admitted: ob.admitted, PreQueue: ob.preQueue, CloseWritten: ob.written, TellReference: ob.tell}
	if plain != nil {
		s := sideOf(plain)
		rp.WithoutRm = &s
	}
	var joins, solves, told, toldLow, toldClosed, readClosed []time.Duration
	rp.States = map[string]int{}
	for _, b := range withRoom.buyers {
		rp.States[cmp.Or(b.state, "none")]++
		if b.joined {
			joins = append(joins, b.joinLat)
		}
		if b.solve > 0 {
			solves = append(solves, b.solve)
		}
		switch {
		case b.told.IsZero() || !ob.soldOut:
		case b.by == "join":
			rp.AtJoin++
		default:
			at := b.toldAt()
			told = append(told, max(0, at.Sub(ob.lastPaid)))
			toldLow = append(toldLow, max(0, at.Sub(ob.lastPaidAck)))
			if !ob.closedAt.IsZero() {
				toldClosed = append(toldClosed, max(0, at.Sub(ob.closedAt)))
				readClosed = append(readClosed, max(0, b.told.Sub(ob.closedAt)))
			}
			if b.by == "stream" {
				rp.Streamed++
				if !b.arrived.IsZero() {
					rp.Arrived++
				}
				if b.atConnect {
					rp.AtConnect++
					if !ob.closedAt.IsZero() {
						rp.AtConnectMaxMs = max(rp.AtConnectMaxMs, msOf(at.Sub(ob.closedAt)))
					}
				}
			} else {
				rp.Polled++
			}
		}
	}
	rp.JoinP50Ms, rp.JoinP99Ms = msOf(quantile(joins, .5)), msOf(quantile(joins, .99))
	rp.SolveP50Ms, rp.SolveP99Ms = msOf(quantile(solves, .5)), msOf(quantile(solves, .99))
	rp.VerifyUs = verifyNs / 1000
	rp.ToldP50Ms, rp.ToldMaxMs = msOf(quantile(told, .5)), msOf(quantile(told, 1))
	rp.ToldLowP50Ms, rp.ToldLowMaxMs = msOf(quantile(toldLow, .5)), msOf(quantile(toldLow, 1))
	rp.ToldClosedP50Ms, rp.ToldClosedMaxMs = msOf(quantile(toldClosed, .5)), msOf(quantile(toldClosed, 1))
	rp.ReadClosedP50Ms, rp.ReadClosedMaxMs = msOf(quantile(readClosed, .5)), msOf(quantile(readClosed, 1))
	for _, c := range checks {
		rp.Checks = append(rp.Checks, struct {
			Name       string   `json:"name"`
			What       string   `json:"what"`
			OK         bool     `json:"ok"`
			Violations []string `json:"violations,omitempty"`
		}{c.name, c.what, len(c.bad) == 0, c.bad})
	}
	if rp.WithRoom.Failed > 0 {
		rp.Checks = append(rp.Checks, struct {
			Name       string   `json:"name"`
			What       string   `json:"what"`
			OK         bool     `json:"ok"`
			Violations []string `json:"violations,omitempty"`
		}{"buyers_finished", "every buyer of the room's sale finished without an unexpected error", false,
			[]string{fmt.Sprintf("%d buyers failed; the first: %s", rp.WithRoom.Failed, rp.WithRoom.FirstFailure)}})
	}
	return rp
}

func (rp roomReportJSON) failed() []string {
	var out []string
	for _, c := range rp.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

func (rp roomReportJSON) writeText(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\twith the room\twithout a room")
	row := func(name string, f func(roomSide) string) {
		other := "—"
		if rp.WithoutRm != nil {
			other = f(*rp.WithoutRm)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(rp.WithRoom), other)
	}
	row("sale", func(s roomSide) string { return s.Sale })
	row("buyers (failed)", func(s roomSide) string { return fmt.Sprintf("%d (%d)", s.Buyers, s.Failed) })
	row("units paid", func(s roomSide) string { return fmt.Sprint(s.Paid) })
	row("buys at the origin", func(s roomSide) string { return fmt.Sprint(s.Buys) })
	row("most buys in 1 s", func(s roomSide) string { return fmt.Sprint(s.BuysPerSecMax) })
	row("buy p50 / p99", func(s roomSide) string { return fmt.Sprintf("%.1f / %.1f ms", s.BuyP50Ms, s.BuyP99Ms) })
	row("ρ(arrival, got a unit)", func(s roomSide) string { return fmt.Sprintf("%+.3f", s.RhoOutcome) })
	row("ρ(arrival, order served)", func(s roomSide) string { return fmt.Sprintf("%+.3f", s.RhoServed) })
	row("  the same, pre-queue only", func(s roomSide) string { return fmt.Sprintf("%+.3f", s.RhoPreQueue) })
	_ = tw.Flush()
	fmt.Fprintf(w, "\nroom: %d in the pre-queue, %d admitted; join p50 %.1f ms, p99 %.1f ms; the buyers' last ticket states %v\n", rp.PreQueue, rp.Admitted, rp.JoinP50Ms, rp.JoinP99Ms, rp.States)
	if rp.VerifyUs > 0 {
		fmt.Fprintf(w, "proof of work: solve p50 %.1f ms, p99 %.1f ms per join (client); verify %.2f µs per join (server, pow.Verify)\n", rp.SolveP50Ms, rp.SolveP99Ms, rp.VerifyUs)
	}
	fmt.Fprintf(w, "told sold out while waiting: %d by stream, %d by polling; %d more joined after the close and were told by the join\n",
		rp.Streamed, rp.Polled, rp.AtJoin)
	fmt.Fprintf(w, "  after the room's closed_at (checked; a stream's event when it reached the buyer's socket) p50 %.0f ms, max %.0f ms; after the last payment's sending p50 %.0f ms, max %.0f ms, after its answer p50 %.0f ms, max %.0f ms\n",
		rp.ToldClosedP50Ms, rp.ToldClosedMaxMs, rp.ToldP50Ms, rp.ToldMaxMs, rp.ToldLowP50Ms, rp.ToldLowMaxMs)
	fmt.Fprintf(w, "  read by this bench p50 %.0f ms, max %.0f ms after closed_at (later than the arrival when the bench is short of CPU); arrival known for %d of the %d told by stream\n",
		rp.ReadClosedP50Ms, rp.ReadClosedMaxMs, rp.Arrived, rp.Streamed)
	fmt.Fprintf(w, "  %d of them joined before the close and connected their stream after it (told at connect), the last %.0f ms after closed_at\n",
		rp.AtConnect, rp.AtConnectMaxMs)
	if c := rp.CloseWritten; c != nil {
		fmt.Fprintf(w, "  the servers wrote it to the %d streams open at the close: p50 %s, p99 %s, the last %s after closed_at (%s)\n",
			c.Streams, msBound(c.P50Ms), msBound(c.P99Ms), msBound(c.MaxMs), httpapi.CloseWrittenMetric)
	}
	if t := rp.TellReference; t != nil {
		t.writeText(w)
	}
	for _, c := range rp.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "check %-16s %-6s %s\n", c.Name, verdict, c.What)
		for _, v := range c.Violations {
			fmt.Fprintf(w, "  violation: %s\n", v)
		}
	}
}
