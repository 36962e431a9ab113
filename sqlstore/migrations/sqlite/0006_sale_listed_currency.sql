-- 0006_sale_listed_currency: two columns of sales that the storefront reads.
--   * listed: whether GET /api/v1/sales lists the sale (1) or leaves it out (0): sales made by
--     `seckill bench` and tests are unlisted, and an admin can take any sale off the list.
--     Sales that existed before are listed, as they were.
--   * currency: the ISO 4217 code of price_cents, lower case ("usd"); sales that existed before
--     are in the documented default, "usd". '' is a sale built in code without one.
-- SQLite adds one column per statement; both run in the migration's transaction.

ALTER TABLE sales ADD COLUMN listed INTEGER NOT NULL DEFAULT 1 CHECK (listed = 0 OR listed = 1);

ALTER TABLE sales ADD COLUMN currency TEXT NOT NULL DEFAULT 'usd' CHECK (length(currency) <= 3);
