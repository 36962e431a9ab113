-- 0008_sale_versions: sale_versions, as in migrations/sqlite/0009_sale_versions.sql (whose
-- comments explain it).

CREATE TABLE sale_versions (
    sale_id       TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES sales (id) ON DELETE CASCADE,
    redis_version BIGINT           NOT NULL CHECK (redis_version >= 0)
);
