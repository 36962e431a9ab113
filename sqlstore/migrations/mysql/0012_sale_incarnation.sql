-- 0011_sale_incarnation: sales.incarnation and sales.segments, as in migrations/sqlite/0012_sale_incarnation.sql
-- (whose comments explain it).

ALTER TABLE sales ADD COLUMN incarnation VARBINARY(32) NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN segments INT NOT NULL DEFAULT 0;
