-- 0007_export_outbox: the order store's side of the event export (docs/EVENTS.md, "The order
-- store's outbox").
--
--   * export_outbox holds every exported event: written in the transaction that made it (the
--     payment and refund transactions always; ApplyEvents when the memory engine runs, which
--     has no outbox of its own). seq is the read position: taken from export_seq in the
--     writing transaction, so entries become visible in seq order (see export_seq). event_id
--     is the export.Event id; an event written twice is stored once. at is the event's time
--     (milliseconds, UTC), by which the exporter trims old entries; body is the export.Event
--     JSON as exported.
--   * export_seq is one row: the last seq taken. A writing transaction takes its seqs with an
--     UPDATE of that row, as its last statement before committing, and the row's lock (here:
--     SQLite's one writer) holds every other writer until it commits, so a smaller seq never
--     becomes visible after a larger one. Not an auto-increment key: concurrent transactions
--     take ids in one order and commit in another, and a reader that had passed an id would
--     skip the entry that became visible late (docs/DECISIONS.md).
--   * export_cursors: each sink's position (the last seq it delivered), leased to one
--     exporter instance at a time (owner until lease_until, milliseconds).
--   * export_dead_letters: events a sink gave up on, with the reason, until an operator
--     replays them (replayed_at set) or the exporter trims them.

CREATE TABLE export_outbox (
    seq            INTEGER NOT NULL PRIMARY KEY,
    event_id       TEXT    NOT NULL,
    sale_id        TEXT    NOT NULL,
    reservation_id TEXT    NOT NULL,
    type           TEXT    NOT NULL,
    at             INTEGER NOT NULL,
    body           TEXT    NOT NULL,
    CONSTRAINT export_outbox_event UNIQUE (event_id)
) STRICT;

CREATE INDEX export_outbox_at ON export_outbox (at);

CREATE TABLE export_seq (
    id       INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    last_seq INTEGER NOT NULL
) STRICT;

INSERT INTO export_seq (id, last_seq) VALUES (1, 0);

CREATE TABLE export_cursors (
    sink        TEXT    NOT NULL PRIMARY KEY,
    position    INTEGER NOT NULL DEFAULT 0,
    owner       TEXT    NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0
) STRICT;

-- AUTOINCREMENT: an id is never taken twice, even after the newest row was deleted, so a
-- listing that goes on after the last id it saw never skips or repeats one.
CREATE TABLE export_dead_letters (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sink        TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    failed_at   INTEGER NOT NULL,
    replayed_at INTEGER
) STRICT;

CREATE INDEX export_dead_letters_sink ON export_dead_letters (sink, id);
