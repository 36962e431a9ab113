package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/seckill-go/seckill"
)

// The set-wise path of ApplyEvents. Storing the held events of a buy rush one statement at a
// time cost more than the rush itself: an INSERT per event (on SQLite, each one parsed anew)
// and, for each that was already there, a read and an update. Here a batch costs one locking
// read of the rows it touches, multi-row INSERTs of the new reservations (SQLite: INSERTs
// prepared when the store opens; MySQL: INSERTs prepared on the server), and one UPDATE per
// stored row that changes, with the result of the one-by-one path. A reservation created by
// its first event in the batch is inserted without being read first: on SQLite in multi-row
// INSERTs that fail on an id already there, the rows of such an INSERT then inserted one at a
// time, each read only if it turns out to be there already (insertFirst, insertOrMerge); on
// server databases with the others, the attempt starting over with every row read if one was
// there (insertWithoutRead).
//
// Why the results are the same: the one-by-one path inserts the first event of a new
// reservation and merges each later one into the row it just wrote; for a stored reservation
// it merges each event into the row as stored. Every one of those rows is held by the
// transaction (SQLite: the one writer; server databases: the locking read, or the uncommitted
// insert that a concurrent insert of the same id waits for), and a row round-trips through the
// database unchanged, so folding merge over a reservation's events in memory, from the same
// starting row and in the same order, gives the row that the last statement of the one-by-one
// path would have left, and writing only that row is the same commit. Rows of different
// reservations do not interact (no triggers; the foreign key reads sales, which events never
// write), so the order in which they are written does not matter. On SQLite a multi-row
// INSERT that fails (an id already there: a unique violation) is undone by SQLite alone, the
// transaction going on, so its rows are as they were before it, and each is then decided
// on its own as above: inserted, or its events merged into the stored row.
//
// What the set-wise path does not decide itself, it hands to the one-by-one path in a fresh
// transaction (errBatchFallback): a reservation that another transaction inserted between the
// locking read and the INSERT (the INSERT then affects fewer rows than it was given: there is
// no portable way to learn which were skipped, so the stored row the events must be merged
// into is unknown), and a missing sale (the foreign key: the one-by-one path names the event).

// errBatchFallback ends a set-wise attempt whose outcome only the one-by-one path can
// decide; nothing of the attempt is committed.
var errBatchFallback = errors.New("sqlstore: batch needs the one-by-one path")

const (
	// batchLockIDs bounds the ids of one locking read (an IN list), far below every
	// database's limit on parameters (SQLite 32766, PostgreSQL 65535).
	batchLockIDs = 500
	// batchInsertRows bounds the rows of one INSERT on a server database: 12 parameters each.
	batchInsertRows = 100
	// preparedInsertRows is the largest prepared INSERT (dialect.preparedInserts): 1536
	// parameters, far below MySQL's 65535.
	preparedInsertRows = 128
	// sqliteInsertRows is the largest multi-row INSERT on SQLite (insertChunks). SQLite copies
	// the pages such an INSERT changes to its statement journal, in memory up to 64 KiB and in
	// a temporary file beyond: a rush's batch over four sales wrote one for INSERTs of 128
	// rows, none for 64, which cost as little CPU per event as any of 32 to 256 rows. The rows
	// of an INSERT that finds an id already there are inserted again one at a time.
	sqliteInsertRows = 64
	// batchPrepareUpdates is the number of changed rows from which the UPDATE is prepared once
	// for the batch rather than sent (and, on SQLite, compiled) for each row.
	batchPrepareUpdates = 4
)

