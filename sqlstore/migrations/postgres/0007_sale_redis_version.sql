-- 0007_sale_redis_version: sales.redis_version, as in
-- migrations/sqlite/0008_sale_redis_version.sql (whose comments explain it).

ALTER TABLE sales
    ADD COLUMN redis_version BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT sales_redis_version_nonnegative CHECK (redis_version >= 0);
