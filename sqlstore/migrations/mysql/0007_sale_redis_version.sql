-- 0007_sale_redis_version: sales.redis_version, as in
-- migrations/sqlite/0008_sale_redis_version.sql (whose comments explain it).

ALTER TABLE sales
    ADD COLUMN redis_version BIGINT UNSIGNED NOT NULL DEFAULT 0;
