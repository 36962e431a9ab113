package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/seckill-go/seckill"
)

// Each sale records the highest version of its Redis state the store has stored
// (sales.redis_version; docs/MODEL.md "The state's version"), so that an instance of the
// Redis engine can tell a Redis that went back in time (a failover to a replica that lagged)
// from one that is merely ahead of the store. The memory engine sends version 0, which
// records nothing.

// SaleVersion returns the highest version of the sale's Redis state stored, 0 if none; an
// unknown sale is 0 too (nothing to compare with).
func (s *Store) SaleVersion(ctx context.Context, saleID string) (uint64, error) {
	var v int64
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT redis_version FROM sales WHERE id = ?`), saleID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: version of sale %s: %w", saleID, err)
	}
	return uint64(v), nil
}

// RaiseSaleVersion records v as the sale's version unless a higher one is recorded: the Redis
// engine's rebuild records the version the rebuilt state starts from before it loads it.
func (s *Store) RaiseSaleVersion(ctx context.Context, saleID string, v uint64) error {
	if v > 1<<53 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "version %d above 2^53", v)
	}
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE sales SET redis_version = ? WHERE id = ? AND redis_version < ?`),
		int64(v), saleID, int64(v))
	if err != nil {
		return fmt.Errorf("sqlstore: raise version of sale %s: %w", saleID, err)
	}
	return nil
}

// saleVersion is the highest version among a batch's events of one sale.
type saleVersion struct {
	sale    string
	version int64
}

// eventVersions returns the highest Version of events per sale, sorted by sale (the order
// the rows are locked in, the same in every transaction), without the sales at 0.
func eventVersions(events []seckill.Event) []saleVersion {
	var out []saleVersion
	for _, e := range events {
		if e.Version == 0 || e.Version > 1<<53 {
			continue
		}
		i := slices.IndexFunc(out, func(v saleVersion) bool { return v.sale == e.Reservation.SaleID })
		if i < 0 {
			out = append(out, saleVersion{e.Reservation.SaleID, int64(e.Version)})
		} else {
			out[i].version = max(out[i].version, int64(e.Version))
		}
	}
	slices.SortFunc(out, func(a, b saleVersion) int {
		switch {
		case a.sale < b.sale:
			return -1
		case a.sale > b.sale:
			return 1
		}
		return 0
	})
	return out
}

// raiseVersions records vs in tx (ApplyEvents' transaction): the store's version is stored
// with the changes it stands for.
func (s *Store) raiseVersions(ctx context.Context, tx *sql.Tx, vs []saleVersion) error {
	for _, v := range vs {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sales SET redis_version = ? WHERE id = ? AND redis_version < ?`),
			v.version, v.sale, v.version); err != nil {
			return fmt.Errorf("sqlstore: raise version of sale %s: %w", v.sale, err)
		}
	}
	return nil
}
