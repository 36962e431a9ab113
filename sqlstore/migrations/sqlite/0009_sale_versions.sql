-- 0009_sale_versions: the highest version of each sale's Redis state that the order store has
-- stored, moved off the sales row (docs/DECISIONS.md, "One lock order for the sale's row").
-- ApplyEvents raised sales.redis_version (0008) in every consumer transaction; on the server
-- databases that update locked the sale's row exclusively, the row every payment of the sale
-- locks first, while the consumer already held the rows of its reservations, which a payment
-- locks next: consumers and payments deadlocked. A row of this table is locked only by the
-- transactions that raise the version, after everything else but the outbox.
--
-- A row exists once a version above 0 was stored; it goes with its sale. sales.redis_version
-- stays, no longer written, and SaleVersion reads the higher of the two: what an instance
-- that predates this table recorded still counts.

CREATE TABLE sale_versions (
    sale_id       TEXT    NOT NULL PRIMARY KEY REFERENCES sales (id) ON DELETE CASCADE,
    redis_version INTEGER NOT NULL CHECK (redis_version >= 0)
);
