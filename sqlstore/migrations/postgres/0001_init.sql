-- 0001_init: sales, reservations and payments, for PostgreSQL.
--
-- The same tables, columns, constraints and indexes as migrations/sqlite/0001_init.sql, whose
-- conventions hold here too (times are BIGINT milliseconds since the epoch, UTC). What differs:
--   * Ids are TEXT COLLATE "C": compared and sorted byte for byte, as SQLite and the MySQL
--     schema do, whatever the database's default collation. Ordered lists (by created_at,
--     then id) therefore come out in the same order on every dialect, and the indexes skip
--     locale-aware comparison.
--   * The idempotency key is BYTEA: it is a raw HTTP header value, which need not be valid
--     UTF-8, and TEXT refuses invalid UTF-8.
--   * Every integer is BIGINT: prices reach 10^12 and queue limits 10^10.
--   * The file runs in one transaction with its schema_migrations row (DDL is transactional
--     here), so it is applied whole or not at all.

CREATE TABLE sales (
    id             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name           TEXT             NOT NULL,
    price_cents    BIGINT           NOT NULL,
    stock          BIGINT           NOT NULL,
    holdback       BIGINT           NOT NULL DEFAULT 0,
    starts_at      BIGINT           NOT NULL,
    ends_at        BIGINT           NOT NULL,
    per_user_limit BIGINT           NOT NULL,
    hold_seconds   BIGINT           NOT NULL,
    queue_limit    BIGINT           NOT NULL,
    -- sold is the units that money has paid for. It only changes in the payment transaction,
    -- by an UPDATE guarded with sold + qty <= stock - holdback; the CHECK below is the last
    -- line of defence should any other statement ever try to oversell (invariant 2 of
    -- docs/MODEL.md).
    sold           BIGINT           NOT NULL DEFAULT 0,
    created_at     BIGINT           NOT NULL,
    CONSTRAINT sales_price_cents_nonnegative CHECK (price_cents >= 0),
    CONSTRAINT sales_stock_nonnegative CHECK (stock >= 0),
    CONSTRAINT sales_holdback_within_stock CHECK (holdback >= 0 AND holdback <= stock),
    CONSTRAINT sales_sold_within_sellable CHECK (sold >= 0 AND sold <= stock - holdback)
);

CREATE INDEX sales_created ON sales (created_at, id);

CREATE TABLE reservations (
    id              TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    sale_id         TEXT COLLATE "C" NOT NULL,
    user_id         TEXT COLLATE "C" NOT NULL,
    quantity        BIGINT           NOT NULL,
    status          TEXT             NOT NULL,
    expires_at      BIGINT           NULL,     -- only while held
    amount_cents    BIGINT           NOT NULL DEFAULT 0,
    payment_id      TEXT COLLATE "C" NULL,     -- the payment that made it paid
    idempotency_key BYTEA            NOT NULL DEFAULT ''::bytea,
    seq             BIGINT           NOT NULL DEFAULT 0, -- arrival order within the sale (FIFO rebuild)
    created_at      BIGINT           NOT NULL,
    updated_at      BIGINT           NOT NULL,
    CONSTRAINT reservations_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id),
    CONSTRAINT reservations_quantity_nonnegative CHECK (quantity >= 0),
    CONSTRAINT reservations_status_known CHECK (status IN
        ('queued', 'held', 'paid', 'cancelled', 'expired', 'rejected', 'refund_required'))
);

-- (sale_id, status, seq) serves Reservations(sale, statuses...) in FIFO order and the counts.
CREATE INDEX reservations_sale_status ON reservations (sale_id, status, seq);
CREATE INDEX reservations_user ON reservations (user_id);

-- payments is a ledger of money the gateway says it received; every row is kept, including
-- payments for unknown reservations, so it has no foreign keys.
CREATE TABLE payments (
    payment_id     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    reservation_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    sale_id        TEXT COLLATE "C" NOT NULL DEFAULT '',
    user_id        TEXT COLLATE "C" NOT NULL DEFAULT '',
    quantity       BIGINT           NOT NULL DEFAULT 0,
    amount_cents   BIGINT           NOT NULL DEFAULT 0,
    result         TEXT             NOT NULL,
    created_at     BIGINT           NOT NULL,
    CONSTRAINT payments_result_known CHECK (result IN ('applied', 'late_applied', 'refund_required'))
);

CREATE INDEX payments_user ON payments (user_id, created_at);
CREATE INDEX payments_reservation ON payments (reservation_id);
CREATE INDEX payments_sale ON payments (sale_id, result);
