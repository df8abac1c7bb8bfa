-- One writer per thread (fencing; langgraph_pg_durable/fencing.py). A run that writes a
-- thread takes it first: its row here names the run and the token (`writer`, random per
-- run and saver process) every later write of the run carries. A write whose token is no
-- longer the thread's stores nothing, in the same statement, and the saver raises
-- ThreadTakenError. `taken_at` says since when the run holds the thread.
CREATE TABLE IF NOT EXISTS {schema}.thread_holders (
    thread_id text        NOT NULL PRIMARY KEY,
    run_id    text        NOT NULL,
    writer    text        NOT NULL,
    taken_at  timestamptz NOT NULL DEFAULT now()
);

-- The write functions of 0008 (sql/routed.py) take the token as a last parameter,
-- p_fence, and check it in their first probe (no statement more on a Citus worker).
-- Dropped and made again: a new parameter is a new function.
-- On Citus, run distribute() (`lgpd distribute`) again after this migration, so that the
-- new functions are delegated to the worker holding the thread like the old ones were.
DROP FUNCTION IF EXISTS {schema}.lgpd_put(
    text, text, text, text, text, integer, text, jsonb, text[], text[], jsonb, bytea, text, text[], text[], text[], text[],
    text[], text[], text[], bytea[], text[], text[], bigint[], text[], text[],
    text[], text[], integer[], text[], bytea[], text[], text[], bigint[], boolean, integer, text);
DROP FUNCTION IF EXISTS {schema}.lgpd_put_writes(
    text, boolean, text, text, text, text, text, text, text, integer[], text[], text[], bytea[], text[], text[], bigint[], text[],
    integer, text, bytea, text, text[], text[], integer[], text[], bytea[], text[], text[], bigint[],
    boolean, text, integer, integer, text, text, jsonb, text);

-- `put` and `put_plain` (sql/writes.py): 1 when the checkpoint row was written, 0 when
-- something it relies on is not stored (then nothing is written).
CREATE OR REPLACE FUNCTION {schema}.lgpd_put(
    p_thread_id text, p_checkpoint_ns text, p_checkpoint_id text, p_parent_checkpoint_id text, p_run_id text,
    p_step integer, p_source text, p_checkpoint jsonb, p_value_channels text[], p_value_versions text[],
    p_metadata jsonb, p_metadata_exact bytea,
    p_check_parent text, p_base_channels text[], p_base_versions text[],
    p_base_item_channels text[], p_base_item_versions text[],
    p_channels text[], p_versions text[], p_types text[], p_values bytea[],
    p_object_keys text[], p_object_shas text[], p_object_sizes bigint[], p_list_chains text[], p_item_versions text[],
    p_item_channels text[], p_item_of text[], p_item_idx integer[], p_item_types text[], p_item_values bytea[],
    p_item_object_keys text[], p_item_object_shas text[], p_item_object_sizes bigint[],
    p_log boolean, p_run_step integer, p_run_status text, p_fence text
) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := coalesce(array_length(p_channels, 1), 0);
    n_items integer := coalesce(array_length(p_item_channels, 1), 0);
    fresh boolean;
