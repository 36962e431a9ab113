-- 0011_dead_letters_failed_at: the index of migrations/sqlite/0012_dead_letters_failed_at.sql
-- (whose comments explain it).

CREATE INDEX export_dead_letters_failed ON export_dead_letters (failed_at, id);
