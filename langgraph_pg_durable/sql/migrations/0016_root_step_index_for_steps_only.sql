-- The root-step index serves lookups by step number (`lgpd show --step N`, the replay
-- page's step links, a run's last step): each of them says something of the step, which
-- implies `step IS NOT NULL`. A probe of one checkpoint by its key (a put's parent, a
-- task's checkpoint, a get_tuple by id) says nothing of the step. With the namespace's
-- value known, as in a custom plan (every plan under PgBouncer's transaction mode, where
-- statements are not prepared), the planner could take this index for such a probe:
-- its key has the step between the thread and the checkpoint id, so the probe read every
-- root checkpoint of the thread (19 pages at 2,000 steps, twice a step). With the step in
-- the predicate, only the lookups that name a step can use it; a probe takes the primary key.
DROP INDEX IF EXISTS {schema}.checkpoints_root_step_idx;
CREATE INDEX IF NOT EXISTS checkpoints_root_step_idx
    ON {schema}.checkpoints (thread_id, step, checkpoint_id) WHERE checkpoint_ns = '' AND step IS NOT NULL;
