-- 0014_sale_preheat: sales.preheat_seconds, how long before starts_at the sale becomes hot
-- (seckill.Sale.PreheatSeconds, 0 … seckill.MaxPreheatSeconds; docs/DECISIONS.md "A sale's
-- preheat"). A sale created over the API has it (default 300); sales stored before this
-- migration have 0, which means hot from their start.

ALTER TABLE sales ADD COLUMN preheat_seconds INTEGER NOT NULL DEFAULT 0;
