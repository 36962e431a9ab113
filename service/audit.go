package service

import (
	"context"
	"fmt"

	"github.com/seckill-go/seckill"
)

// Audit is the result of checking the invariants of docs/MODEL.md for one sale.
type Audit struct {
	OK         bool               `json:"ok"`
	Violations []string           `json:"violations"`
	Engine     seckill.StockState `json:"engine"`
	Database   seckill.DBCounts   `json:"database"`
}

// Audit checks the invariants that can be checked from outside the engine: counts add up,
// nothing is oversold in the engine or the database, engine and database agree on sold units,
// paid reservations match paid payments, and no user holds more than the limit.
func (s *Service) Audit(ctx context.Context, saleID string) (Audit, error) {
	sale, st, err := s.inv.Sale(ctx, saleID)
	if err != nil {
		return Audit{}, err
	}
	db, err := s.store.Counts(ctx, saleID)
	if err != nil {
		return Audit{}, unavailable(err)
	}
	a := Audit{Engine: st, Database: db, Violations: []string{}}
	bad := func(format string, args ...any) { a.Violations = append(a.Violations, fmt.Sprintf(format, args...)) }
	if st.Available < 0 || st.Held < 0 || st.Sold < 0 || st.Queued < 0 {
		bad("negative engine count: %+v", st)
	}
	if st.Available+st.Held+st.Sold != st.Sellable {
		bad("available %d + held %d + sold %d != sellable %d", st.Available, st.Held, st.Sold, st.Sellable)
	}
	if st.Sold > st.Sellable {
		bad("engine oversold: sold %d > sellable %d", st.Sold, st.Sellable)
	}
	if db.Sold > sale.Sellable() {
		bad("database oversold: sales.sold %d > sellable %d", db.Sold, sale.Sellable())
	}
	if db.Sold != st.Sold {
		bad("engine sold %d != database sold %d", st.Sold, db.Sold)
	}
	if db.PaidUnits != db.Sold {
		bad("paid reservation units %d != sales.sold %d", db.PaidUnits, db.Sold)
	}
	paid, err := s.store.Reservations(ctx, saleID, seckill.StatusPaid)
	if err != nil {
		return Audit{}, unavailable(err)
	}
	perUser := map[string]int{}
	for _, r := range paid {
		perUser[r.UserID] += r.Quantity
	}
	for u, n := range perUser {
		if n > sale.PerUserLimit {
			bad("user %s paid for %d units, limit %d", u, n, sale.PerUserLimit)
		}
	}
	a.OK = len(a.Violations) == 0
	return a, nil
}
