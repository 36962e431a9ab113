-- 0006_export_outbox: the order store's side of the event export. The same tables as
-- migrations/sqlite/0007_export_outbox.sql (whose comments explain them), with the types of
-- this dialect's 0001_init.sql: ids are VARBINARY (byte for byte), the widths those Go checks
-- (sqlstore/limits.go, sqlstore/outbox.go). export_seq's row lock is InnoDB's: the UPDATE that
-- takes seqs holds it until commit. Five statements, applied one by one under the migration
-- lock.

CREATE TABLE export_outbox (
    seq            BIGINT                          NOT NULL,
    event_id       VARBINARY(320)                  NOT NULL, -- "<payment id>:<type>": at most 255 + 1 + 15
    sale_id        VARBINARY(64)                   NOT NULL,
    reservation_id VARBINARY(255)                  NOT NULL,
    type           VARCHAR(16) CHARACTER SET ascii NOT NULL,
    at             BIGINT                          NOT NULL,
    body           BLOB                            NOT NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY export_outbox_event (event_id),
    INDEX export_outbox_at (at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE export_seq (
    id       BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT export_seq_one_row CHECK (id = 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT INTO export_seq (id, last_seq) VALUES (1, 0);

CREATE TABLE export_cursors (
    sink        VARBINARY(512) NOT NULL,
    position    BIGINT         NOT NULL DEFAULT 0,
    owner       VARBINARY(128) NOT NULL DEFAULT '',
    lease_until BIGINT         NOT NULL DEFAULT 0,
    PRIMARY KEY (sink)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE export_dead_letters (
    id          BIGINT         NOT NULL AUTO_INCREMENT,
    sink        VARBINARY(512) NOT NULL,
    event_id    VARBINARY(320) NOT NULL,
    body        BLOB           NOT NULL,
    reason      VARBINARY(512) NOT NULL,
    failed_at   BIGINT         NOT NULL,
    replayed_at BIGINT         NULL,
    PRIMARY KEY (id),
    INDEX export_dead_letters_sink (sink, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
