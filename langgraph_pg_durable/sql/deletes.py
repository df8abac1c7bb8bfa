"""Statements that delete or copy threads and checkpoints, keeping what survivors need."""

from __future__ import annotations

from .action_row import FOLDED, FOLDED_COLUMNS, folded_columns

T = "ANY(%(thread_ids)s)"  # the threads a delete or prune is of


def delete_threads(q: str) -> str:
    return f"""
WITH gone_writes AS (
    DELETE FROM {q}.checkpoint_writes WHERE thread_id = ANY(%(thread_ids)s)
), gone_values AS (
    DELETE FROM {q}.channel_values WHERE thread_id = ANY(%(thread_ids)s)
), gone_items AS (
    DELETE FROM {q}.channel_items WHERE thread_id = ANY(%(thread_ids)s)
), gone_actions AS (
    DELETE FROM {q}.action_log WHERE thread_id = ANY(%(thread_ids)s)
), gone_runs AS (
    DELETE FROM {q}.run_log WHERE thread_id = ANY(%(thread_ids)s)
), gone_effects AS (
    DELETE FROM {q}.effects WHERE thread_id = ANY(%(thread_ids)s)
), gone_holders AS (
    DELETE FROM {q}.thread_holders WHERE thread_id = ANY(%(thread_ids)s)
)
DELETE FROM {q}.checkpoints WHERE thread_id = ANY(%(thread_ids)s)"""


