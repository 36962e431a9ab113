-- 0009_open_payment_page: gateway_payments.redirect_url, as in
-- migrations/sqlite/0010_open_payment_page.sql (whose comments explain it). 2048 bytes: the
-- store keeps no longer page address (sqlstore.maxRedirectURLBytes).

ALTER TABLE gateway_payments ADD COLUMN redirect_url VARBINARY(2048) NOT NULL DEFAULT '';
