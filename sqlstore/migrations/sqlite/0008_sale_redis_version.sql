-- 0008_sale_redis_version: sales.redis_version, the highest version of the sale's Redis state
-- that the order store has stored (docs/MODEL.md "The state's version"). ApplyEvents raises it
-- to the highest Version of the events it stores, in the same transaction; a rebuild of the
-- sale in Redis raises it to the version the rebuilt state starts from, before it loads it. An
-- instance that finds Redis answering with a lower version knows Redis went back in time. 0 is
-- unknown (a sale never run on Redis, or run before versions existed).

ALTER TABLE sales ADD COLUMN redis_version INTEGER NOT NULL DEFAULT 0 CHECK (redis_version >= 0);
