package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/seckill-go/seckill"
)

// Each sale records the highest version of its Redis state the store has stored (docs/MODEL.md
// "The state's version"), so that an instance of the Redis engine can tell a Redis that went
// back in time (a failover to a replica that lagged) from one that is merely ahead of the
// store. The memory engine sends version 0, which records nothing. The version is kept in
// sale_versions, not on the sale's row, which every payment of the sale locks
// (migrations/sqlite/0009_sale_versions.sql; docs/DECISIONS.md, "One lock order for the sale's
// row"); sales.redis_version, where instances before that kept it, is still read.

// SaleVersion returns the highest version of the sale's Redis state stored, 0 if none; an
// unknown sale is 0 too (nothing to compare with).
func (s *Store) SaleVersion(ctx context.Context, saleID string) (uint64, error) {
	var old, v int64
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT s.redis_version, COALESCE(v.redis_version, 0)
		FROM sales s LEFT JOIN sale_versions v ON v.sale_id = s.id WHERE s.id = ?`), saleID).Scan(&old, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: version of sale %s: %w", saleID, err)
	}
	return uint64(max(old, v)), nil
}

// RaiseSaleVersion records v as the sale's version unless a higher one is recorded: the Redis
// engine's rebuild records the version the rebuilt state starts from before it loads it. An
// unknown sale records nothing.
func (s *Store) RaiseSaleVersion(ctx context.Context, saleID string, v uint64) error {
	if v > 1<<53 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "version %d above 2^53", v)
	}
	if _, err := s.db.ExecContext(ctx, s.raiseVersionSQL(), int64(v), saleID); err != nil {
		return fmt.Errorf("sqlstore: raise version of sale %s: %w", saleID, err)
	}
	return nil
}

// raiseVersionSQL raises a sale's row of sale_versions (arguments: the version, the sale),
// creating it if the sale exists and has none.
func (s *Store) raiseVersionSQL() string {
	if s.d.name == mysqlDialect.name {
		return `INSERT INTO sale_versions (sale_id, redis_version) SELECT id, ? FROM sales WHERE id = ?
			ON DUPLICATE KEY UPDATE redis_version = GREATEST(sale_versions.redis_version, VALUES(redis_version))`
	}
	// The cast: PostgreSQL would type a bare parameter in a select list as text.
	return s.q(`INSERT INTO sale_versions (sale_id, redis_version) SELECT id, CAST(? AS BIGINT) FROM sales WHERE id = ?
		ON CONFLICT (sale_id) DO UPDATE SET redis_version = excluded.redis_version
		WHERE sale_versions.redis_version < excluded.redis_version`)
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
// with the changes it stands for. The rows of sale_versions are the last rows of the lock
// order that ApplyEvents takes before the outbox's.
func (s *Store) raiseVersions(ctx context.Context, tx *sql.Tx, vs []saleVersion) error {
	for _, v := range vs {
		if _, err := tx.ExecContext(ctx, s.raiseVersionSQL(), v.version, v.sale); err != nil {
			return fmt.Errorf("sqlstore: raise version of sale %s: %w", v.sale, err)
		}
	}
	return nil
}
