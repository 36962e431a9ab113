-- 0015_sale_waiting_room: sales.waiting_room, the sale's waiting room (seckill.Sale.Room,
-- seckill.RoomPolicy; docs/DECISIONS.md "A sale's waiting room in the database"): the policy's
-- JSON, the waiting_room object of the API with every field present
-- ({"order":"draw","opens_seconds":300,...}), or NULL for a sale without a room. Written once,
-- by CreateSale, after seckill.Sale.Validate checked it; never changed. Sales stored before
-- this migration have NULL: no room, as they had.

ALTER TABLE sales ADD COLUMN waiting_room TEXT;
