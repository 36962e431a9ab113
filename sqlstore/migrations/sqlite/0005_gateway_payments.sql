-- 0005_gateway_payments: which gateway took each payment, and the payments started at a gateway
-- that must be closed there when their hold ends unpaid (package closer).
--
--   * payments.gateway and refunds.gateway name the gateway that took the money, so that a
--     refund goes back through it (a refunder claims only its own gateway's refunds). Rows
--     recorded before this migration have '' and are refunded by whichever gateway runs.
--   * gateway_payments has one row per payment started (POST /pay), written before its
--     payment page is handed out. status moves open → closed (the gateway confirmed it can no
--     longer be paid) or open → paid (its payment was recorded). next_attempt_at is when a
--     close is due: the hold's expiry, brought forward to the cancel when the buyer cancels,
--     pushed back by a backoff after a failed close. A closer claims a due row by a
--     conditional UPDATE of lease_owner and lease_until, as the refunder claims refunds.

ALTER TABLE payments ADD COLUMN gateway TEXT NOT NULL DEFAULT '';

ALTER TABLE refunds ADD COLUMN gateway TEXT NOT NULL DEFAULT '';

CREATE TABLE gateway_payments (
    payment_id      TEXT    NOT NULL PRIMARY KEY,
    reservation_id  TEXT    NOT NULL,
    gateway         TEXT    NOT NULL,
    status          TEXT    NOT NULL CHECK (status = 'open' OR status = 'closed' OR status = 'paid'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

-- (status, next_attempt_at) serves the claim of due closes; reservation_id the cancel.
CREATE INDEX gateway_payments_due ON gateway_payments (status, next_attempt_at);
CREATE INDEX gateway_payments_reservation ON gateway_payments (reservation_id);
