-- 0012_sale_incarnation: sales.incarnation, which tells apart the sales made one after another
-- under one id (a sale deleted, then another created with its id; seckill.Sale.Incarnation,
-- docs/DECISIONS.md "A sale made again is a new incarnation"). The Redis engine writes it into
-- the sale's keys and compares a state's versions only within one incarnation. At most 32
-- bytes; sales created before this migration have '', as do their keys.

ALTER TABLE sales ADD COLUMN incarnation TEXT NOT NULL DEFAULT '';