def _drop_checkpoints(q: str, doomed: str, also: str = "", dropped_runs: str = "") -> str:
    """Delete the checkpoints `doomed` selects, their writes, and values and list items
    nothing surviving needs. The actions their packed writes rows hold move to action_log
    (the log outlives a prune), except those of the runs the statement deletes
    (`dropped_runs`: a condition on `w.run_id`).

    `doomed` is a SELECT of (thread_id, checkpoint_ns, checkpoint_id) over
    `{schema}.checkpoints c`. A surviving checkpoint holds its values, the rows its
    list versions extend (list_chain) and the items all of those use (item_versions).
    Every sub-statement sees the same snapshot, so the survivors are the checkpoints
    `doomed` does not select. `also`: more CTEs (each followed by a comma).

    `doomed` selects within the threads `thread_ids`, and every other table access names
    them too (`T`), not only through `doomed`: Citus plans each CTE on its own, and one
    that reaches the thread only through another CTE runs on every shard.
    """
    return f"""
WITH doomed AS MATERIALIZED ({doomed}),{also}
gone AS (
    DELETE FROM {q}.checkpoints c USING doomed d
    WHERE c.thread_id = {T} AND c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns
      AND c.checkpoint_id = d.checkpoint_id
    RETURNING c.thread_id, c.checkpoint_ns, c.value_channels, c.value_versions
), kept_actions AS (
    INSERT INTO {q}.action_log (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, {FOLDED_COLUMNS}, created_at)
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, 0, {folded_columns("w")}, w.created_at
    FROM {q}.checkpoint_writes w JOIN doomed d
      ON w.thread_id = {T} AND w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
     AND w.checkpoint_id = d.checkpoint_id
    WHERE w.action_type IS NOT NULL{f" AND NOT ({dropped_runs})" if dropped_runs else ""}
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO NOTHING
), gone_writes AS (
    DELETE FROM {q}.checkpoint_writes w USING doomed d
    WHERE w.thread_id = {T} AND w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
      AND w.checkpoint_id = d.checkpoint_id
), gone_effects AS (
    DELETE FROM {q}.effects e USING doomed d
    WHERE e.thread_id = {T} AND e.thread_id = d.thread_id AND e.checkpoint_ns = d.checkpoint_ns
      AND e.checkpoint_id = d.checkpoint_id
), freed AS (
    SELECT DISTINCT g.thread_id, g.checkpoint_ns, f.channel, f.version
    FROM gone g, unnest(g.value_channels, g.value_versions) AS f(channel, version)
), held_direct AS MATERIALIZED (
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, h.channel, h.version
    FROM {q}.checkpoints c, unnest(c.value_channels, c.value_versions) AS h(channel, version)
    WHERE c.thread_id = {T} AND c.thread_id IN (SELECT thread_id FROM doomed)
      AND NOT EXISTS (
        SELECT 1 FROM doomed d
        WHERE d.thread_id = c.thread_id AND d.checkpoint_ns = c.checkpoint_ns
          AND d.checkpoint_id = c.checkpoint_id)
), held_rows AS MATERIALIZED (
    SELECT v.thread_id, v.checkpoint_ns, v.channel, v.version, v.list_chain, v.item_versions
    FROM {q}.channel_values v JOIN held_direct h
      ON v.thread_id = {T} AND v.thread_id = h.thread_id AND v.checkpoint_ns = h.checkpoint_ns
     AND v.channel = h.channel AND v.version = h.version
), held_links AS MATERIALIZED (
    SELECT DISTINCT r.thread_id, r.checkpoint_ns, r.channel, x.version
    FROM held_rows r, unnest(r.list_chain) AS x(version)
), held AS MATERIALIZED (
    SELECT thread_id, checkpoint_ns, channel, version FROM held_direct
    UNION
    SELECT thread_id, checkpoint_ns, channel, version FROM held_links
), held_items AS MATERIALIZED (
    SELECT DISTINCT r.thread_id, r.checkpoint_ns, r.channel, x.version
    FROM (SELECT thread_id, checkpoint_ns, channel, item_versions FROM held_rows
          UNION ALL
          SELECT v.thread_id, v.checkpoint_ns, v.channel, v.item_versions
          FROM {q}.channel_values v JOIN held_links k
            ON v.thread_id = {T} AND v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
           AND v.channel = k.channel AND v.version = k.version) AS r,
         unnest(r.item_versions) AS x(version)
    UNION  -- the items of surviving checkpoints' pending writes
    SELECT w.thread_id, w.checkpoint_ns, w.channel, w.item_version
    FROM {q}.checkpoint_writes w
    WHERE w.thread_id = {T} AND w.thread_id IN (SELECT thread_id FROM doomed) AND w.item_version IS NOT NULL
      AND NOT EXISTS (
        SELECT 1 FROM doomed d
        WHERE d.thread_id = w.thread_id AND d.checkpoint_ns = w.checkpoint_ns
          AND d.checkpoint_id = w.checkpoint_id)
), gone_values AS (
    DELETE FROM {q}.channel_values v USING freed f
    WHERE v.thread_id = {T} AND v.thread_id = f.thread_id AND v.checkpoint_ns = f.checkpoint_ns
      AND v.channel = f.channel AND v.version = f.version
      AND NOT EXISTS (
        SELECT 1 FROM held h
        WHERE h.thread_id = f.thread_id AND h.checkpoint_ns = f.checkpoint_ns
          AND h.channel = f.channel AND h.version = f.version)
)
DELETE FROM {q}.channel_items i
WHERE i.thread_id = {T} AND i.thread_id IN (SELECT thread_id FROM doomed)
  AND EXISTS (SELECT 1 FROM gone)
  AND NOT EXISTS (
    SELECT 1 FROM held_items h
    WHERE h.thread_id = i.thread_id AND h.checkpoint_ns = i.checkpoint_ns
      AND h.channel = i.channel AND h.version = i.version)"""


