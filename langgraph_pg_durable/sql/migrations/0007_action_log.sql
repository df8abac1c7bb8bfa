-- What each task did, readable in SQL: one row per task and run (see
-- langgraph_pg_durable/core/actions.py), written by the statement that stores the task's
-- pending writes. checkpoint_id is the checkpoint the task ran from (its writes are
-- stored against it); step the super-step it ran in (see the `actions` view). run_id is '' when no run is known
-- (the `actions` view shows NULL). idx is the index of the task's first write, so an
-- interrupt and the later result of the same task are two rows.
CREATE TABLE IF NOT EXISTS {schema}.action_log (
    thread_id     text        NOT NULL,
    checkpoint_ns text        NOT NULL DEFAULT '',
    checkpoint_id text        NOT NULL,
    task_id       text        NOT NULL,
    run_id        text        NOT NULL DEFAULT '',
    idx           integer     NOT NULL,
    step          integer,
    agent         text        NOT NULL,
    action_type   text        NOT NULL,
    payload       jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx)
);

-- A run's actions in order, as the `actions` view names the run (NULL for none).
CREATE INDEX IF NOT EXISTS action_log_run_idx ON {schema}.action_log ((nullif(run_id, '')), step);
-- Every action of an agent (of a type) in a time range.
CREATE INDEX IF NOT EXISTS action_log_agent_idx ON {schema}.action_log (agent, action_type, created_at);

DO $lz4$
BEGIN
    EXECUTE format('ALTER TABLE %I.action_log ALTER COLUMN payload SET COMPRESSION lz4', {schema_literal});
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    NULL;
END
$lz4$;

-- One row per run (one invoke/stream call, or the caller's metadata run_id), kept by the
-- statements that store its checkpoints and its tasks' writes. first_step and last_step
-- are the root graph's; status_step is the step of the event that set the status, so an
-- event delivered late (durability="async") does not undo a later one.
CREATE TABLE IF NOT EXISTS {schema}.run_log (
    thread_id   text        NOT NULL,
    run_id      text        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz NOT NULL DEFAULT now(),
    first_step  integer,
    last_step   integer,
    status      text        NOT NULL,
    status_step integer,
    agents      text[]      NOT NULL DEFAULT '{{}}',
    PRIMARY KEY (thread_id, run_id)
);

-- Runs by status and time ("failed runs today"); and a thread's runs still marked running,
-- which the thread's next run marks interrupted.
CREATE INDEX IF NOT EXISTS run_log_status_idx ON {schema}.run_log (status, started_at);
CREATE INDEX IF NOT EXISTS run_log_run_idx ON {schema}.run_log (run_id);

-- A row's step is NULL when its writes committed before the checkpoint they belong to
-- (durability="async"); the view then reads it from that checkpoint.
CREATE OR REPLACE VIEW {schema}.actions AS
SELECT a.thread_id, a.checkpoint_ns, a.checkpoint_id, nullif(a.run_id, '') AS run_id,
       coalesce(a.step, c.step + 1) AS step, a.task_id, a.agent, a.action_type, a.payload, a.created_at
FROM {schema}.action_log a
LEFT JOIN {schema}.checkpoints c
  ON a.step IS NULL AND c.thread_id = a.thread_id AND c.checkpoint_ns = a.checkpoint_ns
 AND c.checkpoint_id = a.checkpoint_id;

COMMENT ON VIEW {schema}.actions IS
    'What each task of a graph did, one row per task and run: see the README, "Query your agents in SQL"';

CREATE OR REPLACE VIEW {schema}.runs AS
SELECT thread_id, run_id, started_at, ended_at,
       coalesce(last_step - first_step + 1, 0) AS steps, status, agents
FROM {schema}.run_log;

COMMENT ON VIEW {schema}.runs IS
    'One row per run (an invoke/stream call): status is done, interrupted, error or running';
