-- 0016_room_journal: the waiting rooms' journal (seckill.RoomJournal; docs/DECISIONS.md "Rooms
-- recover from the database"): what rebuilds a room the engine lost (a restart of the memory
-- engine, a FLUSHALL of Redis).
--
--   * room_entrants: one row per entrant of a room, written by the service in batches after
--     the joins (an entrant written again is left as it is). incarnation is the sale's: a sale
--     made again under a deleted one's id starts with an empty room. arrival is the entrant's
--     arrival number in its room (seckill.Ticket.Arrival), drawn 1 when it joined a draw room
--     before the start (its place is the draw's), joined_at milliseconds UTC.
--   * room_admissions: one row per room, its count of admissions (admitted), raised only (by
--     the admitters, in any order), and admitted_at (milliseconds) when it was last raised.

CREATE TABLE room_entrants (
    sale_id     TEXT    NOT NULL,
    incarnation TEXT    NOT NULL,
    entrant     TEXT    NOT NULL,
    arrival     INTEGER NOT NULL,
    drawn       INTEGER NOT NULL,
    joined_at   INTEGER NOT NULL,
    PRIMARY KEY (sale_id, incarnation, entrant)
) STRICT;

CREATE TABLE room_admissions (
    sale_id     TEXT    NOT NULL,
    incarnation TEXT    NOT NULL,
    admitted    INTEGER NOT NULL,
    admitted_at INTEGER NOT NULL,
    PRIMARY KEY (sale_id, incarnation)
) STRICT;
