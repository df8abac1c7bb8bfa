"""SQL text of every statement, for one schema. Every statement anchors on thread_id.

Each saver operation is one statement (one network round trip): `put` stores its
channel values and its checkpoint row in one data-modifying CTE, and `get_tuple`
reads the checkpoint, its values and its pending writes as one UNION ALL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .schema import quote_schema


def compact(sql: str) -> str:
    """The statement without comments and runs of whitespace, for the hot paths: psycopg
    caches its parse of a statement up to 4 KiB long, and get_tuple's is longer with them.
    (No statement here has `--` or a run of spaces inside a string literal.)"""
    # Not str.split(): it takes the \x1f the list statements use as a separator for space.
    return re.sub(r"[ \t\r\n]+", " ", re.sub(r"--[^\n]*", "", sql)).strip()

# Columns of a checkpoint row as read back, in this order, by every read.
# The jsonb columns come as text: `rows` decodes them with orjson, several times faster
# than the driver's json.loads, whatever JSON loader the caller's connection has.
CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint::text AS checkpoint, "
    "metadata::text AS metadata, metadata_exact, value_channels, value_versions"
)


@dataclass(frozen=True)
class Statements:
    """The statements of one schema; built once per saver."""

    schema: str

    @property
    def q(self) -> str:
        return quote_schema(self.schema)

    # -- writes ---------------------------------------------------------------

    # gc's lock, one per object prefix: a put storing objects holds it shared from its first
    # upload to its commit; gc holds it exclusively (a session lock) while it checks
    # references and deletes.
    GC_SHARE = "SELECT pg_advisory_xact_lock_shared(%(gc_key)s)"
    GC_LOCK = "SELECT pg_advisory_lock(%(gc_key)s)"
    GC_UNLOCK = "SELECT pg_advisory_unlock(%(gc_key)s)"

    @staticmethod
    def lock_threads() -> str:
        """Take the writer locks of `lock_keys` (sorted), held to the end of the transaction.
        Sent before a write or delete, in its transaction, so that the statement's snapshot
        is taken after the thread's other writer committed (see Query.locks)."""
        return "SELECT pg_advisory_xact_lock(k) FROM unnest(%(lock_keys)b::int8[]) AS k"

    def _missing_bases(self) -> str:
        """One row when a stored value the put relies on (a version it holds but does not
        write, or a list version its deltas extend) is not there."""
        return f"""(SELECT 1 FROM unnest(%(base_channels)b::text[], %(base_versions)b::text[]) AS b(channel, version)
     WHERE NOT EXISTS (
        SELECT 1 FROM {self.q}.channel_values v
        WHERE v.thread_id = %(thread_id)s AND v.checkpoint_ns = %(checkpoint_ns)s
          AND v.channel = b.channel AND v.version = b.version)
     LIMIT 1)"""

    def put_plain(self) -> str:
        """`put` for the common case: no list in the delta layout, nothing offloaded. Writes
        nothing when a value it holds but does not write is not stored."""
        s = self.q
        return f"""
WITH missing_bases AS MATERIALIZED {self._missing_bases()},
stored_values AS (
    INSERT INTO {s}.channel_values (thread_id, checkpoint_ns, channel, version, type, value)
    SELECT %(thread_id)s, %(checkpoint_ns)s, v.channel, v.version, v.type, v.value
    FROM unnest(%(channels)b::text[], %(versions)b::text[], %(types)b::text[], %(values)b::bytea[])
        AS v(channel, version, type, value)
    WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
)
INSERT INTO {s}.checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
    checkpoint, value_channels, value_versions, metadata, metadata_exact)
SELECT
    %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s, %(run_id)s,
    %(step)s, %(source)s, %(checkpoint)s::jsonb, %(value_channels)b::text[],
    %(value_versions)b::text[], %(metadata)s::jsonb, %(metadata_exact)s
WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
{self._checkpoint_conflict()}"""

    @staticmethod
    def _checkpoint_conflict() -> str:
        return """ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
    run_id = EXCLUDED.run_id,
    step = EXCLUDED.step,
    source = EXCLUDED.source,
    checkpoint = EXCLUDED.checkpoint,
    value_channels = EXCLUDED.value_channels,
    value_versions = EXCLUDED.value_versions,
    metadata = EXCLUDED.metadata,
    metadata_exact = EXCLUDED.metadata_exact
RETURNING 1"""

    def put(self) -> str:
        """`put` with lists in the delta layout and offloaded values."""
        s = self.q
        return f"""
-- The stored values this put holds without writing them, and the list versions its deltas
-- extend (or whose items its snapshots reuse), must still be there: if one was pruned or
-- deleted meanwhile, nothing is written and the caller sends the put again, whole.
WITH missing_bases AS MATERIALIZED (
    {self._missing_bases()}
    UNION ALL
    -- Items a pending write stored (a group is written whole, so its first item will do).
    (SELECT 1 FROM unnest(%(base_item_channels)b::text[], %(base_item_versions)b::text[]) AS b(channel, version)
     WHERE NOT EXISTS (
        SELECT 1 FROM {s}.channel_items i
        WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
          AND i.channel = b.channel AND i.version = b.version AND i.idx = 0)
     LIMIT 1)
), stored_values AS (
    INSERT INTO {s}.channel_values (
        thread_id, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
        list_chain, item_versions)
    SELECT %(thread_id)s, %(checkpoint_ns)s, v.channel, v.version, v.type, v.value,
           v.object_key, v.object_sha256, v.object_size,
           string_to_array(v.list_chain, E'\x1f'), string_to_array(v.item_versions, E'\x1f')
    FROM unnest(%(channels)b::text[], %(versions)b::text[], %(types)b::text[], %(values)b::bytea[],
                %(object_keys)b::text[], %(object_shas)b::text[], %(object_sizes)b::int8[],
                %(list_chains)b::text[], %(item_versions)b::text[])
        AS v(channel, version, type, value, object_key, object_sha256, object_size, list_chain, item_versions)
    WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), stored_items AS (
{self._insert_items("WHERE NOT EXISTS (SELECT 1 FROM missing_bases)")}
)
INSERT INTO {s}.checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
    checkpoint, value_channels, value_versions, metadata, metadata_exact)
SELECT
    %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s, %(run_id)s,
    %(step)s, %(source)s, %(checkpoint)s::jsonb, %(value_channels)b::text[],
    %(value_versions)b::text[], %(metadata)s::jsonb, %(metadata_exact)s
WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
{self._checkpoint_conflict()}"""

    def _insert_items(self, guard: str = "") -> str:
        """The channel_items rows of `rows._item_params`, each once (`guard`: a WHERE)."""
        return f"""    INSERT INTO {self.q}.channel_items (
        thread_id, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size)
    SELECT %(thread_id)s, %(checkpoint_ns)s, i.channel, i.version, i.idx, i.type, i.value,
           i.object_key, i.object_sha256, i.object_size
    FROM unnest(%(item_channels)b::text[], %(item_of)b::text[], %(item_idx)b::int[], %(item_types)b::text[],
                %(item_values)b::bytea[], %(item_object_keys)b::text[], %(item_object_shas)b::text[],
                %(item_object_sizes)b::int8[])
        AS i(channel, version, idx, type, value, object_key, object_sha256, object_size)
    {guard}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version, idx) DO NOTHING"""

    def put_writes_items(self) -> str:
        """Insert a task's writes, some stored as items under their write keys (never a
        special channel's, so never replacing)."""
        s = self.q
        return f"""
WITH stored_items AS (
{self._insert_items()}
)
INSERT INTO {s}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value,
    object_key, object_sha256, object_size, item_version)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.value, w.object_key, w.object_sha256, w.object_size, w.item_version
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(values)b::bytea[],
            %(object_keys)b::text[], %(object_shas)b::text[], %(object_sizes)b::int8[],
            %(write_item_versions)b::text[])
    AS w(idx, channel, type, value, object_key, object_sha256, object_size, item_version)
{self._not_packed_already()}
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING"""

    def _task_writes(self, alias: str) -> str:
        """The rows of this put_writes' task at its checkpoint (a primary-key range)."""
        return f"""{self.q}.checkpoint_writes {alias}
    WHERE {alias}.thread_id = %(thread_id)s AND {alias}.checkpoint_ns = %(checkpoint_ns)s
      AND {alias}.checkpoint_id = %(checkpoint_id)s AND {alias}.task_id = %(task_id)s"""

    def _not_packed_already(self) -> str:
        """Skips the writes a packed row of the task holds already (indexes 0 to its own):
        as with a row per write, the first write at an index is the one kept."""
        return f"""WHERE w.idx < 0 OR w.idx > coalesce((
    SELECT max(p.idx) FROM {self._task_writes("p")} AND p.type = %(packed_type)s), -1)"""

    def put_packed_writes(self, *, items: bool) -> str:
        """A task's writes as one row, for a task that has no writes at the checkpoint yet;
        returns a row when it stored it. For a task re-run (or a retry) it stores nothing,
        and the caller sends `put_writes`, a row per write, which keeps the first write at
        each index and adds the rest, as the official saver's row per write does."""
        s = self.q
        with_items = f"WITH stored_items AS (\n{self._insert_items()}\n)\n" if items else ""
        return f"""
{with_items}INSERT INTO {s}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value, item_version)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       %(packed_idx)s, %(packed_channel)s, %(packed_type)s, %(packed_value)b, %(packed_item_version)s
WHERE NOT EXISTS (SELECT 1 FROM {self._task_writes("t")} AND t.idx >= 0)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
RETURNING 1"""

    def put_writes(self, *, replace: bool, offloaded: bool = True) -> str:
        """Insert a task's writes; `replace` (special channels only) overwrites a retry's rows;
        without `offloaded` the statement leaves the object-reference columns out."""
        conflict = (
            "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, "
            "value = EXCLUDED.value, task_path = EXCLUDED.task_path, object_key = EXCLUDED.object_key, "
            "object_sha256 = EXCLUDED.object_sha256, object_size = EXCLUDED.object_size"
            if replace
            else "DO NOTHING"
        )
        # Special channels have indexes below 0, which a packed row never holds.
        skip = "" if replace else self._not_packed_already() + "\n"
        if not offloaded:
            return f"""
INSERT INTO {self.q}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.value
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(values)b::bytea[])
    AS w(idx, channel, type, value)
{skip}ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict.split(", object_key")[0]}"""
        return f"""
INSERT INTO {self.q}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value,
    object_key, object_sha256, object_size)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.value, w.object_key, w.object_sha256, w.object_size
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(values)b::bytea[],
            %(object_keys)b::text[], %(object_shas)b::text[], %(object_sizes)b::int8[])
    AS w(idx, channel, type, value, object_key, object_sha256, object_size)
{skip}ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}"""

    # -- reads ----------------------------------------------------------------

    def get_tuple(self, *, by_id: bool, cold: bool = False) -> str:
        """The target checkpoint ('c'), its channel values ('v') and pending writes ('w').

        `cold`: the caller holds no item of the thread (a new process), so every item the
        lists use comes back; one range scan of the thread's channel then beats a
        primary-key probe per item (a thousand probes: 5 ms of the server's 10).
        """
        s = self.q
        exact = "AND checkpoint_id = %(checkpoint_id)s" if by_id else ""
        if cold:
            item_keys = f"""item_keys AS MATERIALIZED (
    SELECT r.channel, x.version
    FROM (SELECT channel, item_versions FROM unknown UNION ALL SELECT channel, item_versions FROM links) AS r,
         unnest(r.item_versions) AS x(version)
    UNION ALL
    SELECT channel, item_version FROM writes WHERE item_version IS NOT NULL
),
-- Every item of those channels in the thread: a range scan of the primary key per channel,
-- kept apart so that the planner cannot turn it back into a probe per item.
channel_rows AS MATERIALIZED (
    SELECT i.channel, i.version, i.idx, i.type, i.value, i.object_key, i.object_sha256, i.object_size
    FROM {s}.channel_items i
    WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
      AND i.channel IN (SELECT DISTINCT channel FROM item_keys)
)"""
            items = """FROM channel_rows i
WHERE (i.channel, i.version) IN (SELECT channel, version FROM item_keys)"""
        else:
            item_keys = """-- The items those lists and writes use, minus the groups the caller already holds
-- (items never change once written).
item_keys AS MATERIALIZED (
    SELECT r.channel, x.version
    FROM (SELECT channel, item_versions FROM unknown UNION ALL SELECT channel, item_versions FROM links) AS r,
         unnest(r.item_versions) AS x(version)
    UNION
    SELECT channel, item_version FROM writes WHERE item_version IS NOT NULL
    EXCEPT
    -- A JSON array of [channel, version] pairs: a thousand keys cost the client one
    -- orjson call, where two text[] parameters cost a Python loop over each element.
    SELECT k ->> 0, k ->> 1 FROM json_array_elements(%(known)s::json) AS k
),
-- One aggregate, so the two arrays are aligned.
item_arrays AS MATERIALIZED (
    SELECT array_agg(channel) AS channels, array_agg(version) AS versions FROM item_keys
)"""
            items = f"""-- Primary-key probes, whatever plan the statistics (or a generic plan) would favour:
-- a scan of channel_items would read every thread's items.
FROM unnest((SELECT channels FROM item_arrays)::text[], (SELECT versions FROM item_arrays)::text[])
    AS k(channel, version)
JOIN {s}.channel_items i
  ON i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
 AND i.channel = k.channel AND i.version = k.version"""
        return f"""
WITH target AS MATERIALIZED (
    SELECT {CHECKPOINT_COLUMNS}
    FROM {s}.checkpoints
    WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s {exact}
    ORDER BY checkpoint_id DESC
    LIMIT 1
),
-- The keys come from InitPlans over `target`, so each value is one primary-key probe
-- whatever the statistics say; a `channel = ANY(...)` filter let the planner prefer a
-- scan of the thread's values (1.3 ms instead of 0.05 ms on a 1,000-step thread).
vals AS MATERIALIZED (
    SELECT v.channel, v.version, v.type, v.value, v.object_key, v.object_sha256, v.object_size,
           v.list_chain, v.item_versions
    FROM unnest((SELECT value_channels FROM target)::text[],
                (SELECT value_versions FROM target)::text[]) AS k(channel, version)
    JOIN {s}.channel_values v
      ON v.thread_id = %(thread_id)s AND v.checkpoint_ns = %(checkpoint_ns)s
     AND v.channel = k.channel AND v.version = k.version
),
-- Lists in the delta layout the caller does not hold already (it holds recent ones).
-- (An anti-join, not a correlated subquery over a set-returning function: Citus refuses those.)
unknown AS MATERIALIZED (
    SELECT v.channel, v.list_chain, v.item_versions
    FROM vals v
    LEFT JOIN (SELECT k ->> 0 AS channel, k ->> 1 AS version
               FROM json_array_elements(%(known_lists)s::json) AS k) AS known
      ON known.channel = v.channel AND known.version = v.version
    WHERE v.list_chain IS NOT NULL AND known.channel IS NULL
),
-- The rows each one extends, then every item they use.
links AS MATERIALIZED (
    SELECT v.channel, v.version, v.type, v.value, v.object_key, v.object_sha256, v.object_size,
           v.list_chain, v.item_versions
    FROM unnest(
        (SELECT array_agg(l.channel ORDER BY l.channel, x.n)
         FROM unknown l, unnest(l.list_chain) WITH ORDINALITY AS x(version, n))::text[],
        (SELECT array_agg(x.version ORDER BY l.channel, x.n)
         FROM unknown l, unnest(l.list_chain) WITH ORDINALITY AS x(version, n))::text[]) AS k(channel, version)
    JOIN {s}.channel_values v
      ON v.thread_id = %(thread_id)s AND v.checkpoint_ns = %(checkpoint_ns)s
     AND v.channel = k.channel AND v.version = k.version
),
writes AS MATERIALIZED (
    SELECT w.task_id, w.channel, w.task_path, w.idx, w.type, w.value,
           w.object_key, w.object_sha256, w.object_size, w.item_version
    FROM {s}.checkpoint_writes w
    WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = %(checkpoint_ns)s
      AND w.checkpoint_id = (SELECT checkpoint_id FROM target)
),
{item_keys}
SELECT 'c' AS part, t.checkpoint_id AS a, t.parent_checkpoint_id AS b, NULL::text AS c,
       NULL::int AS n, t.checkpoint AS doc, t.metadata AS meta, t.value_channels AS chs,
       t.value_versions AS vers, NULL::text AS type, t.metadata_exact AS data,
       NULL::text AS object_key, NULL::text AS object_sha256, NULL::bigint AS object_size
FROM target t
UNION ALL
SELECT 'v', channel, version, NULL, NULL, NULL, NULL, list_chain, item_versions, type, value,
       object_key, object_sha256, object_size
FROM vals
UNION ALL
SELECT 'l', channel, version, NULL, NULL, NULL, NULL, list_chain, item_versions, type, value,
       object_key, object_sha256, object_size
FROM links
UNION ALL
SELECT 'i', i.channel, i.version, NULL, i.idx, NULL, NULL, NULL, NULL, i.type, i.value,
       i.object_key, i.object_sha256, i.object_size
{items}
UNION ALL
SELECT 'w', task_id, channel, task_path, idx, NULL, NULL, NULL, NULL, type, value,
       object_key, object_sha256, object_size
FROM writes"""

    def list_page(self, where: str) -> str:
        """One page of checkpoint rows, newest first, for keyset pagination."""
        return f"""
SELECT {CHECKPOINT_COLUMNS}
FROM {self.q}.checkpoints
{where}
ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC
LIMIT %(page_size)s"""

    def page_details(self) -> str:
        """The values (by exact key) and pending writes of one page's checkpoints."""
        s = self.q
        return f"""
WITH vals AS MATERIALIZED (
    SELECT v.thread_id, v.checkpoint_ns, v.channel, v.version, v.type, v.value,
           v.object_key, v.object_sha256, v.object_size, v.list_chain, v.item_versions
    FROM unnest(%(v_threads)b::text[], %(v_namespaces)b::text[], %(v_channels)b::text[],
                %(v_versions)b::text[]) AS k(thread_id, checkpoint_ns, channel, version)
    JOIN {s}.channel_values v
      ON v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
     AND v.channel = k.channel AND v.version = k.version
), links AS MATERIALIZED (
    SELECT v.thread_id, v.checkpoint_ns, v.channel, v.version, v.type, v.value,
           v.object_key, v.object_sha256, v.object_size, v.list_chain, v.item_versions
    FROM (SELECT DISTINCT l.thread_id, l.checkpoint_ns, l.channel, x.version
          FROM vals l, unnest(l.list_chain) AS x(version)) AS k
    JOIN {s}.channel_values v
      ON v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
     AND v.channel = k.channel AND v.version = k.version
), writes AS MATERIALIZED (
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.idx,
           w.type, w.value, w.object_key, w.object_sha256, w.object_size, w.item_version
    FROM unnest(%(w_threads)b::text[], %(w_namespaces)b::text[], %(w_checkpoints)b::text[])
        AS k(thread_id, checkpoint_ns, checkpoint_id)
    JOIN {s}.checkpoint_writes w
      ON w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns
     AND w.checkpoint_id = k.checkpoint_id
), item_keys AS MATERIALIZED (
    SELECT r.thread_id, r.checkpoint_ns, r.channel, x.version
    FROM (SELECT thread_id, checkpoint_ns, channel, item_versions FROM vals
          UNION ALL SELECT thread_id, checkpoint_ns, channel, item_versions FROM links) AS r,
         unnest(r.item_versions) AS x(version)
    UNION
    SELECT thread_id, checkpoint_ns, channel, item_version FROM writes WHERE item_version IS NOT NULL
    EXCEPT  -- the item groups earlier pages of the same walk already brought
    SELECT k ->> 0, k ->> 1, k ->> 2, k ->> 3 FROM json_array_elements(%(known)s::json) AS k
)
SELECT 'v' AS part, thread_id, checkpoint_ns, array_to_string(list_chain, E'\x1f') AS checkpoint_id,
       channel AS a, version AS b, array_to_string(item_versions, E'\x1f') AS c, NULL::int AS n, type, value,
       object_key, object_sha256, object_size
FROM vals
UNION ALL
SELECT 'l', thread_id, checkpoint_ns, array_to_string(list_chain, E'\x1f'), channel, version,
       array_to_string(item_versions, E'\x1f'), NULL, type, value, object_key, object_sha256, object_size
FROM links
UNION ALL
SELECT 'i', i.thread_id, i.checkpoint_ns, NULL, i.channel, i.version, NULL, i.idx, i.type, i.value,
       i.object_key, i.object_sha256, i.object_size
FROM item_keys k
JOIN {s}.channel_items i
  ON i.thread_id = k.thread_id AND i.checkpoint_ns = k.checkpoint_ns
 AND i.channel = k.channel AND i.version = k.version
UNION ALL
SELECT 'w', thread_id, checkpoint_ns, checkpoint_id, task_id, channel,
       task_path, idx, type, value, object_key, object_sha256, object_size
FROM writes"""

    def referenced_objects(self) -> str:
        """Which of the given object keys some row still references (for gc)."""
        s = self.q
        return f"""
SELECT object_key FROM {s}.channel_values WHERE object_key = ANY(%(keys)b::text[])
UNION
SELECT object_key FROM {s}.checkpoint_writes WHERE object_key = ANY(%(keys)b::text[])
UNION
SELECT object_key FROM {s}.channel_items WHERE object_key = ANY(%(keys)b::text[])"""

    # -- deletes and copies -----------------------------------------------------

    def delete_threads(self) -> str:
        s = self.q
        return f"""
WITH gone_writes AS (
    DELETE FROM {s}.checkpoint_writes WHERE thread_id = ANY(%(thread_ids)s)
), gone_values AS (
    DELETE FROM {s}.channel_values WHERE thread_id = ANY(%(thread_ids)s)
), gone_items AS (
    DELETE FROM {s}.channel_items WHERE thread_id = ANY(%(thread_ids)s)
)
DELETE FROM {s}.checkpoints WHERE thread_id = ANY(%(thread_ids)s)"""

    def _drop_checkpoints(self, doomed: str) -> str:
        """Delete the checkpoints `doomed` selects, their writes, and values and list items
        nothing surviving needs.

        `doomed` is a SELECT of (thread_id, checkpoint_ns, checkpoint_id) over
        `{schema}.checkpoints c`. A surviving checkpoint holds its values, the rows its
        list versions extend (list_chain) and the items all of those use (item_versions).
        Every sub-statement sees the same snapshot, so the survivors are the checkpoints
        `doomed` does not select.
        """
        s = self.q
        return f"""
WITH doomed AS MATERIALIZED ({doomed}),
gone AS (
    DELETE FROM {s}.checkpoints c USING doomed d
    WHERE c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns
      AND c.checkpoint_id = d.checkpoint_id
    RETURNING c.thread_id, c.checkpoint_ns, c.value_channels, c.value_versions
), gone_writes AS (
    DELETE FROM {s}.checkpoint_writes w USING doomed d
    WHERE w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
      AND w.checkpoint_id = d.checkpoint_id
), freed AS (
    SELECT DISTINCT g.thread_id, g.checkpoint_ns, f.channel, f.version
    FROM gone g, unnest(g.value_channels, g.value_versions) AS f(channel, version)
), held_direct AS MATERIALIZED (
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, h.channel, h.version
    FROM {s}.checkpoints c, unnest(c.value_channels, c.value_versions) AS h(channel, version)
    WHERE c.thread_id IN (SELECT thread_id FROM doomed)
      AND NOT EXISTS (
        SELECT 1 FROM doomed d
        WHERE d.thread_id = c.thread_id AND d.checkpoint_ns = c.checkpoint_ns
          AND d.checkpoint_id = c.checkpoint_id)
), held_rows AS MATERIALIZED (
    SELECT v.thread_id, v.checkpoint_ns, v.channel, v.version, v.list_chain, v.item_versions
    FROM {s}.channel_values v JOIN held_direct h
      ON v.thread_id = h.thread_id AND v.checkpoint_ns = h.checkpoint_ns
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
          FROM {s}.channel_values v JOIN held_links k
            ON v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
           AND v.channel = k.channel AND v.version = k.version) AS r,
         unnest(r.item_versions) AS x(version)
    UNION  -- the items of surviving checkpoints' pending writes
    SELECT w.thread_id, w.checkpoint_ns, w.channel, w.item_version
    FROM {s}.checkpoint_writes w
    WHERE w.thread_id IN (SELECT thread_id FROM doomed) AND w.item_version IS NOT NULL
      AND NOT EXISTS (
        SELECT 1 FROM doomed d
        WHERE d.thread_id = w.thread_id AND d.checkpoint_ns = w.checkpoint_ns
          AND d.checkpoint_id = w.checkpoint_id)
), gone_values AS (
    DELETE FROM {s}.channel_values v USING freed f
    WHERE v.thread_id = f.thread_id AND v.checkpoint_ns = f.checkpoint_ns
      AND v.channel = f.channel AND v.version = f.version
      AND NOT EXISTS (
        SELECT 1 FROM held h
        WHERE h.thread_id = f.thread_id AND h.checkpoint_ns = f.checkpoint_ns
          AND h.channel = f.channel AND h.version = f.version)
)
DELETE FROM {s}.channel_items i
WHERE i.thread_id IN (SELECT thread_id FROM doomed)
  AND EXISTS (SELECT 1 FROM gone)
  AND NOT EXISTS (
    SELECT 1 FROM held_items h
    WHERE h.thread_id = i.thread_id AND h.checkpoint_ns = i.checkpoint_ns
      AND h.channel = i.channel AND h.version = i.version)"""

    def delete_for_runs(self) -> str:
        """The runs' checkpoints, except those named in `keep_*` (the ancestors a surviving
        DeltaChannel checkpoint replays)."""
        return self._drop_checkpoints(
            f"SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id FROM {self.q}.checkpoints c "
            "WHERE c.run_id = ANY(%(run_ids)s) AND (c.thread_id, c.checkpoint_ns, c.checkpoint_id) NOT IN ("
            " SELECT * FROM unnest(%(keep_threads)b::text[], %(keep_namespaces)b::text[], %(keep_ids)b::text[]))"
        )

    def run_threads(self) -> str:
        """The threads that hold checkpoints of the runs (through the run_id index)."""
        return f"SELECT DISTINCT thread_id FROM {self.q}.checkpoints WHERE run_id = ANY(%(run_ids)s)"

    def run_lanes(self) -> str:
        """Every checkpoint of each (thread, namespace) the runs wrote to, as the parent
        links and DeltaChannel counters delete_for_runs walks, doomed or not."""
        s = self.q
        return f"""
WITH lanes AS (
    SELECT DISTINCT thread_id, checkpoint_ns FROM {s}.checkpoints WHERE run_id = ANY(%(run_ids)s)
)
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       coalesce(c.run_id = ANY(%(run_ids)s), false), c.value_channels,
       (c.metadata -> 'counters_since_delta_snapshot')::text, (c.checkpoint -> 'channel_values')::text
FROM {s}.checkpoints c JOIN lanes l ON c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns
WHERE EXISTS (
    SELECT 1 FROM {s}.checkpoints d
    WHERE d.thread_id = l.thread_id AND d.checkpoint_ns = l.checkpoint_ns
      AND d.metadata ? 'counters_since_delta_snapshot')"""

    def prune_keep_latest(self) -> str:
        """All but the newest checkpoint of each (thread, namespace), and the ones named in
        `keep_*` (the ancestors a kept DeltaChannel checkpoint replays)."""
        return self._drop_checkpoints(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM ("
            " SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, row_number() OVER ("
            "  PARTITION BY c.thread_id, c.checkpoint_ns ORDER BY c.checkpoint_id DESC) AS rank"
            f" FROM {self.q}.checkpoints c WHERE c.thread_id = ANY(%(thread_ids)s)"
            ") ranked WHERE rank > 1 AND (thread_id, checkpoint_ns, checkpoint_id) NOT IN ("
            " SELECT * FROM unnest(%(keep_threads)b::text[], %(keep_namespaces)b::text[], %(keep_ids)b::text[]))"
        )

    def latest_checkpoints(self) -> str:
        """The newest checkpoint row of each (thread, namespace) of the given threads."""
        return f"""
SELECT DISTINCT ON (thread_id, checkpoint_ns) {CHECKPOINT_COLUMNS}
FROM {self.q}.checkpoints
WHERE thread_id = ANY(%(thread_ids)s)
ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC"""

    def copy_thread(self) -> str:
        """Copy every row of `source` to `target`, unless `target` has checkpoints already
        (then nothing is written). Returns one row: whether the target was taken."""
        s = self.q
        return f"""
WITH taken AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM {s}.checkpoints WHERE thread_id = %(target)s) AS taken
), copied_values AS (
    INSERT INTO {s}.channel_values (
        thread_id, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
        list_chain, item_versions)
    SELECT %(target)s, checkpoint_ns, channel, version, type, value, object_key, object_sha256, object_size,
           list_chain, item_versions
    FROM {s}.channel_values WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), copied_items AS (
    INSERT INTO {s}.channel_items (
        thread_id, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size)
    SELECT %(target)s, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size
    FROM {s}.channel_items WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version, idx) DO NOTHING
), copied_writes AS (
    INSERT INTO {s}.checkpoint_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, value,
        object_key, object_sha256, object_size, item_version)
    SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, value,
           object_key, object_sha256, object_size, item_version
    FROM {s}.checkpoint_writes WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
), copied AS (
    INSERT INTO {s}.checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
        checkpoint, value_channels, value_versions, metadata, metadata_exact)
    SELECT %(target)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
           checkpoint, value_channels, value_versions, metadata, metadata_exact
    FROM {s}.checkpoints WHERE thread_id = %(source)s AND NOT (SELECT taken FROM taken)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING
)
SELECT taken FROM taken"""