BEGIN
    -- What it relies on (_missing_bases): the parent this saver saw committed and the
    -- thread's writer (a write under a fencing token stores nothing once another run took
    -- the thread: thread_holders), in one statement; the values it holds without writing
    -- them, the items of pending writes its lists use. Each a statement of its own, sent
    -- only when there is something to check: a single-table probe is Citus's cheapest plan.
    IF (p_check_parent IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {schema}.checkpoints p
        WHERE p.thread_id = p_thread_id AND p.checkpoint_ns = p_checkpoint_ns AND p.checkpoint_id = p_check_parent
    )) OR (p_fence IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {schema}.thread_holders h WHERE h.thread_id = p_thread_id AND h.writer = p_fence
    )) THEN
        RETURN 0;
    END IF;
    IF coalesce(array_length(p_base_channels, 1), 0) > 0 AND EXISTS (
        SELECT 1 FROM unnest(p_base_channels, p_base_versions) AS b(channel, version)
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.channel_values v
            WHERE v.thread_id = p_thread_id AND v.checkpoint_ns = p_checkpoint_ns
              AND v.channel = b.channel AND v.version = b.version)
    ) THEN
        RETURN 0;
    END IF;
    IF coalesce(array_length(p_base_item_channels, 1), 0) > 0 AND EXISTS (
        SELECT 1 FROM unnest(p_base_item_channels, p_base_item_versions) AS b(channel, version)
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.channel_items i
            WHERE i.thread_id = p_thread_id AND i.checkpoint_ns = p_checkpoint_ns
              AND i.channel = b.channel AND i.version = b.version AND i.idx = 0)
    ) THEN
        RETURN 0;
    END IF;
    IF p_log THEN  -- the run's row (_checkpoint_run)
        INSERT INTO {schema}.run_log AS r (thread_id, run_id, first_step, last_step, status, status_step)
        VALUES (p_thread_id, p_run_id, p_run_step, p_run_step, p_run_status, p_run_step)
        ON CONFLICT (thread_id, run_id) DO UPDATE SET
            ended_at = EXCLUDED.ended_at, first_step = least(r.first_step, EXCLUDED.first_step),
            last_step = greatest(r.last_step, EXCLUDED.last_step),
            status = CASE WHEN EXCLUDED.status_step >= coalesce(r.status_step, EXCLUDED.status_step)
                          THEN EXCLUDED.status ELSE r.status END,
            status_step = greatest(r.status_step, EXCLUDED.status_step)
        WHERE EXCLUDED.first_step IS NOT NULL
        RETURNING xmax = 0 INTO fresh;
        IF fresh THEN  -- a new run: the thread's runs still running stopped with work left
            UPDATE {schema}.run_log e SET status = 'interrupted'
            WHERE e.thread_id = p_thread_id AND e.status = 'running' AND e.run_id <> p_run_id;
        END IF;
    END IF;
    IF n > 16 THEN
        INSERT INTO {schema}.channel_values (
            thread_id, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
            list_chain, item_versions)
        SELECT p_thread_id, p_checkpoint_ns, v.channel, v.version, v.type, v.value, v.object_key, v.object_sha256,
               v.object_size, string_to_array(v.list_chain, E'\x1f'), string_to_array(v.item_versions, E'\x1f')
        FROM unnest(p_channels, p_versions, p_types, p_values, p_object_keys, p_object_shas, p_object_sizes,
                    p_list_chains, p_item_versions)
            AS v(channel, version, type, value, object_key, object_sha256, object_size, list_chain, item_versions)
        ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING;
    ELSE
        FOR k IN 1 .. n LOOP
            INSERT INTO {schema}.channel_values (
                thread_id, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
                list_chain, item_versions)
            VALUES (p_thread_id, p_checkpoint_ns, p_channels[k], p_versions[k], p_types[k], p_values[k],
                    p_object_keys[k], p_object_shas[k], p_object_sizes[k],
                    string_to_array(p_list_chains[k], E'\x1f'), string_to_array(p_item_versions[k], E'\x1f'))
            ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING;
        END LOOP;
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
    INSERT INTO {schema}.checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
        checkpoint, value_channels, value_versions, metadata, metadata_exact)
    VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_parent_checkpoint_id, p_run_id, p_step, p_source,
            p_checkpoint, p_value_channels, p_value_versions, p_metadata, p_metadata_exact)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, run_id = EXCLUDED.run_id, step = EXCLUDED.step,
        source = EXCLUDED.source, checkpoint = EXCLUDED.checkpoint, value_channels = EXCLUDED.value_channels,
        value_versions = EXCLUDED.value_versions, metadata = EXCLUDED.metadata, metadata_exact = EXCLUDED.metadata_exact;
    RETURN 1;
END
$fn$;

-- `put_writes`, `put_writes_items` and `put_packed_writes` (sql/writes.py), by p_kind:
-- 'rows' (a row per write; p_replace overwrites a retry's rows of special channels),
-- 'items' (rows, some writes stored as list items) or 'packed' (the task's writes as one
-- row, only when the task has none at the checkpoint yet). Returns the rows written;
-- nothing is written when the checkpoint this saver saw committed (p_check_checkpoint)
-- is gone. With p_log, the task's action row and its run's row (_task_log).
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
        INSERT INTO {schema}.action_log AS a (
            thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload)
        VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_task_id, coalesce(p_run_id, ''), p_action_idx,
                task_step, p_agent, p_action_type, p_payload)
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO UPDATE SET
            action_type = EXCLUDED.action_type, payload = EXCLUDED.payload
        WHERE a.task_id = '00000000-0000-0000-0000-000000000000';
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
            thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value, item_version)
        VALUES (p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_task_id, p_task_path, p_packed_idx, p_packed_channel,
                p_packed_type, p_packed_value, p_packed_item_version)
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
