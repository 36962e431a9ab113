-- 0001_init: sales, reservations and payments.
--
-- Conventions shared by every dialect (migrations/<dialect>/NNNN_name.sql):
--   * Times are BIGINT milliseconds since the Unix epoch, UTC. An integer compares, sorts and
--     indexes the same way in SQLite, MySQL and PostgreSQL, carries no time zone that a server
--     setting could reinterpret, and round-trips Go's time.Time at the millisecond precision the
--     API promises (sale times are truncated to milliseconds by seckill.NewSale).
--   * Ids are short strings (at most 64 bytes for sales and users, 32 hex for generated ids).
--   * Statements are separated by semicolons; the runner splits them itself so that no driver
--     needs a multi-statement mode. No trigger or procedure bodies (they contain semicolons).
--
-- SQLite tables are STRICT so that a wrong type is an error, as it would be on a server database.

CREATE TABLE sales (
    id             TEXT    NOT NULL PRIMARY KEY,
    name           TEXT    NOT NULL,
    price_cents    INTEGER NOT NULL CHECK (price_cents >= 0),
    stock          INTEGER NOT NULL CHECK (stock >= 0),
    holdback       INTEGER NOT NULL DEFAULT 0 CHECK (holdback >= 0 AND holdback <= stock),
    starts_at      INTEGER NOT NULL,
    ends_at        INTEGER NOT NULL,
    per_user_limit INTEGER NOT NULL,
    hold_seconds   INTEGER NOT NULL,
    queue_limit    INTEGER NOT NULL,
    -- sold is the units that money has paid for. It only changes in the payment transaction,
    -- by an UPDATE guarded with sold + qty <= stock - holdback; this CHECK is the last line of
    -- defence should any other statement ever try to oversell (invariant 2 of docs/MODEL.md).
    sold           INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    CONSTRAINT sales_sold_within_sellable CHECK (sold >= 0 AND sold <= stock - holdback)
) STRICT;

CREATE INDEX sales_created ON sales (created_at, id);

CREATE TABLE reservations (
    id              TEXT    NOT NULL PRIMARY KEY,
    sale_id         TEXT    NOT NULL REFERENCES sales (id),
    user_id         TEXT    NOT NULL,
    quantity        INTEGER NOT NULL CHECK (quantity >= 0),
    status          TEXT    NOT NULL CHECK (status IN
                        ('queued', 'held', 'paid', 'cancelled', 'expired', 'rejected', 'refund_required')),
    expires_at      INTEGER NULL,     -- only while held
    amount_cents    INTEGER NOT NULL DEFAULT 0,
    payment_id      TEXT    NULL,     -- the payment that made it paid
    idempotency_key TEXT    NOT NULL DEFAULT '',
    seq             INTEGER NOT NULL DEFAULT 0, -- arrival order within the sale (FIFO rebuild)
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

-- (sale_id, status, seq) serves Reservations(sale, statuses...) in FIFO order and the counts.
CREATE INDEX reservations_sale_status ON reservations (sale_id, status, seq);
CREATE INDEX reservations_user ON reservations (user_id);

-- payments is a ledger of money the gateway says it received; every row is kept, including
-- payments for unknown reservations, so it has no foreign keys.
CREATE TABLE payments (
    payment_id     TEXT    NOT NULL PRIMARY KEY,
    reservation_id TEXT    NOT NULL DEFAULT '',
    sale_id        TEXT    NOT NULL DEFAULT '',
    user_id        TEXT    NOT NULL DEFAULT '',
    quantity       INTEGER NOT NULL DEFAULT 0,
    amount_cents   INTEGER NOT NULL DEFAULT 0,
    result         TEXT    NOT NULL CHECK (result IN ('applied', 'late_applied', 'refund_required')),
    created_at     INTEGER NOT NULL
) STRICT;

CREATE INDEX payments_user ON payments (user_id, created_at);
CREATE INDEX payments_reservation ON payments (reservation_id);
CREATE INDEX payments_sale ON payments (sale_id, result);
