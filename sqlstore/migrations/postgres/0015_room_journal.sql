-- 0015_room_journal: the waiting rooms' journal, as in migrations/sqlite/0016_room_journal.sql
-- (whose comments explain it).

CREATE TABLE room_entrants (
    sale_id     TEXT COLLATE "C" NOT NULL,
    incarnation TEXT COLLATE "C" NOT NULL,
    entrant     TEXT COLLATE "C" NOT NULL,
    arrival     BIGINT   NOT NULL,
    drawn       SMALLINT NOT NULL,
    joined_at   BIGINT   NOT NULL,
    PRIMARY KEY (sale_id, incarnation, entrant)
);

CREATE TABLE room_admissions (
    sale_id     TEXT COLLATE "C" NOT NULL,
    incarnation TEXT COLLATE "C" NOT NULL,
    admitted    BIGINT NOT NULL,
    admitted_at BIGINT NOT NULL,
    PRIMARY KEY (sale_id, incarnation)
);
