-- A walk of a whole thread (list() of a thread across its namespaces, newest first) reads
-- the root graph's lane down the primary key and the subgraphs' checkpoints down this
-- index, which holds only theirs (sql/reads.py list_page). The index on (thread_id,
-- checkpoint_id) it replaces took an entry for every checkpoint: a put of the root graph,
-- most of a thread's, wrote ~120 bytes of WAL for it (of ~3,750 a chat step) and it held
-- ~30 KB of every 200 steps, for a read the primary key serves.
DROP INDEX IF EXISTS {schema}.checkpoints_thread_recent_idx;
CREATE INDEX IF NOT EXISTS checkpoints_subgraph_recent_idx
    ON {schema}.checkpoints (thread_id, checkpoint_id) WHERE checkpoint_ns <> '';
