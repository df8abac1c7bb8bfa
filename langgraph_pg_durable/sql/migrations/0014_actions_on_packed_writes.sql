-- A task's packed writes row (one row for all its writes, the common case) holds the
-- task's action: the action_log columns but the key, which is the row's own. Before, every
-- task had its action_log row beside its writes row: a second heap row with the same key,
-- a primary-key entry and a speculative insert's extra record, ~400 bytes of WAL a step
-- (sql/action_row.py). action_log keeps the actions no packed row holds: the
-- caller's writes, errors and interrupts, offloaded writes, a task re-run, a run not saved,
-- a backfill, and those of writes a prune deleted. NULL in all five on any other row.
ALTER TABLE {schema}.checkpoint_writes
    ADD COLUMN IF NOT EXISTS run_id text,
    ADD COLUMN IF NOT EXISTS step integer,
    ADD COLUMN IF NOT EXISTS agent text,
    ADD COLUMN IF NOT EXISTS action_type text,
    ADD COLUMN IF NOT EXISTS payload jsonb;

DO $lz4$
BEGIN
    EXECUTE format('ALTER TABLE %I.checkpoint_writes ALTER COLUMN payload SET COMPRESSION lz4', {schema_literal});
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    NULL;
END
$lz4$;

-- The same two questions as action_log's indexes answer, over the rows holding an action.
CREATE INDEX IF NOT EXISTS checkpoint_writes_run_idx ON {schema}.checkpoint_writes ((nullif(run_id, '')), step)
    WHERE action_type IS NOT NULL;
CREATE INDEX IF NOT EXISTS checkpoint_writes_agent_idx ON {schema}.checkpoint_writes (agent, action_type, created_at)
    WHERE action_type IS NOT NULL;

-- Every action row, from either table, with action_log's columns (a packed row's action is
-- at index 0, its task's first write). What the saver's reads of the log read.
CREATE OR REPLACE VIEW {schema}.action_rows AS
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload, created_at
FROM {schema}.action_log
UNION ALL
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, 0, step, agent, action_type, payload, created_at
FROM {schema}.checkpoint_writes
WHERE action_type IS NOT NULL;

CREATE OR REPLACE VIEW {schema}.actions AS
SELECT a.thread_id, a.checkpoint_ns, a.checkpoint_id, nullif(a.run_id, '') AS run_id,
       coalesce(a.step, c.step + 1) AS step, a.task_id, a.agent, a.action_type, a.payload, a.created_at
FROM {schema}.action_rows a
LEFT JOIN {schema}.checkpoints c
  ON a.step IS NULL AND c.thread_id = a.thread_id AND c.checkpoint_ns = a.checkpoint_ns
 AND c.checkpoint_id = a.checkpoint_id;

COMMENT ON VIEW {schema}.actions IS
    'What each task of a graph did, one row per task and run: see the README, "Query your agents in SQL"';

-- The write function of 0011 (sql/routed.py) does the same: same signature, so a Citus
-- cluster keeps it distributed.
CREATE OR REPLACE FUNCTION {schema}.lgpd_put_writes(
    p_kind text, p_replace boolean,
    p_thread_id text, p_checkpoint_ns text, p_checkpoint_id text, p_task_id text, p_task_path text,
    p_packed_type text, p_check_checkpoint text,
    p_idx integer[], p_channels text[], p_types text[], p_values bytea[],
    p_object_keys text[], p_object_shas text[], p_object_sizes bigint[], p_write_item_versions text[],
    p_packed_idx integer, p_packed_channel text, p_packed_value bytea, p_packed_item_version text,
    p_item_channels text[], p_item_of text[], p_item_idx integer[], p_item_types text[], p_item_values bytea[],
    p_item_object_keys text[], p_item_object_shas text[], p_item_object_sizes bigint[],
    p_log boolean, p_run_id text, p_action_step integer, p_action_idx integer, p_agent text, p_action_type text,
    p_payload jsonb, p_run_status text, p_fence text
) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    task_rows boolean;  -- the task has writes at the checkpoint already (read before any is written)
    packed_upto integer;  -- the highest index a packed row of the task holds (-1: none)
    task_step integer := p_action_step;
    fresh boolean;
    written integer := 0;
    one integer;
    n integer := coalesce(array_length(p_idx, 1), 0);
    n_items integer := coalesce(array_length(p_item_channels, 1), 0);
