-- 0012_sale_incarnation: sales.incarnation, which tells apart the sales made one after another
-- under one id (a sale deleted, then another created with its id; seckill.Sale.Incarnation,
-- docs/DECISIONS.md "A sale made again is a new incarnation"). The Redis engine writes it into
-- the sale's keys and compares a state's versions only within one incarnation. At most 32
-- bytes; sales created before this migration have '', as do their keys.
--
-- And sales.segments, the number of segments the sale was created with (seckill.Sale.Segments,
-- at least 1; 0 for a sale created before this migration: unknown). A rebuild of a sale whose
-- keys are lost looks for the segments it may have left behind (redisinv rebuild.go) among
-- those of this number only, instead of every possible number (about 2 000 keys and 10 ms of
-- CRCs per rebuild).

ALTER TABLE sales ADD COLUMN incarnation TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN segments INTEGER NOT NULL DEFAULT 0;
