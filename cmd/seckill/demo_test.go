package main

import (
	"strings"
	"testing"

	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/payment"
)

// TestDemoReconcileGateway: the demo's payment reconciliation passes when the gateway's
// succeeded payments are the database's paid orders and refunds, fails when they differ, and
// when the gateway failed to deliver a notification it leaves the verdict UNVERIFIED (the demo
// then exits non-zero) instead of skipping the comparison in silence, as it once did.
func TestDemoReconcileGateway(t *testing.T) {
	var audit loadgen.Audit
	audit.Database.PaidOrders, audit.Database.Refunds = 20, 3
	for _, c := range []struct {
		name string
		gw   payment.MockStats
		want string
	}{
		{"reconciled", payment.MockStats{PaymentsSucceeded: 23}, "ok"},
		{"a payment missing", payment.MockStats{PaymentsSucceeded: 24}, "FAILED"},
		{"a delivery failed", payment.MockStats{PaymentsSucceeded: 24, DeliveryFailures: 1}, "UNVERIFIED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := loadgen.Verdict{OK: true}
			v.Add("gateway_payments", "reconciled", reconcileGateway(c.gw, audit, &v))
			if v.Word() != c.want || v.OK != (c.want == "ok") {
				t.Fatalf("verdict %s (ok %v), violations %q, unverified %q; want %s", v.Word(), v.OK, v.Violations, v.Unverified, c.want)
			}
			if c.want == "UNVERIFIED" && !strings.Contains(strings.Join(v.Unverified, " "), "failed to deliver 1") {
				t.Fatalf("unverified %q does not say why", v.Unverified)
			}
		})
	}
}