def delete_for_runs(q: str) -> str:
    """The runs' checkpoints, except those named in `keep_*` (the ancestors a surviving
    DeltaChannel checkpoint replays), and the runs' action rows, effects and run rows. A
    run's action held by a surviving checkpoint's writes row (a task the run re-ran there,
    as a resume does) is taken off the row."""
    runs = "w.run_id = ANY(%(run_ids)s)"
    return _drop_checkpoints(
        q,
        f"SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id FROM {q}.checkpoints c "
        f"WHERE c.thread_id = {T} AND c.run_id = ANY(%(run_ids)s) AND (c.thread_id, c.checkpoint_ns, c.checkpoint_id) NOT IN ("
        " SELECT * FROM unnest(%(keep_threads)b::text[], %(keep_namespaces)b::text[], %(keep_ids)b::text[]))",
        f"""
gone_actions AS (
    DELETE FROM {q}.action_log WHERE thread_id = {T} AND run_id = ANY(%(run_ids)s)
), gone_folded AS (
    UPDATE {q}.checkpoint_writes w SET {", ".join(f"{column} = NULL" for column in FOLDED)}
    WHERE w.thread_id = {T} AND {runs} AND NOT EXISTS (
        SELECT 1 FROM doomed d
        WHERE d.thread_id = w.thread_id AND d.checkpoint_ns = w.checkpoint_ns AND d.checkpoint_id = w.checkpoint_id)
), gone_run_effects AS (
    DELETE FROM {q}.effects WHERE thread_id = {T} AND run_id = ANY(%(run_ids)s)
), gone_runs AS (
    DELETE FROM {q}.run_log WHERE thread_id = {T} AND run_id = ANY(%(run_ids)s)
),""",
        runs,
    )


def prune_keep_latest(q: str) -> str:
    """All but the newest checkpoint of each (thread, namespace), and the ones named in
    `keep_*` (the ancestors a kept DeltaChannel checkpoint replays)."""
    return _drop_checkpoints(
        q,
        "SELECT thread_id, checkpoint_ns, checkpoint_id FROM ("
        " SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, row_number() OVER ("
        "  PARTITION BY c.thread_id, c.checkpoint_ns ORDER BY c.checkpoint_id DESC) AS rank"
        f" FROM {q}.checkpoints c WHERE c.thread_id = {T}"
        ") ranked WHERE rank > 1 AND (thread_id, checkpoint_ns, checkpoint_id) NOT IN ("
        " SELECT * FROM unnest(%(keep_threads)b::text[], %(keep_namespaces)b::text[], %(keep_ids)b::text[]))",
    )


def copy_thread(q: str) -> str:
    """Copy every row of `source` to `target`, unless `target` has checkpoints already
    (then nothing is written). Returns one row: whether the target was taken."""
    return f"""
WITH taken AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM {q}.checkpoints WHERE thread_id = %(target)s) AS taken
), copied_values AS (
    INSERT INTO {q}.channel_values (
        thread_id, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
        list_chain, item_versions)
    SELECT %(target)s, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
           list_chain, item_versions
    FROM {q}.channel_values WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), copied_items AS (
    INSERT INTO {q}.channel_items (
        thread_id, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size)
    SELECT %(target)s, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size
    FROM {q}.channel_items WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version, idx) DO NOTHING
), copied_writes AS (
    INSERT INTO {q}.checkpoint_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, value,
        object_key, object_sha256, object_size, item_version, {FOLDED_COLUMNS}, created_at)
    SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, value,
           object_key, object_sha256, object_size, item_version, {FOLDED_COLUMNS}, created_at
    FROM {q}.checkpoint_writes WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
), copied_actions AS (
    INSERT INTO {q}.action_log (
        thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload, created_at)
    SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload, created_at
    FROM {q}.action_log WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO NOTHING
), copied_runs AS (
    INSERT INTO {q}.run_log (
        thread_id, run_id, started_at, ended_at, first_step, last_step, status, status_step, agents)
    SELECT %(target)s, run_id, started_at, ended_at, first_step, last_step, status, status_step, agents
    FROM {q}.run_log WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, run_id) DO NOTHING
), copied AS (
    INSERT INTO {q}.checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
        checkpoint, value_channels, value_versions, metadata, metadata_exact)
    SELECT %(target)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
           checkpoint, value_channels, value_versions, metadata, metadata_exact
    FROM {q}.checkpoints WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING
)
SELECT taken FROM taken"""
