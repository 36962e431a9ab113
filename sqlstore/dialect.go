package sqlstore

import (
	"errors"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// violation is the kind of constraint a statement broke, read from the driver's error code.
type violation int

const (
	noViolation violation = iota
	uniqueViolation
	foreignKeyViolation
	checkViolation
)

// dialect is everything that differs between the SQL databases the store supports. The
// queries themselves are written once, in SQL that all of them accept.
type dialect struct {
	// name is also the migrations directory: migrations/<name>/NNNN_name.sql.
	name string
	// dollarParams is true when placeholders are $1, $2, … (PostgreSQL) instead of ?.
	dollarParams bool
	// forUpdate locks the rows a SELECT reads until the transaction ends: " FOR UPDATE" on
	// MySQL and PostgreSQL. SQLite has no row locks and needs none: a write transaction
	// (BEGIN IMMEDIATE) already excludes every other writer.
	forUpdate string
	// insertIgnore turns "INSERT INTO t (…) VALUES (…)" into a statement that inserts nothing,
	// and reports zero rows affected, when the primary key pk already exists. It is how
	// concurrent upserts avoid a read-then-insert race on server databases.
	insertIgnore func(insert, pk string) string
	// classify reads a driver error's code (never its text) to tell which constraint failed.
	classify func(err error) violation
}

// sqliteDialect is SQLite through modernc.org/sqlite.
var sqliteDialect = dialect{
	name: "sqlite",
	insertIgnore: func(insert, pk string) string {
		return insert + " ON CONFLICT (" + pk + ") DO NOTHING"
	},
	classify: func(err error) violation {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return noViolation
		}
		// The driver turns on extended result codes, so the code names the constraint kind.
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return uniqueViolation
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return foreignKeyViolation
		case sqlite3.SQLITE_CONSTRAINT_CHECK:
			return checkViolation
		}
		return noViolation
	},
}

// rebind rewrites the '?' placeholders of query for the dialect. Queries never contain a
// literal '?', so no quoting needs to be understood.
func (d dialect) rebind(query string) string {
	if !d.dollarParams || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// placeholders returns "?, ?, …" with n marks, for IN lists.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
