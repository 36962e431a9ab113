-- 0008_sale_versions: sale_versions, as in migrations/sqlite/0009_sale_versions.sql (whose
-- comments explain it), with the types of 0001_init.sql.

CREATE TABLE sale_versions (
    sale_id       VARBINARY(64)   NOT NULL,
    redis_version BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (sale_id),
    CONSTRAINT sale_versions_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
