package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
)

var _ seckill.RoomJournal = (*Store)(nil)

// maxIncarnationBytes bounds a sale's incarnation (the service makes 16 hex digits).
const maxIncarnationBytes = 32

// checkRoomKey checks a journal row's sale, incarnation and entrant against the columns.
func checkRoomKey(saleID, incarnation, entrant string) error {
	if saleID == "" || (entrant != "" && !seckill.ValidEntrant(entrant)) {
		return seckill.Errorf(seckill.CodeInvalidArgument, "room journal: an empty sale id or an entrant that is not 32 lower-case hex digits")
	}
	return checkWidths("room journal", field{"sale id", saleID, maxSaleIDBytes},
		field{"incarnation", incarnation, maxIncarnationBytes})
}

// AddRoomEntrants implements seckill.RoomJournal: one multi-row INSERT that leaves rows stored
// before as they are (insertIgnore), in one statement (atomic: all or none).
func (s *Store) AddRoomEntrants(ctx context.Context, es []seckill.RoomEntrant) error {
	if len(es) == 0 {
		return nil
	}
	if len(es) > seckill.MaxRoomJournalBatch {
		return seckill.Errorf(seckill.CodeInvalidArgument, "room journal: %d entrants in one batch, at most %d", len(es), seckill.MaxRoomJournalBatch)
	}
	args := make([]any, 0, 6*len(es))
	var b strings.Builder
	b.WriteString(`INSERT INTO room_entrants (sale_id, incarnation, entrant, arrival, drawn, joined_at) VALUES `)
	for i, e := range es {
		if err := checkRoomKey(e.SaleID, e.Incarnation, e.Entrant); err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?)")
		drawn := 0
		if e.Drawn {
			drawn = 1
		}
		args = append(args, e.SaleID, e.Incarnation, e.Entrant, e.Arrival, drawn, toMillis(e.JoinedAt))
	}
	q := s.d.insertIgnore(b.String(), "sale_id, incarnation, entrant")
	if _, err := s.db.ExecContext(ctx, s.q(q), args...); err != nil {
		return fmt.Errorf("sqlstore: add room entrants: %w", err)
	}
	return nil
}

// RoomEntrants implements seckill.RoomJournal.
func (s *Store) RoomEntrants(ctx context.Context, saleID, incarnation string) ([]seckill.RoomEntrant, error) {
	if err := checkRoomKey(saleID, incarnation, ""); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT entrant, arrival, drawn, joined_at FROM room_entrants
		WHERE sale_id = ? AND incarnation = ? ORDER BY arrival, entrant`), saleID, incarnation)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: room entrants of %s: %w", saleID, err)
	}
	defer rows.Close()
	var out []seckill.RoomEntrant
	for rows.Next() {
		var (
			id            []byte
			arrival, join int64
			drawn         int
		)
		if err := rows.Scan(&id, &arrival, &drawn, &join); err != nil {
			return nil, fmt.Errorf("sqlstore: room entrants of %s: %w", saleID, err)
		}
		out = append(out, seckill.RoomEntrant{SaleID: saleID, Incarnation: incarnation, Entrant: string(id),
			Arrival: arrival, Drawn: drawn == 1, JoinedAt: fromMillis(join)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: room entrants of %s: %w", saleID, err)
	}
	return out, nil
}

// SetRoomAdmitted implements seckill.RoomJournal: the row is made at n if absent, else raised
// to n by a guarded UPDATE (never lowered), so concurrent admitters need no lock.
func (s *Store) SetRoomAdmitted(ctx context.Context, saleID, incarnation string, n int64, at time.Time) error {
	if err := checkRoomKey(saleID, incarnation, ""); err != nil {
		return err
	}
	if n < 0 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "room journal: a negative count of admissions")
	}
	ms := toMillis(at)
	ins := s.d.insertIgnore(`INSERT INTO room_admissions (sale_id, incarnation, admitted, admitted_at) VALUES (?, ?, ?, ?)`,
		"sale_id, incarnation")
	if _, err := s.db.ExecContext(ctx, s.q(ins), saleID, incarnation, n, ms); err != nil {
		return fmt.Errorf("sqlstore: room admissions of %s: %w", saleID, err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE room_admissions SET admitted = ?, admitted_at = ?
		WHERE sale_id = ? AND incarnation = ? AND admitted < ?`), n, ms, saleID, incarnation, n); err != nil {
		return fmt.Errorf("sqlstore: room admissions of %s: %w", saleID, err)
	}
	return nil
}

// RoomAdmitted implements seckill.RoomJournal.
func (s *Store) RoomAdmitted(ctx context.Context, saleID, incarnation string) (seckill.RoomAdmissions, error) {
	if err := checkRoomKey(saleID, incarnation, ""); err != nil {
		return seckill.RoomAdmissions{}, err
	}
	var n, ms int64
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT admitted, admitted_at FROM room_admissions
		WHERE sale_id = ? AND incarnation = ?`), saleID, incarnation).Scan(&n, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.RoomAdmissions{}, nil
	}
	if err != nil {
		return seckill.RoomAdmissions{}, fmt.Errorf("sqlstore: room admissions of %s: %w", saleID, err)
	}
	return seckill.RoomAdmissions{Count: n, At: fromMillis(ms)}, nil
}
