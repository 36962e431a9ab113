package sqlstore

import (
	"context"
	"fmt"
)

// claimDue takes up to limit due rows of a table of background work (refunds, gateway_payments:
// both keyed by payment_id, with next_attempt_at, attempts, lease_owner and lease_until) and
// returns the ids it took, the longest due first. due is the SQL condition of a due row and
// dueArgs its placeholders' values; set (with setArgs) is what a claim changes besides counting
// the attempt.
//
// Candidates are read first, then each is taken by an UPDATE that repeats the condition: the
// database re-checks it on the latest committed row once it holds the row's lock (SQLite
// serializes writers; InnoDB's UPDATE reads the current row; PostgreSQL re-evaluates the WHERE
// after waiting at READ COMMITTED), so of two instances claiming at once exactly one changes
// the row, and only that one returns it.
func (s *Store) claimDue(ctx context.Context, table, due string, dueArgs []any, set string, setArgs []any, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT payment_id FROM `+table+` WHERE `+due+`
		ORDER BY next_attempt_at, payment_id LIMIT ?`), append(dueArgs[:len(dueArgs):len(dueArgs)], limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: due %s: %w", table, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlstore: due %s: %w", table, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: due %s: %w", table, err)
	}
	var claimed []string
	for _, id := range ids {
		args := append(append(append([]any{}, setArgs...), id), dueArgs...)
		res, err := s.db.ExecContext(ctx, s.q(`UPDATE `+table+` SET `+set+`, attempts = attempts + 1
			WHERE payment_id = ? AND `+due), args...)
		if err != nil {
			return claimed, fmt.Errorf("sqlstore: claim %s %s: %w", table, id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			continue // another instance claimed it first
		}
		claimed = append(claimed, id)
	}
	return claimed, nil
}
