-- 0013_sale_preheat: sales.preheat_seconds, as in migrations/sqlite/0014_sale_preheat.sql
-- (whose comments explain it).

ALTER TABLE sales ADD COLUMN preheat_seconds INT NOT NULL DEFAULT 0;
