-- 0014_sale_waiting_room: sales.waiting_room, as in migrations/sqlite/0015_sale_waiting_room.sql
-- (whose comments explain it).

ALTER TABLE sales ADD COLUMN waiting_room TEXT NULL;
