-- A reader looks a step up by its number (`lgpd show --step N`, the replay page's step
-- pages and their previous / next links): one probe of this index, however long the
-- thread. Only the root namespace needs it: a subgraph's namespace holds one task's
-- checkpoints, and most checkpoints of a long thread are the root's. The checkpoint id
-- orders a step's checkpoints newest first as the lookup asks, so no plan prefers a
-- walk of the primary key (which the lookup's ORDER BY would otherwise match).
CREATE INDEX IF NOT EXISTS checkpoints_root_step_idx
    ON {schema}.checkpoints (thread_id, step, checkpoint_id) WHERE checkpoint_ns = '';
