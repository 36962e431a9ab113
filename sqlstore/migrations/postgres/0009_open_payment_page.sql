-- 0009_open_payment_page: gateway_payments.redirect_url, as in
-- migrations/sqlite/0010_open_payment_page.sql (whose comments explain it).

ALTER TABLE gateway_payments ADD COLUMN redirect_url TEXT COLLATE "C" NOT NULL DEFAULT '';
