-- reservations_user served no query: orders are read from payments (payments_user), and
-- every other read of reservations is by id or by sale. It cost a B-tree insert per stored
-- reservation on the hot path of a rush.
ALTER TABLE reservations DROP INDEX reservations_user;
