-- 0003_refunds: the refund owed for every refund_required payment, and what the background
-- refunder needs to pay it back exactly once across instances. The same table as
-- migrations/sqlite/0004_refunds.sql (whose comments explain the columns), with the types of
-- this dialect's 0001_init.sql.

CREATE TABLE refunds (
    payment_id      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    status          TEXT             NOT NULL,
    attempts        BIGINT           NOT NULL DEFAULT 0,
    next_attempt_at BIGINT           NOT NULL,
    lease_owner     TEXT COLLATE "C" NOT NULL DEFAULT '',
    lease_until     BIGINT           NOT NULL DEFAULT 0,
    refund_id       TEXT COLLATE "C" NOT NULL DEFAULT '',
    last_error      TEXT             NOT NULL DEFAULT '',
    created_at      BIGINT           NOT NULL,
    updated_at      BIGINT           NOT NULL,
    CONSTRAINT refunds_status_known CHECK (status IN
        ('refund_required', 'refund_pending', 'refunded', 'refund_failed'))
);

-- (status, next_attempt_at) serves the claim of due refunds and the counts by status.
CREATE INDEX refunds_due ON refunds (status, next_attempt_at);

INSERT INTO refunds (payment_id, status, attempts, next_attempt_at, lease_owner, lease_until,
        refund_id, last_error, created_at, updated_at)
    SELECT payment_id, 'refund_required', 0, created_at, '', 0, '', '', created_at, created_at
    FROM payments WHERE result = 'refund_required';
