-- 0004_refunds: the refund owed for every refund_required payment, and what the background
-- refunder needs to pay it back exactly once across instances (package refund).
--
--   * status moves refund_required → refund_pending → refunded | refund_failed.
--   * A refunder claims a due refund by a conditional UPDATE that sets lease_owner and
--     lease_until; no other claim matches the row until lease_until has passed, so one instance
--     at a time works on it. The outcome is recorded only by the lease's owner.
--   * attempts counts claims; next_attempt_at is when a retry is due (exponential backoff).
--   * created_at is the payment's, copied so that the age of the oldest open refund needs no join.
-- Every existing refund_required payment starts in refund_required, due at once.

CREATE TABLE refunds (
    payment_id      TEXT    NOT NULL PRIMARY KEY,
    status          TEXT    NOT NULL CHECK (status = 'refund_required' OR status = 'refund_pending' OR
                        status = 'refunded' OR status = 'refund_failed'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER NOT NULL DEFAULT 0,
    refund_id       TEXT    NOT NULL DEFAULT '',
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

-- (status, next_attempt_at) serves the claim of due refunds and the counts by status.
CREATE INDEX refunds_due ON refunds (status, next_attempt_at);

INSERT INTO refunds (payment_id, status, attempts, next_attempt_at, lease_owner, lease_until,
        refund_id, last_error, created_at, updated_at)
    SELECT payment_id, 'refund_required', 0, created_at, '', 0, '', '', created_at, created_at
    FROM payments WHERE result = 'refund_required';
