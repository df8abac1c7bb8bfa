-- The GIN index over checkpoint metadata goes. Every put paid for it (~190 bytes of WAL,
-- a pending-list insert and its share of the index's pages), and no read needed it: a
-- list() of one thread filters that thread's rows, which its primary key finds, and the
-- metadata filter of W3 was slower with it than the official saver's without. A filter
-- over every thread (list(None, filter=...)) reads the table, as the official saver does.
DROP INDEX IF EXISTS {schema}.checkpoints_metadata_idx;
