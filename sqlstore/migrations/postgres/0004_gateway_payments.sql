-- 0004_gateway_payments: which gateway took each payment, and the payments started at a gateway
-- that must be closed there when their hold ends unpaid. The same columns and table as
-- migrations/sqlite/0005_gateway_payments.sql (whose comments explain them), with the types of
-- this dialect's 0001_init.sql.

ALTER TABLE payments ADD COLUMN gateway TEXT COLLATE "C" NOT NULL DEFAULT '';

ALTER TABLE refunds ADD COLUMN gateway TEXT COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE gateway_payments (
    payment_id      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    reservation_id  TEXT COLLATE "C" NOT NULL,
    gateway         TEXT COLLATE "C" NOT NULL,
    status          TEXT             NOT NULL,
    attempts        BIGINT           NOT NULL DEFAULT 0,
    next_attempt_at BIGINT           NOT NULL,
    lease_owner     TEXT COLLATE "C" NOT NULL DEFAULT '',
    lease_until     BIGINT           NOT NULL DEFAULT 0,
    last_error      TEXT             NOT NULL DEFAULT '',
    created_at      BIGINT           NOT NULL,
    updated_at      BIGINT           NOT NULL,
    CONSTRAINT gateway_payments_status_known CHECK (status IN ('open', 'closed', 'paid'))
);

CREATE INDEX gateway_payments_due ON gateway_payments (status, next_attempt_at);
CREATE INDEX gateway_payments_reservation ON gateway_payments (reservation_id);
