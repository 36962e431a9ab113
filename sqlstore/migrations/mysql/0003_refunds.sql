-- 0003_refunds: the refund owed for every refund_required payment, and what the background
-- refunder needs to pay it back exactly once across instances. The same table as
-- migrations/sqlite/0004_refunds.sql (whose comments explain the columns), with the types of
-- this dialect's 0001_init.sql. Two statements, applied one by one under the migration lock.

CREATE TABLE refunds (
    payment_id      VARBINARY(255) NOT NULL,
    status          VARCHAR(16)    NOT NULL,
    attempts        BIGINT         NOT NULL DEFAULT 0,
    next_attempt_at BIGINT         NOT NULL,
    lease_owner     VARBINARY(64)  NOT NULL DEFAULT '',
    lease_until     BIGINT         NOT NULL DEFAULT 0,
    refund_id       VARBINARY(255) NOT NULL DEFAULT '',
    last_error      VARBINARY(512) NOT NULL DEFAULT '',
    created_at      BIGINT         NOT NULL,
    updated_at      BIGINT         NOT NULL,
    PRIMARY KEY (payment_id),
    INDEX refunds_due (status, next_attempt_at),
    CONSTRAINT refunds_status_known CHECK (status IN
        ('refund_required', 'refund_pending', 'refunded', 'refund_failed'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT INTO refunds (payment_id, status, attempts, next_attempt_at, lease_owner, lease_until,
        refund_id, last_error, created_at, updated_at)
    SELECT payment_id, 'refund_required', 0, created_at, '', 0, '', '', created_at, created_at
    FROM payments WHERE result = 'refund_required';
