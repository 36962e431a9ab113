-- 0015_room_journal: the waiting rooms' journal, as in migrations/sqlite/0016_room_journal.sql
-- (whose comments explain it).

CREATE TABLE room_entrants (
    sale_id     VARBINARY(64) NOT NULL,
    incarnation VARBINARY(32) NOT NULL,
    entrant     VARBINARY(32) NOT NULL,
    arrival     BIGINT        NOT NULL,
    drawn       SMALLINT      NOT NULL,
    joined_at   BIGINT        NOT NULL,
    PRIMARY KEY (sale_id, incarnation, entrant)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE room_admissions (
    sale_id     VARBINARY(64) NOT NULL,
    incarnation VARBINARY(32) NOT NULL,
    admitted    BIGINT        NOT NULL,
    admitted_at BIGINT        NOT NULL,
    PRIMARY KEY (sale_id, incarnation)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
