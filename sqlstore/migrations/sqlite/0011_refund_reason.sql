-- 0011_refund_reason: refunds.reason, why the payment is owed back (paid after its hold ended
-- with no unit free, paid another amount, paid in another currency, no such reservation): shown
-- to the operator with the refund (GET /api/v1/refunds). At most 500 bytes
-- (sqlstore.maxRefundReasonBytes). Refunds recorded before this migration have ''.

ALTER TABLE refunds ADD COLUMN reason TEXT NOT NULL DEFAULT '';
