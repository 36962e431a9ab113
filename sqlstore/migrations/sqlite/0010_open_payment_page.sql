-- 0010_open_payment_page: gateway_payments.redirect_url, the payment page of a started payment.
-- POST /pay answers it again while the payment is open, without asking the gateway, so that
-- one buyer calling /pay over and over spends none of the shop's gateway rate limit. Rows
-- recorded before this migration have '' and are asked of the gateway again (its idempotency
-- key answers the same payment).

ALTER TABLE gateway_payments ADD COLUMN redirect_url TEXT NOT NULL DEFAULT '';
