-- 0004_gateway_payments: which gateway took each payment, and the payments started at a gateway
-- that must be closed there when their hold ends unpaid. The same columns and table as
-- migrations/sqlite/0005_gateway_payments.sql (whose comments explain them), with the types of
-- this dialect's 0001_init.sql. Three statements, applied one by one under the migration lock.

ALTER TABLE payments ADD COLUMN gateway VARBINARY(32) NOT NULL DEFAULT '';

ALTER TABLE refunds ADD COLUMN gateway VARBINARY(32) NOT NULL DEFAULT '';

CREATE TABLE gateway_payments (
    payment_id      VARBINARY(255) NOT NULL,
    reservation_id  VARBINARY(255) NOT NULL,
    gateway         VARBINARY(32)  NOT NULL,
    status          VARCHAR(16)    NOT NULL,
    attempts        BIGINT         NOT NULL DEFAULT 0,
    next_attempt_at BIGINT         NOT NULL,
    lease_owner     VARBINARY(64)  NOT NULL DEFAULT '',
    lease_until     BIGINT         NOT NULL DEFAULT 0,
    last_error      VARBINARY(512) NOT NULL DEFAULT '',
    created_at      BIGINT         NOT NULL,
    updated_at      BIGINT         NOT NULL,
    PRIMARY KEY (payment_id),
    INDEX gateway_payments_due (status, next_attempt_at),
    INDEX gateway_payments_reservation (reservation_id),
    CONSTRAINT gateway_payments_status_known CHECK (status IN ('open', 'closed', 'paid'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