BEGIN
    -- What is read before anything is written, as the statement's one snapshot reads it;
    -- each a single-table probe, sent only when it matters. First the checkpoint this saver
    -- saw committed, and the thread's writer (a write under a fencing token stores nothing
    -- once another run took the thread: thread_holders), in one statement.
    IF (p_check_checkpoint IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {schema}.checkpoints g
        WHERE g.thread_id = p_thread_id AND g.checkpoint_ns = p_checkpoint_ns AND g.checkpoint_id = p_check_checkpoint
    )) OR (p_fence IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {schema}.thread_holders h WHERE h.thread_id = p_thread_id AND h.writer = p_fence
    )) THEN
        RETURN 0;
    END IF;
    IF p_kind = 'packed' THEN
        task_rows := EXISTS (
            SELECT 1 FROM {schema}.checkpoint_writes t
            WHERE t.thread_id = p_thread_id AND t.checkpoint_ns = p_checkpoint_ns
              AND t.checkpoint_id = p_checkpoint_id AND t.task_id = p_task_id AND t.idx >= 0);
    ELSIF NOT p_replace THEN
        SELECT coalesce(max(w.idx), -1) INTO packed_upto FROM {schema}.checkpoint_writes w
        WHERE w.thread_id = p_thread_id AND w.checkpoint_ns = p_checkpoint_ns
          AND w.checkpoint_id = p_checkpoint_id AND w.task_id = p_task_id AND w.type = p_packed_type;
    END IF;
    IF p_log THEN
        IF task_step IS NULL THEN
            SELECT c.step + 1 INTO task_step FROM {schema}.checkpoints c
            WHERE c.thread_id = p_thread_id AND c.checkpoint_ns = p_checkpoint_ns AND c.checkpoint_id = p_checkpoint_id;
        END IF;
        -- A packed row holds its task's action (below); any other action goes to action_log,
        -- unless the task's packed row holds this run's action already (writes sent again).
        IF p_kind <> 'packed' AND NOT EXISTS (
            SELECT 1 FROM {schema}.checkpoint_writes f
            WHERE f.thread_id = p_thread_id AND f.checkpoint_ns = p_checkpoint_ns AND f.checkpoint_id = p_checkpoint_id
              AND f.task_id = p_task_id AND f.run_id = coalesce(p_run_id, '') AND p_action_idx = 0)
        THEN
            INSERT INTO {schema}.action_log AS a (
                thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload)
            VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_task_id, coalesce(p_run_id, ''), p_action_idx,
                    task_step, p_agent, p_action_type, p_payload)
            ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO UPDATE SET
                action_type = EXCLUDED.action_type, payload = EXCLUDED.payload
            WHERE a.task_id = '00000000-0000-0000-0000-000000000000';
        END IF;
        -- The run's row learns the agent and a root task's error or interrupt; when neither
        -- is new the insert is not even tried (a conflicting insert locks the row).
        IF p_run_id IS NOT NULL AND (p_run_status IS NOT NULL OR NOT EXISTS (
            SELECT 1 FROM {schema}.run_log k
            WHERE k.thread_id = p_thread_id AND k.run_id = p_run_id AND p_agent = ANY(k.agents)))
        THEN
            INSERT INTO {schema}.run_log AS r (thread_id, run_id, status, status_step, agents)
            VALUES (p_thread_id, p_run_id, coalesce(p_run_status, 'running'),
                    CASE WHEN p_run_status IS NOT NULL THEN coalesce(task_step, 2147483647) END, ARRAY[p_agent])
            ON CONFLICT (thread_id, run_id) DO UPDATE SET
                ended_at = EXCLUDED.ended_at,
                status = CASE WHEN EXCLUDED.status_step >= coalesce(r.status_step, EXCLUDED.status_step)
                              THEN EXCLUDED.status ELSE r.status END,
                status_step = greatest(r.status_step, EXCLUDED.status_step),
                agents = CASE WHEN EXCLUDED.agents <@ r.agents THEN r.agents ELSE r.agents || EXCLUDED.agents END
            WHERE EXCLUDED.status_step IS NOT NULL OR NOT EXCLUDED.agents <@ r.agents
            RETURNING xmax = 0 INTO fresh;
            IF fresh THEN  -- a new run: the thread's runs still running stopped with work left
                UPDATE {schema}.run_log e SET status = 'interrupted'
                WHERE e.thread_id = p_thread_id AND e.status = 'running' AND e.run_id <> p_run_id;
            END IF;
        END IF;
    END IF;
    IF n_items > 16 THEN
        INSERT INTO {schema}.channel_items (
            thread_id, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size)
        SELECT p_thread_id, p_checkpoint_ns, i.channel, i.version, i.idx, i.type, i.value,
               i.object_key, i.object_sha256, i.object_size
        FROM unnest(p_item_channels, p_item_of, p_item_idx, p_item_types, p_item_values, p_item_object_keys,
                    p_item_object_shas, p_item_object_sizes)
            AS i(channel, version, idx, type, value, object_key, object_sha256, object_size)
        ON CONFLICT (thread_id, checkpoint_ns, channel, version, idx) DO NOTHING;
    ELSE
        FOR k IN 1 .. n_items LOOP
            INSERT INTO {schema}.channel_items (
                thread_id, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size)
            VALUES (p_thread_id, p_checkpoint_ns, p_item_channels[k], p_item_of[k], p_item_idx[k], p_item_types[k],
                    p_item_values[k], p_item_object_keys[k], p_item_object_shas[k], p_item_object_sizes[k])
            ON CONFLICT (thread_id, checkpoint_ns, channel, version, idx) DO NOTHING;
        END LOOP;
    END IF;
    IF p_kind = 'packed' THEN
        IF task_rows THEN
            RETURN 0;
        END IF;
        INSERT INTO {schema}.checkpoint_writes (
            thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value, item_version,
            run_id, step, agent, action_type, payload)
        VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_task_id, p_task_path, p_packed_idx, p_packed_channel,
                p_packed_type, p_packed_value, p_packed_item_version,
                CASE WHEN p_log THEN coalesce(p_run_id, '') END, CASE WHEN p_log THEN task_step END,
                CASE WHEN p_log THEN p_agent END, CASE WHEN p_log THEN p_action_type END,
                CASE WHEN p_log THEN p_payload END)
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING;
        GET DIAGNOSTICS written = ROW_COUNT;
        RETURN written;
    END IF;
    FOR k IN 1 .. n LOOP
        CONTINUE WHEN NOT p_replace AND NOT (p_idx[k] < 0 OR p_idx[k] > packed_upto);
        IF p_replace THEN
            INSERT INTO {schema}.checkpoint_writes (
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value,
                object_key, object_sha256, object_size, item_version)
            VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_task_id, p_task_path, p_idx[k], p_channels[k],
                    p_types[k], p_values[k], p_object_keys[k], p_object_shas[k], p_object_sizes[k], p_write_item_versions[k])
            ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
                channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value, task_path = EXCLUDED.task_path,
                object_key = EXCLUDED.object_key, object_sha256 = EXCLUDED.object_sha256, object_size = EXCLUDED.object_size;
        ELSE
            INSERT INTO {schema}.checkpoint_writes (
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value,
                object_key, object_sha256, object_size, item_version)
            VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_task_id, p_task_path, p_idx[k], p_channels[k],
                    p_types[k], p_values[k], p_object_keys[k], p_object_shas[k], p_object_sizes[k], p_write_item_versions[k])
            ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING;
        END IF;
        GET DIAGNOSTICS one = ROW_COUNT;
        written := written + one;
    END LOOP;
    RETURN written;
END
$fn$;
