-- 0001_init: sales, reservations and payments, for MySQL ≥ 8.0.16 and MariaDB ≥ 10.2.1 (the
-- first versions that enforce CHECK constraints; older ones parse them and ignore them).
--
-- The same tables, columns, constraints and indexes as migrations/sqlite/0001_init.sql, whose
-- conventions hold here too (times are BIGINT milliseconds since the epoch, UTC). What differs:
--   * InnoDB, for transactions, row locks and foreign keys; utf8mb4 for the sale name.
--   * Ids and the idempotency key are VARBINARY: compared byte for byte, so "r1", "R1" and
--     "r1 " are three ids, as in SQLite and PostgreSQL. A _bin collation would not do: MySQL's
--     and MariaDB's utf8mb4_bin are PAD SPACE collations, under which 'p1' = 'p1 ', so a
--     payment id with a trailing space would collide with another. The key also need not be
--     valid UTF-8 (it is a raw HTTP header value). The widths are checked in Go for every
--     dialect (sqlstore/limits.go), so no value is refused here that SQLite would take.
--   * Every integer is BIGINT: prices reach 10^12 and queue limits 10^10.
--   * Indexes are declared inside CREATE TABLE, so that each table is one statement. MySQL DDL
--     is not transactional (each statement commits at once), so this file is applied statement
--     by statement under the migration lock; a crash between two statements leaves the
--     earlier tables in place and the version unrecorded (see sqlstore/README.md).
--   * CHECK constraints are table constraints: MariaDB lets a column constraint refer to its
--     own column only.

CREATE TABLE sales (
    id             VARBINARY(64) NOT NULL,
    name           TEXT          NOT NULL,
    price_cents    BIGINT        NOT NULL,
    stock          BIGINT        NOT NULL,
    holdback       BIGINT        NOT NULL DEFAULT 0,
    starts_at      BIGINT        NOT NULL,
    ends_at        BIGINT        NOT NULL,
    per_user_limit BIGINT        NOT NULL,
    hold_seconds   BIGINT        NOT NULL,
    queue_limit    BIGINT        NOT NULL,
    -- sold is the units that money has paid for. It only changes in the payment transaction,
    -- by an UPDATE guarded with sold + qty <= stock - holdback; the CHECK below is the last
    -- line of defence should any other statement ever try to oversell (invariant 2 of
    -- docs/MODEL.md).
    sold           BIGINT        NOT NULL DEFAULT 0,
    created_at     BIGINT        NOT NULL,
    PRIMARY KEY (id),
    INDEX sales_created (created_at, id),
    CONSTRAINT sales_price_cents_nonnegative CHECK (price_cents >= 0),
    CONSTRAINT sales_stock_nonnegative CHECK (stock >= 0),
    CONSTRAINT sales_holdback_within_stock CHECK (holdback >= 0 AND holdback <= stock),
    CONSTRAINT sales_sold_within_sellable CHECK (sold >= 0 AND sold <= stock - holdback)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE reservations (
    id              VARBINARY(128) NOT NULL, -- "<sale id>-<32 hex>": at most 97 bytes
    sale_id         VARBINARY(64)  NOT NULL,
    user_id         VARBINARY(64)  NOT NULL,
    quantity        BIGINT         NOT NULL,
    status          VARCHAR(16)    NOT NULL,
    expires_at      BIGINT         NULL,     -- only while held
    amount_cents    BIGINT         NOT NULL DEFAULT 0,
    payment_id      VARBINARY(255) NULL,     -- the payment that made it paid
    idempotency_key VARBINARY(128) NOT NULL DEFAULT '',
    seq             BIGINT         NOT NULL DEFAULT 0, -- arrival order within the sale (FIFO rebuild)
    created_at      BIGINT         NOT NULL,
    updated_at      BIGINT         NOT NULL,
    PRIMARY KEY (id),
    -- (sale_id, status, seq) serves Reservations(sale, statuses...) in FIFO order and the
    -- counts, and is the index the foreign key needs.
    INDEX reservations_sale_status (sale_id, status, seq),
    INDEX reservations_user (user_id),
    CONSTRAINT reservations_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id),
    CONSTRAINT reservations_quantity_nonnegative CHECK (quantity >= 0),
    CONSTRAINT reservations_status_known CHECK (status IN
        ('queued', 'held', 'paid', 'cancelled', 'expired', 'rejected', 'refund_required'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- payments is a ledger of money the gateway says it received; every row is kept, including
-- payments for unknown reservations, so it has no foreign keys. Its reservation_id is what the
-- gateway sent, hence as wide as a payment id.
CREATE TABLE payments (
    payment_id     VARBINARY(255) NOT NULL,
    reservation_id VARBINARY(255) NOT NULL DEFAULT '',
    sale_id        VARBINARY(64)  NOT NULL DEFAULT '',
    user_id        VARBINARY(64)  NOT NULL DEFAULT '',
    quantity       BIGINT         NOT NULL DEFAULT 0,
    amount_cents   BIGINT         NOT NULL DEFAULT 0,
    result         VARCHAR(16)    NOT NULL,
    created_at     BIGINT         NOT NULL,
    PRIMARY KEY (payment_id),
    INDEX payments_user (user_id, created_at),
    INDEX payments_reservation (reservation_id),
    INDEX payments_sale (sale_id, result),
    CONSTRAINT payments_result_known CHECK (result IN ('applied', 'late_applied', 'refund_required'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