// applyBatch applies rows, sorted by id (stable, so each reservation's events are in the
// order they were sent), in tx. With trustCreations, reservations that insertWithoutRead
// picks skip the locking read.
func (s *Store) applyBatch(ctx context.Context, tx *sql.Tx, rows []resRow, trustCreations bool) error {
	var ins inserter
	defer ins.close()
	var runs []lockRun   // in id order: the reservations read first and those inserted without a read
	var first [][]resRow // SQLite: the reservations inserted before any read (insertFirst)
	var changed []resRow
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].id == rows[i].id {
			j++
		}
		g := rows[i:j]
		i = j
		if trustCreations && s.insertWithoutRead(g[0]) {
			runs = lockRunAdd(runs, false, g)
			continue
		}
		if s.insertFirst(g[0]) {
			first = append(first, g)
		} else {
			runs = lockRunAdd(runs, true, g)
		}
	}
	if len(first) > 0 {
		var err error
		if changed, err = s.insertOrMerge(ctx, tx, &ins, first, changed); err != nil {
			return err
		}
	}
	// Run by run, in id order: a reservation one consumer inserts without a read (its
	// creation) can be one another consumer reads first (a later event of it), so locking all
	// the read rows and then inserting all the new ones took two overlapping sets in opposite
	// orders, a deadlock seen on MariaDB (docs/DECISIONS.md, "One lock order for the sale's
	// row"). In a rush a batch is nearly all creations, and later events are of older, lower
	// ids: a run or two.
	if s.d.name != sqliteDialect.name {
		var err error
		if runs, err = s.splitReadRuns(ctx, tx, runs); err != nil {
			return err
		}
	}
	for _, run := range runs {
		var fresh []resRow
		if run.read {
			ids := make([]string, len(run.groups))
			for i, g := range run.groups {
				ids[i] = g[0].id
			}
			stored, err := s.lockReservations(ctx, tx, ids)
			if err != nil {
				return err
			}
			for _, g := range run.groups {
				if cur, ok := stored[g[0].id]; ok {
					if next := fold(cur, g); next != cur {
						changed = append(changed, next)
					}
				} else {
					fresh = append(fresh, fold(g[0], g[1:]))
				}
			}
		} else {
			for _, g := range run.groups {
				fresh = append(fresh, fold(g[0], g[1:]))
			}
		}
		if len(fresh) == 0 {
			continue
		}
		if testHookBeforeInsert != nil {
			testHookBeforeInsert(fresh)
		}
		if err := s.insertReservations(ctx, tx, &ins, fresh); err != nil {
			return err
		}
	}
	return s.updateReservations(ctx, tx, changed)
}

// lockRun is a run of consecutive reservations (in id order) of one kind: read and locked
// first (read), or inserted without a read.
type lockRun struct {
	read   bool
	groups [][]resRow // each reservation's rows, in event order
}

// splitReadRuns splits each run to be read at the reservations that are not stored yet, which
// become runs inserted without a read, in their place in id order. It asks which are stored
// without locking anything. Read and locked together, the stored rows of a run were locked up
// to its highest id before a missing one among them was inserted, against the one order: a
// consumer holding a later event of reservation R (stored by none yet) locked R's successors,
// then waited to insert R, which another consumer had just inserted and which then wanted one
// of those successors (a deadlock seen on MariaDB). A row stored between this look and the
// insert makes the insert fall short (errBatchFallback), and the batch is run again.
func (s *Store) splitReadRuns(ctx context.Context, tx *sql.Tx, runs []lockRun) ([]lockRun, error) {
	var out []lockRun
	for _, run := range runs {
		if !run.read {
			out = append(out, run)
			continue
		}
		ids := make([]string, len(run.groups))
		for i, g := range run.groups {
			ids[i] = g[0].id
		}
		stored, err := s.storedIDs(ctx, tx, ids)
		if err != nil {
			return nil, err
		}
		for _, g := range run.groups {
			out = lockRunAdd(out, stored[g[0].id], g)
		}
	}
	return out, nil
}

