package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill"
)

const saleColumns = `id, name, price_cents, stock, holdback, starts_at, ends_at,
	per_user_limit, hold_seconds, queue_limit, created_at, sold, listed, currency, incarnation, preheat_seconds, waiting_room`

// CreateSale inserts a sale with nothing sold. An existing id is a conflict, detected from the
// driver's unique-violation code so that two concurrent creates cannot both succeed. A zero
// CreatedAt is stamped with the current time so that Sales can list oldest first.
func (s *Store) CreateSale(ctx context.Context, sale seckill.Sale) error {
	if err := sale.Validate(); err != nil {
		return err
	}
	room, err := roomColumn(sale.Room)
	if err != nil {
		return fmt.Errorf("sqlstore: create sale %s: %w", sale.ID, err)
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO sales (id, name, price_cents, stock, holdback,
		starts_at, ends_at, per_user_limit, hold_seconds, queue_limit, created_at, sold, listed, currency, incarnation, segments, preheat_seconds,
		waiting_room)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`),
		sale.ID, sale.Name, sale.PriceCents, sale.Stock, sale.Holdback,
		toMillis(sale.StartsAt), toMillis(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
		sale.QueueLimit, toMillis(s.stamp(sale.CreatedAt)), sale.Listed, sale.Currency, sale.Incarnation, sale.SegmentCount(),
		sale.PreheatSeconds, room)
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
//
// The sale's rows in other tables go with it in the same transaction: sale_versions by its
// foreign key (ON DELETE CASCADE), the waiting room's journal (room_entrants, room_admissions,
// of every incarnation under the id: none is live once the sale is gone) by DELETEs here.
func (s *Store) DeleteSale(ctx context.Context, id string) error {
	deleted := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		deleted = false
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM sales WHERE id = ? AND sold = 0
			AND NOT EXISTS (SELECT 1 FROM reservations WHERE sale_id = ?)
			AND NOT EXISTS (SELECT 1 FROM payments WHERE sale_id = ?)`), id, id, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n != 1 {
			return err
		}
		for _, q := range []string{`DELETE FROM room_entrants WHERE sale_id = ?`, `DELETE FROM room_admissions WHERE sale_id = ?`} {
			if _, err := tx.ExecContext(ctx, s.q(q), id); err != nil {
				return err
			}
		}
		deleted = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlstore: delete sale %s: %w", id, err)
	}
	if deleted {
		return nil
	}
	if _, _, err := s.Sale(ctx, id); err != nil {
		return err
	}
	return seckill.Errorf(seckill.CodeConflict, "sale %q has reservations or payments", id)
}

// UpdateSale stores a changed definition (name, price, stock, holdback, window, limits,
// listed; not the currency, preheat_seconds nor the waiting room, which never change once the
// sale exists: the definitions passed here come from the engine, whose answer may not carry
// them, so writing them would reset them). It
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
		room                            sql.NullString
	)
	err := row.Scan(&sale.ID, &sale.Name, &sale.PriceCents, &sale.Stock, &sale.Holdback, &startsAt, &endsAt,
		&sale.PerUserLimit, &sale.HoldSeconds, &sale.QueueLimit, &createdAt, &sd, &sale.Listed, &sale.Currency, &sale.Incarnation,
		&sale.PreheatSeconds, &room)
	if err != nil {
		return seckill.Sale{}, 0, err
	}
	sale.StartsAt, sale.EndsAt, sale.CreatedAt = fromMillis(startsAt), fromMillis(endsAt), fromMillis(createdAt)
	if sale.Room, err = roomOf(room); err != nil {
		return seckill.Sale{}, 0, fmt.Errorf("sale %s: %w", sale.ID, err)
	}
	return sale, int(sd), nil
}

// roomColumn is the sales.waiting_room value of a policy: its JSON (the API's waiting_room
// object, every field written), or NULL for a sale without a room (docs/DECISIONS.md "A
// sale's waiting room in the database"). One column rather than one per field: the policy is
// written once and read whole, never searched or changed by SQL, and a field added to it later
// needs no migration.
func roomColumn(p *seckill.RoomPolicy) (any, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("waiting_room: %w", err)
	}
	return string(b), nil
}

// roomOf reads sales.waiting_room back: NULL (a sale without a room, or stored before the
// column existed) is nil. A value that is not a policy's JSON is an error rather than no room:
// reading a sale that has a room as one without would let its crowd past the room.
func roomOf(col sql.NullString) (*seckill.RoomPolicy, error) {
	if !col.Valid {
		return nil, nil
	}
	var p seckill.RoomPolicy
	if err := json.Unmarshal([]byte(col.String), &p); err != nil {
		return nil, fmt.Errorf("waiting_room %q: %w", col.String, err)
	}
	return &p, nil
}
