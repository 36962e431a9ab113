package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill"
)

const saleColumns = `id, name, price_cents, stock, holdback, starts_at, ends_at,
	per_user_limit, hold_seconds, queue_limit, created_at, sold, listed, currency, incarnation, preheat_seconds`

// CreateSale inserts a sale with nothing sold. An existing id is a conflict, detected from the
// driver's unique-violation code so that two concurrent creates cannot both succeed. A zero
// CreatedAt is stamped with the current time so that Sales can list oldest first.
func (s *Store) CreateSale(ctx context.Context, sale seckill.Sale) error {
	if err := sale.Validate(); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO sales (id, name, price_cents, stock, holdback,
		starts_at, ends_at, per_user_limit, hold_seconds, queue_limit, created_at, sold, listed, currency, incarnation, segments, preheat_seconds)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)`),
		sale.ID, sale.Name, sale.PriceCents, sale.Stock, sale.Holdback,
		toMillis(sale.StartsAt), toMillis(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
		sale.QueueLimit, toMillis(s.stamp(sale.CreatedAt)), sale.Listed, sale.Currency, sale.Incarnation, sale.SegmentCount(),
		sale.PreheatSeconds)
	switch s.d.classify(err) {
	case noViolation:
	case uniqueViolation:
		return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeConflict, "sale %q already exists", sale.ID), err)
	case checkViolation:
		return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeInvalidArgument,
			"sale %q: stock, holdback and price must be ≥ 0 with holdback ≤ stock", sale.ID), err)
	}
	if err != nil {
		return fmt.Errorf("sqlstore: create sale %s: %w", sale.ID, err)
	}
	return nil
}

// DeleteSale removes a sale nothing refers to: no reservation row, no payment, nothing sold. The
// guard is in the DELETE itself, so a reservation or payment that arrives concurrently either
// lands first (and the sale stays) or finds no sale.
func (s *Store) DeleteSale(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM sales WHERE id = ? AND sold = 0
		AND NOT EXISTS (SELECT 1 FROM reservations WHERE sale_id = ?)
		AND NOT EXISTS (SELECT 1 FROM payments WHERE sale_id = ?)`), id, id, id)
	if err != nil {
		return fmt.Errorf("sqlstore: delete sale %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlstore: delete sale %s: %w", id, err)
	} else if n == 1 {
		return nil
	}
	if _, _, err := s.Sale(ctx, id); err != nil {
		return err
	}
	return seckill.Errorf(seckill.CodeConflict, "sale %q has reservations or payments", id)
}

// UpdateSale stores a changed definition (name, price, stock, holdback, window, limits,
// listed; not the currency nor preheat_seconds, which never change once the sale exists:
// the definitions passed here come from the engine, and the Redis engine's answer does not
// carry preheat_seconds, so writing it would reset it to 0). It
// never touches sold, which only the payment transaction moves. A change that would leave
// sold above the new sellable is refused as a conflict by the CHECK on sales.
func (s *Store) UpdateSale(ctx context.Context, sale seckill.Sale) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// Existence is read first rather than inferred from rows affected: MySQL reports
		// zero rows affected for an UPDATE that changes nothing.
		var one int
		err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM sales WHERE id = ?`+s.d.forUpdate), sale.ID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", sale.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlstore: update sale %s: %w", sale.ID, err)
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE sales SET name = ?, price_cents = ?, stock = ?, holdback = ?,
			starts_at = ?, ends_at = ?, per_user_limit = ?, hold_seconds = ?, queue_limit = ?, listed = ?
			WHERE id = ?`),
			sale.Name, sale.PriceCents, sale.Stock, sale.Holdback, toMillis(sale.StartsAt),
			toMillis(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds, sale.QueueLimit, sale.Listed, sale.ID)
		if s.d.classify(err) == checkViolation {
			return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeConflict,
				"sale %q: stock %d with holdback %d is invalid or below the units already sold",
				sale.ID, sale.Stock, sale.Holdback), err)
		}
		if err != nil {
			return fmt.Errorf("sqlstore: update sale %s: %w", sale.ID, err)
		}
		return nil
	})
}

// Sale returns one sale and its sold units, or not_found.
func (s *Store) Sale(ctx context.Context, id string) (seckill.Sale, int, error) {
	sale, sold, err := scanSale(s.rdb.QueryRowContext(ctx, s.q(`SELECT `+saleColumns+` FROM sales WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.Sale{}, 0, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
	}
	if err != nil {
		return seckill.Sale{}, 0, fmt.Errorf("sqlstore: sale %s: %w", id, err)
	}
	return sale, sold, nil
}

// SaleSegments is the number of segments the sale was created with (seckill.Sale.Segments, at
// least 1), or 0 when it is not known (a sale created before the store kept it). The definition
// that Sale returns leaves Segments at 0 (an engine loads a sale read back as one segment); the
// Redis engine's rebuild asks this to know which segments a lost sale may have left behind.
func (s *Store) SaleSegments(ctx context.Context, id string) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT segments FROM sales WHERE id = ?`), id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: segments of sale %s: %w", id, err)
	}
	return n, nil
}

// Sales lists every sale, oldest first (ties by id), with the sold units at the same index.
func (s *Store) Sales(ctx context.Context) ([]seckill.Sale, []int, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+saleColumns+` FROM sales ORDER BY created_at, id`)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlstore: sales: %w", err)
	}
	defer rows.Close()
	sales, solds := []seckill.Sale{}, []int{}
	for rows.Next() {
		sale, sold, err := scanSale(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlstore: sales: %w", err)
		}
		sales, solds = append(sales, sale), append(solds, sold)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sqlstore: sales: %w", err)
	}
	return sales, solds, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanSale(row scanner) (seckill.Sale, int, error) {
	var (
		sale                            seckill.Sale
		startsAt, endsAt, createdAt, sd int64
	)
	err := row.Scan(&sale.ID, &sale.Name, &sale.PriceCents, &sale.Stock, &sale.Holdback, &startsAt, &endsAt,
		&sale.PerUserLimit, &sale.HoldSeconds, &sale.QueueLimit, &createdAt, &sd, &sale.Listed, &sale.Currency, &sale.Incarnation,
		&sale.PreheatSeconds)
	if err != nil {
		return seckill.Sale{}, 0, err
	}
	sale.StartsAt, sale.EndsAt, sale.CreatedAt = fromMillis(startsAt), fromMillis(endsAt), fromMillis(createdAt)
	return sale, int(sd), nil
}
