package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// defaultRefundList is how many refunds GET /api/v1/refunds lists without a limit parameter.
const defaultRefundList = 100

// refunds is GET /api/v1/refunds?status=refund_failed&limit=100 (admin): the refunds with one
// status, oldest payment first. The default status is refund_failed, the ones an operator
// must act on; limit is 1..seckill.MaxRefundList (default 100).
func (s *Server) refunds(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	q := r.URL.Query()
	status := seckill.RefundFailed
	if v := q.Get("status"); v != "" {
		status = seckill.RefundStatus(v)
	}
	limit := defaultRefundList
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return seckill.Errorf(seckill.CodeInvalidArgument, "limit must be an integer 1..%d", seckill.MaxRefundList)
		}
		limit = n
	}
	list, err := s.svc.Refunds(r.Context(), status, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"refunds": list})
}

// refundCollector reports the refunds by status, and the age of the oldest one not yet
// settled, when Prometheus scrapes. A store that keeps no refunds reports nothing.
type refundCollector struct{ svc *service.Service }

var (
	refundsDesc = prometheus.NewDesc("seckill_refunds",
		"Refunds of refund_required payments by status (refund_required, refund_pending, refunded, refund_failed).",
		[]string{"status"}, nil)
	refundAgeDesc = prometheus.NewDesc("seckill_refund_oldest_open_age_seconds",
		"Age of the oldest refund not yet settled (refund_required or refund_pending); 0 when there is none.", nil, nil)
)

func (c *refundCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- refundsDesc
	ch <- refundAgeDesc
}

func (c *refundCollector) Collect(ch chan<- prometheus.Metric) {
	if c.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rc, err := c.svc.RefundCounts(ctx)
	if err != nil {
		return
	}
	for status, n := range map[seckill.RefundStatus]int{seckill.RefundRequired: rc.Required,
		seckill.RefundPending: rc.Pending, seckill.Refunded: rc.Refunded, seckill.RefundFailed: rc.Failed} {
		ch <- prometheus.MustNewConstMetric(refundsDesc, prometheus.GaugeValue, float64(n), string(status))
	}
	age := 0.0
	if !rc.OldestOpen.IsZero() {
		age = max(c.svc.Now().Sub(rc.OldestOpen).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(refundAgeDesc, prometheus.GaugeValue, age)
}
