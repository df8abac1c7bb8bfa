-- delete_for_runs looks checkpoints up by run_id; a checkpoint without one (a plain
-- invoke) needs no entry, and most have none: index only those that do.
DROP INDEX IF EXISTS {schema}.checkpoints_run_step_idx;
CREATE INDEX IF NOT EXISTS checkpoints_run_step_idx
    ON {schema}.checkpoints (run_id, step) WHERE run_id IS NOT NULL;