// storedIDs returns which of ids are stored, with a plain (non-locking) read.
func (s *Store) storedIDs(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
	stored := make(map[string]bool, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), batchLockIDs)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT id FROM reservations WHERE id IN (`+placeholders(len(chunk))+`)`), args...)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: look up %d reservations: %w", len(chunk), err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlstore: look up reservations: %w", err)
			}
			stored[id] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("sqlstore: look up reservations: %w", err)
		}
	}
	return stored, nil
}

// lockRunAdd appends a reservation's rows g to the last run if it is of g's kind, or to a
// new run.
func lockRunAdd(runs []lockRun, read bool, g []resRow) []lockRun {
	if n := len(runs); n > 0 && runs[n-1].read == read {
		runs[n-1].groups = append(runs[n-1].groups, g)
		return runs
	}
	return append(runs, lockRun{read: read, groups: [][]resRow{g}})
}

// insertFirst reports whether a reservation whose first event in the batch is first is
// inserted without reading it first (insertOrMerge). Only on SQLite, where nothing else writes
// while the transaction runs, and only when the event is the reservation's creation (a buy's
// hold or queue place, stamped at the moment the reservation was created, as
// insertWithoutRead): in a rush nearly every event is one, and the reservation is almost
// always new. Anything else (a queue place granted its hold, an expiry, a cancellation...) is
// most likely an update of a stored row, read with the others at once.
func (s *Store) insertFirst(first resRow) bool {
	return s.d.name == sqliteDialect.name && creation(first)
}

// creation reports whether an event row is a reservation's creation: held or queued, at the
// moment the reservation was created.
func creation(r resRow) bool {
	return r.status.Rank() <= seckill.StatusHeld.Rank() && r.createdAt == r.updatedAt
}

// insertWithoutRead reports whether a reservation whose first event in the batch is first
// goes to the multi-row INSERT without the locking read. Only on server databases, and only
// when the event is the reservation's creation: a buy's hold or queue place, stamped at the
// moment the reservation was created. In a rush nearly every event is one, and most such rows
// are not there yet, so reading them first cost a lookup (and, on MySQL, a gap lock) per row
// for nothing. The row can be there already: the event was stored before (a consumer died
// between its commit and its acknowledgement), a payment recorded the reservation before its
// events arrived, a later event was stored first by another consumer, or a queue place was
// granted its hold within the millisecond of its creation. The INSERT then affects fewer rows
// than it was given and the whole attempt is rolled back (errBatchFallback); ApplyEvents runs
// the batch again with every row read first, which decides all of these as before.
func (s *Store) insertWithoutRead(first resRow) bool {
	return s.d.name != sqliteDialect.name && creation(first)
}

// testHookBeforeInsert, when set by a test, runs between the locking read and the INSERT, to
// insert a row concurrently. Always nil outside tests.
var testHookBeforeInsert func(fresh []resRow)

// fold merges events, in order, into cur, as a row stored, read back and merged again for
// each event would end.
func fold(cur resRow, events []resRow) resRow {
	for _, in := range events {
		cur, _ = merge(cur, in)
	}
	return cur
}

// lockReservations reads the stored rows among ids (sorted) and, on server databases, locks
// them until the transaction ends, as lockReservation does for one, in id order: without ORDER
// BY, PostgreSQL locks the rows in the order its plan finds them (a bitmap scan: the order of
// the table's pages), and two transactions that lock an overlapping set in different orders
// can deadlock.
func (s *Store) lockReservations(ctx context.Context, tx *sql.Tx, ids []string) (map[string]resRow, error) {
	stored := make(map[string]resRow)
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), batchLockIDs)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT `+resColumns+` FROM reservations WHERE id IN (`+
			placeholders(len(chunk))+`) ORDER BY id`+s.d.forUpdate), args...)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: read %d reservations: %w", len(chunk), err)
		}
		for rows.Next() {
			var r resRow
			if err := r.scan(rows); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlstore: read reservations: %w", err)
			}
			stored[r.id] = r
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("sqlstore: read reservations: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sqlstore: read reservations: %w", err)
		}
	}
	return stored, nil
}

// insertReservations inserts rows, none of which the locking read found, skipping an id
// already present. Fewer rows inserted than given (another transaction inserted one of the
// ids meanwhile) or a missing sale is errBatchFallback.
//
// Server databases get multi-row INSERTs: one round trip per batchInsertRows rows on
// PostgreSQL, per power-of-two chunk of up to preparedInsertRows on MySQL. SQLite gets the
// multi-row INSERTs of insertChunks (ins), which fail on an id already present.
func (s *Store) insertReservations(ctx context.Context, tx *sql.Tx, ins *inserter, rows []resRow) error {
	if s.d.name == sqliteDialect.name {
		return s.insertChunks(ctx, tx, ins, rows, func(int, int) error { return errBatchFallback })
	}
	for len(rows) > 0 {
		size := min(len(rows), batchInsertRows)
		if s.d.preparedInserts {
			size = preparedInsertRows
			for size > len(rows) {
				size /= 2
			}
		}
		chunk := rows[:size]
		rows = rows[size:]
		args := make([]any, 0, 12*size)
		for _, r := range chunk {
			args = append(args, insertReservationArgs(s.d, r)...)
		}
		var res sql.Result
		var err error
		if s.d.preparedInserts {
			res, err = tx.StmtContext(ctx, s.inserts.stmts[size]).ExecContext(ctx, args...)
		} else {
			res, err = tx.ExecContext(ctx, s.insertRowsSQL(size), args...)
		}
		n, err := s.inserted(res, err, size)
		if err != nil {
			return err
		}
		if n != int64(len(chunk)) {
			return errBatchFallback
		}
	}
	return nil
}

