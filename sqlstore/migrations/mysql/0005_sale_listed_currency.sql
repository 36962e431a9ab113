-- 0005_sale_listed_currency: the sale's listed flag and currency, as in
-- migrations/sqlite/0006_sale_listed_currency.sql (whose comments explain them). One statement,
-- so that the two columns arrive together (MySQL DDL is not transactional).

ALTER TABLE sales
    ADD COLUMN listed   BOOLEAN                         NOT NULL DEFAULT TRUE,
    ADD COLUMN currency VARCHAR(3) CHARACTER SET ascii NOT NULL DEFAULT 'usd';
