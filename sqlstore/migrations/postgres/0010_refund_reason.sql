-- 0010_refund_reason: refunds.reason, as in migrations/sqlite/0011_refund_reason.sql (whose
-- comments explain it).

ALTER TABLE refunds ADD COLUMN reason TEXT NOT NULL DEFAULT '';
