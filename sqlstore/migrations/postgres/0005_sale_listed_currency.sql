-- 0005_sale_listed_currency: the sale's listed flag and currency, as in
-- migrations/sqlite/0006_sale_listed_currency.sql (whose comments explain them).

ALTER TABLE sales
    ADD COLUMN listed   BOOLEAN          NOT NULL DEFAULT TRUE,
    ADD COLUMN currency TEXT COLLATE "C" NOT NULL DEFAULT 'usd',
    ADD CONSTRAINT sales_currency_length CHECK (length(currency) <= 3);
