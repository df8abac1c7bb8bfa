-- A run's row in run_log is written when it changes: the run's first checkpoint, a new
-- status, a new agent. A put no longer rewrites it at every root checkpoint to move its
-- last step and time (~150 bytes of WAL and a run_log update a step): those are its newest
-- root checkpoint's, which the view reads through checkpoints_run_step_idx, and the row's
-- own when a write set them later (an error, an interrupt, a new agent).
-- Each subquery is anchored on the row's thread, as Citus wants of a correlated subquery.
CREATE OR REPLACE VIEW {schema}.runs AS
SELECT r.thread_id, r.run_id, r.started_at,
       greatest(r.ended_at, (
           SELECT max(c.created_at) FROM {schema}.checkpoints c
           WHERE c.thread_id = r.thread_id AND c.run_id = r.run_id AND c.checkpoint_ns = ''
             AND c.step = (SELECT max(s.step) FROM {schema}.checkpoints s
                           WHERE s.thread_id = r.thread_id AND s.run_id = r.run_id AND s.checkpoint_ns = ''))) AS ended_at,
       coalesce(greatest(r.last_step, (
           SELECT max(s.step) FROM {schema}.checkpoints s
           WHERE s.thread_id = r.thread_id AND s.run_id = r.run_id AND s.checkpoint_ns = '')) - r.first_step + 1, 0) AS steps,
       r.status, r.agents
FROM {schema}.run_log r;

COMMENT ON VIEW {schema}.runs IS
    'One row per run (an invoke/stream call): status is done, interrupted, error or running';