// preparedInserts holds the multi-row INSERTs prepared on the server, one per size, for
// dialects with preparedInserts. Sizes are powers of two up to preparedInsertRows, so a batch
// of n rows takes one statement per set bit of n below the largest (125 rows: 64 + 32 + 16 +
// 8 + 4 + 1) and at most eight statements exist per connection. All are prepared when the
// store opens, outside any transaction: preparing needs a connection of its own, and taking
// one from inside a transaction that holds another could wait forever on a full pool.
// database/sql then prepares each again, once, on every connection that runs it, on the
// transaction's own connection (Tx.StmtContext).
type preparedInserts struct {
	stmts map[int]*sql.Stmt
}

// prepare prepares query(size) for every size up to maxRows.
func (p *preparedInserts) prepare(ctx context.Context, s *Store, maxRows int, query func(n int) string) error {
	p.stmts = make(map[int]*sql.Stmt)
	for size := 1; size <= maxRows; size *= 2 {
		stmt, err := s.db.PrepareContext(ctx, query(size))
		if err != nil {
			return fmt.Errorf("sqlstore: prepare insert of %d reservations: %w", size, err)
		}
		p.stmts[size] = stmt
	}
	return nil
}

// close closes every prepared statement.
func (p *preparedInserts) close() error {
	var errs []error
	for _, stmt := range p.stmts {
		errs = append(errs, stmt.Close())
	}
	p.stmts = nil
	return errors.Join(errs...)
}

// insertOrMerge inserts, on SQLite, the reservations of groups (each one reservation's rows,
// in event order, sorted by id) as their events leave them, in multi-row INSERTs. The rows of
// an INSERT that finds an id already there are then inserted one at a time, and the events of
// each reservation that was there are merged into the stored row instead, which is appended
// to changed if that changes it. The one-by-one path does the same, event by event.
func (s *Store) insertOrMerge(ctx context.Context, tx *sql.Tx, ins *inserter, groups [][]resRow, changed []resRow) ([]resRow, error) {
	rows := make([]resRow, len(groups))
	for i, g := range groups {
		rows[i] = fold(g[0], g[1:])
	}
	err := s.insertChunks(ctx, tx, ins, rows, func(from, to int) error {
		for k := from; k < to; k++ {
			inserted, err := ins.insert(ctx, s, tx, rows[k])
			if err != nil {
				return err
			}
			if inserted {
				continue
			}
			cur, err := s.lockReservation(ctx, tx, rows[k].id)
			if err != nil {
				return err
			}
			if next := fold(cur, groups[k]); next != cur {
				changed = append(changed, next)
			}
		}
		return nil
	})
	return changed, err
}

// insertChunks inserts rows (each id once) on SQLite, in the multi-row INSERTs prepared when
// the store opened, power-of-two chunks of up to sqliteInsertRows rows. None skips an id
// already present: such an INSERT fails, a unique violation, and SQLite undoes that statement
// alone from its statement journal, the transaction going on, so the rows of that chunk are
// as they were, and conflict is called with the chunk's bounds in rows to decide them
// otherwise. (An INSERT … ON CONFLICT DO NOTHING RETURNING id, which tells which ids it
// skipped, cost about a fifth more CPU per event: SQLite buffers the returned rows, and each id
// comes back through the driver as a string.) A missing sale is errBatchFallback.
func (s *Store) insertChunks(ctx context.Context, tx *sql.Tx, ins *inserter, rows []resRow, conflict func(from, to int) error) error {
	args := make([]any, 0, 12*min(len(rows), sqliteInsertRows))
	for from := 0; from < len(rows); {
		size := sqliteInsertRows
		for size > len(rows)-from {
			size /= 2
		}
		args = args[:0]
		for _, r := range rows[from : from+size] {
			args = appendReservationArgs(args, s.d, r)
		}
		_, err := ins.chunk(ctx, s, tx, size).ExecContext(ctx, args...)
		switch {
		case err == nil:
		case s.d.classify(err) == uniqueViolation:
			err = conflict(from, from+size)
		default:
			err = s.insertErr(err, size)
		}
		if err != nil {
			return err
		}
		from += size
	}
	return nil
}

