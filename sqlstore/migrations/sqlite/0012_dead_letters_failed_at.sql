-- 0012_dead_letters_failed_at: an index on export_dead_letters (failed_at, id), so that the
-- retention pass (package retention; docs/EVENTS.md, "Retention") finds the dead letters older
-- than their bound, oldest first, a batch at a time, without reading the whole table.

CREATE INDEX export_dead_letters_failed ON export_dead_letters (failed_at, id);