// inserter holds the INSERTs of one transaction: a single-row INSERT skipping an id already
// present, prepared for the transaction when first needed, and, on SQLite, the store's
// multi-row INSERTs (insertChunks) bound to the transaction.
type inserter struct {
	stmt   *sql.Stmt
	chunks map[int]*sql.Stmt
}

// chunk returns the store's multi-row INSERT of size rows, bound to tx.
func (ins *inserter) chunk(ctx context.Context, s *Store, tx *sql.Tx, size int) *sql.Stmt {
	if stmt, ok := ins.chunks[size]; ok {
		return stmt
	}
	if ins.chunks == nil {
		ins.chunks = make(map[int]*sql.Stmt)
	}
	stmt := tx.StmtContext(ctx, s.inserts.stmts[size])
	ins.chunks[size] = stmt
	return stmt
}

// insert inserts row unless its id exists, reporting whether it did. A missing sale is
// errBatchFallback: the one-by-one path names the event.
func (ins *inserter) insert(ctx context.Context, s *Store, tx *sql.Tx, row resRow) (bool, error) {
	if ins.stmt == nil {
		stmt, err := tx.PrepareContext(ctx, s.insertRowsSQL(1))
		if err != nil {
			return false, fmt.Errorf("sqlstore: insert reservations: %w", err)
		}
		ins.stmt = stmt
	}
	res, err := ins.stmt.ExecContext(ctx, insertReservationArgs(s.d, row)...)
	n, err := s.inserted(res, err, 1)
	return n == 1, err
}

func (ins *inserter) close() {
	if ins.stmt != nil {
		_ = ins.stmt.Close()
	}
	for _, stmt := range ins.chunks {
		_ = stmt.Close()
	}
}

// inserted reads the outcome of an INSERT of n rows that skips ids already present: the
// number of rows it inserted. A missing sale is errBatchFallback.
func (s *Store) inserted(res sql.Result, err error, n int) (int64, error) {
	if err != nil {
		return 0, s.insertErr(err, n)
	}
	got, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlstore: insert %d reservations: %w", n, err)
	}
	return got, nil
}

// insertErr is the error of a failed INSERT of n reservation rows: errBatchFallback for a
// missing sale.
func (s *Store) insertErr(err error, n int) error {
	if s.d.classify(err) == foreignKeyViolation {
		return errBatchFallback
	}
	return fmt.Errorf("sqlstore: insert %d reservations: %w", n, err)
}

// insertSQL caches the multi-row INSERT statements by dialect and row count.
var insertSQL sync.Map // insertKey → string

type insertKey struct {
	dialect string
	rows    int
}

// insertRowsSQL is the INSERT of n reservation rows, ignoring ids already present (one row
// affected per row inserted, as insertReservation relies on for one).
func (s *Store) insertRowsSQL(n int) string {
	key := insertKey{s.d.name, n}
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	q := s.q(s.d.insertIgnore(insertValuesSQL(n), "id"))
	insertSQL.Store(key, q)
	return q
}

// insertNewSQL is the INSERT of n reservation rows that fails on an id already present
// (insertChunks).
func (s *Store) insertNewSQL(n int) string { return s.q(insertValuesSQL(n)) }

// insertValuesSQL is "INSERT INTO reservations (…) VALUES" n rows of '?' placeholders.
func insertValuesSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO reservations (` + resColumns + `) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// updateReservations writes the mutable fields of rows, as updateReservation does for one.
func (s *Store) updateReservations(ctx context.Context, tx *sql.Tx, rows []resRow) error {
	if len(rows) < batchPrepareUpdates {
		for _, r := range rows {
			if err := s.updateReservation(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, s.q(updateReservationSQL))
	if err != nil {
		return fmt.Errorf("sqlstore: update reservations: %w", err)
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, updateReservationArgs(r)...); err != nil {
			return fmt.Errorf("sqlstore: update reservation %s: %w", r.id, err)
		}
	}
	return nil
}
