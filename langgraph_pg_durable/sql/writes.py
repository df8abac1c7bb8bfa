"""Statements that write checkpoints, their values and list items, and pending writes.

Each is one statement (one round trip): `put` stores its channel values, list items and
checkpoint row in one data-modifying CTE. Every insert is idempotent (ON CONFLICT).
"""

from __future__ import annotations

from typing import NamedTuple

from .action_row import FOLDED_COLUMNS, FOLDED_VALUES
from .fencing import fence_lost

NULL_TASK = "00000000-0000-0000-0000-000000000000"  # the caller's writes (a Command, a resume)

# gc's lock, one per object prefix: a put storing objects holds it shared from its first
# upload to its commit; gc holds it exclusively (a session lock) while it checks
# references and deletes.
GC_SHARE = "SELECT pg_advisory_xact_lock_shared(%(gc_key)s)"
GC_LOCK = "SELECT pg_advisory_lock(%(gc_key)s)"
GC_UNLOCK = "SELECT pg_advisory_unlock(%(gc_key)s)"
# Gives the transaction an id, so that its commit waits for the synchronous standby even
# when the rest of it writes nothing: sent again after a commit whose wait was cancelled,
# it confirms that one too (a standby confirms the WAL in order).
CONFIRM_COMMIT = "SELECT txid_current()"
# What a put returns when it stored its checkpoint: 1, and whether Citus is installed (a
# saver that has not yet asked whether its tables are distributed learns from its first put
# that they cannot be, without a round trip of its own: see SaverCore._write_path).
WRITTEN = "RETURNING 1, to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL"


def lock_threads() -> str:
    """Take the writer locks of `lock_keys` (sorted), held to the end of the transaction.
    Sent before a write or delete, in its transaction, so that the statement's snapshot
    is taken after the thread's other writer committed (see Query.locks)."""
    return "SELECT pg_advisory_xact_lock(k) FROM unnest(%(lock_keys)b::int8[]) AS k"


def lock_thread() -> str:
    """`lock_threads` for the one thread of a put or a put_writes: a quarter of the
    server's time of the unnest form (1.3 against 5.1 us a call), sent twice a step."""
    return "SELECT pg_advisory_xact_lock(%(lock_key)b::int8)"


def _missing_bases(q: str, *, bases: bool = True) -> str:
    """Rows (at most two) when something the put relies on is not stored: the parent
    checkpoint (`check_parent`, when the saver saw it committed), or a stored value it
    holds without writing that the parent does not stand for (`base_*`), or a list
    version its deltas extend.

    While the parent's row is stored so is every value, list version and item it holds:
    every delete keeps what a surviving checkpoint holds. So one probe of the parent's
    primary key stands for the values a put carries over from it. Without `bases` (a put
    whose every carried-over value its parent stands for: most puts of a saver that saw
    the parent committed) the statement has no branch for them; an empty one still cost
    the server a function scan and its subplan, ~2.5 us a put (tools/server_parts.py).

    `OFFSET 0` keeps each NOT EXISTS a subplan, a primary-key probe per base: as an anti
    join, a plan made while the tables were small (a generic plan lives as long as the
    connection) scanned every value of the thread at every put."""
    parent = f"""(SELECT 1 WHERE %(check_parent)s::text IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {q}.checkpoints p
        WHERE p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(checkpoint_ns)s
          AND p.checkpoint_id = %(check_parent)s OFFSET 0) OR {fence_lost(q)})"""
    if not bases:
        return parent
    return f"""{parent}
    UNION ALL
    (SELECT 1 FROM unnest(%(base_channels)b::text[], %(base_versions)b::text[]) AS b(channel, version)
     WHERE NOT EXISTS (
        SELECT 1 FROM {q}.channel_values v
        WHERE v.thread_id = %(thread_id)s AND v.checkpoint_ns = %(checkpoint_ns)s
          AND v.channel = b.channel AND v.version = b.version OFFSET 0)
     LIMIT 1)"""


def _checkpoint_gone(q: str) -> str:
    """A CTE with a row when the checkpoint a task's writes go to, which the saver saw
    committed (`check_checkpoint`), is no longer stored (a rewound history), or when the
    run's token is no longer the thread's (sql/fencing.py). Every insert of the statement
    is guarded by it (KEPT), so nothing is written on top; a primary-key probe each, none
    without `check_checkpoint` or a token."""
    return f"""gone AS MATERIALIZED (
    SELECT 1 WHERE %(check_checkpoint)s::text IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {q}.checkpoints g
        WHERE g.thread_id = %(thread_id)s AND g.checkpoint_ns = %(checkpoint_ns)s
          AND g.checkpoint_id = %(check_checkpoint)s OFFSET 0) OR {fence_lost(q)})"""


KEPT = "NOT EXISTS (SELECT 1 FROM gone)"

_STATUS = """status = CASE WHEN EXCLUDED.status_step >= coalesce(r.status_step, EXCLUDED.status_step)
                  THEN EXCLUDED.status ELSE r.status END,
    status_step = greatest(r.status_step, EXCLUDED.status_step)"""


def _earlier_runs(q: str) -> str:
    """A new run marks the thread's runs still `running` interrupted: they stopped with
    work left (at a static breakpoint, or in a crash), and another run came after."""
    return f"""earlier_runs AS (
    UPDATE {q}.run_log e SET status = 'interrupted'
    WHERE e.thread_id = %(thread_id)s AND e.status = 'running' AND e.run_id <> %(run_id)s
      AND EXISTS (SELECT FROM run WHERE fresh)
)"""


def _checkpoint_run(q: str) -> str:
    """CTEs keeping the run's row in run_log for a put (also when a base is missing and the
    put is sent again: the row's update is idempotent).

    A root checkpoint (`run_step` its step; NULL in a subgraph, which leaves the row as
    it is) moves the run's last step and sets its status, `running` or `done`
    (`run_status`), unless an event of a later step set it (`status_step`): a put
    delivered late (durability="async") does not undo an error."""
    return f"""run AS (
    INSERT INTO {q}.run_log AS r (thread_id, run_id, first_step, last_step, status, status_step)
    SELECT %(thread_id)s, %(run_id)s, %(run_step)s::int, %(run_step)s, %(run_status)s, %(run_step)s
    WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
    ON CONFLICT (thread_id, run_id) DO UPDATE SET
    ended_at = EXCLUDED.ended_at, first_step = least(r.first_step, EXCLUDED.first_step),
    last_step = greatest(r.last_step, EXCLUDED.last_step), {_STATUS}
    WHERE EXCLUDED.first_step IS NOT NULL
    RETURNING xmax = 0 AS fresh
), {_earlier_runs(q)}"""


def _task_log(q: str, *, run: bool = True, folded: bool = False) -> str:
    """CTEs storing a task's action row, and its run's row in run_log (none when the
    checkpoint is `gone`: the statement's first CTE).

    `folded`: the statement stores the task's writes as one packed row, which holds the
    action itself (`action_row.FOLDED`, migration 0014): no action_log row, its key and three
    index entries, beside the row that holds the same task. Otherwise the action row goes
    to action_log, unless the task's packed row holds this run's action already (the same
    writes sent again after their first statement committed).

    The step the task ran in comes from the saver's memory (`action_step`), else from the
    checkpoint it ran from. The caller's writes (the null task) are sent again with more
    appended: their row takes the newest; any other task's first row is kept, as its
    first writes are. The run's row learns the agent, and a root task's error or
    interrupt (`run_status`; of the last step when the step is not known yet, which
    happens when the writes commit before their checkpoint). When neither is new the
    insert is not even tried: a conflicting insert locks the row, a write of its own.
    Without `run` (the saver wrote that row with this agent already, and the task sets no
    status) the run's row is left out of the statement."""
    run_row = (
        f""", run AS (
    INSERT INTO {q}.run_log AS r (thread_id, run_id, status, status_step, agents)
    SELECT %(thread_id)s, %(run_id)s, coalesce(%(run_status)s::text, 'running'),
           CASE WHEN %(run_status)s IS NOT NULL THEN coalesce(s.step, 2147483647) END, ARRAY[%(agent)s]
    FROM task_step s WHERE %(run_id)s::text IS NOT NULL AND (%(run_status)s IS NOT NULL OR NOT EXISTS (
        SELECT 1 FROM {q}.run_log k WHERE k.thread_id = %(thread_id)s AND k.run_id = %(run_id)s AND %(agent)s = ANY(k.agents)))
    ON CONFLICT (thread_id, run_id) DO UPDATE SET
    ended_at = EXCLUDED.ended_at, {_STATUS},
    agents = CASE WHEN EXCLUDED.agents <@ r.agents THEN r.agents ELSE r.agents || EXCLUDED.agents END
    WHERE EXCLUDED.status_step IS NOT NULL OR NOT EXCLUDED.agents <@ r.agents
    RETURNING xmax = 0 AS fresh
), {_earlier_runs(q)}"""
        if run
        else ""
    )
    logged = (
        ""
        if folded
        else f""", logged AS (
    INSERT INTO {q}.action_log AS a (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, {FOLDED_COLUMNS})
    SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(action_idx)s::int, {FOLDED_VALUES}
    FROM task_step s WHERE NOT EXISTS (
        SELECT 1 FROM {_task_writes(q, "f")} AND f.run_id = coalesce(%(run_id)s::text, '') AND %(action_idx)s = 0)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO UPDATE SET
        action_type = EXCLUDED.action_type, payload = EXCLUDED.payload
    WHERE a.task_id = '{NULL_TASK}'
)"""
    )
    return f"""task_step AS MATERIALIZED (
    SELECT coalesce(%(action_step)s::int, (
        SELECT c.step + 1 FROM {q}.checkpoints c
        WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s
          AND c.checkpoint_id = %(checkpoint_id)s)) AS step
    WHERE {KEPT}
){logged}{run_row}"""


def put_plain(q: str, *, log: bool = True, values: bool = True, bases: bool = True) -> str:
    """`put` for the common case: no list in the delta layout, nothing offloaded. Writes
    nothing when a value it holds but does not write is not stored, or when the run's
    token is no longer the thread's (`fenced`). With `log`, it also keeps the run's row in
    run_log. Without `values` it stores no channel value (a step that changed only scalar
    channels, which the checkpoint row holds, and DeltaChannels, whose writes hold theirs:
    most steps of a state in DeltaChannels) and the statement leaves channel_values alone.
    Without `bases` it checks no carried-over value one by one (see `_missing_bases`)."""
    logged = f", {_checkpoint_run(q)}" if log else ""
    stored_values = (
        f""",
stored_values AS (
    INSERT INTO {q}.channel_values (thread_id, checkpoint_ns, channel, version, type, value)
    SELECT %(thread_id)s, %(checkpoint_ns)s, v.channel, v.version, v.type, v.value
    FROM unnest(%(channels)b::text[], %(versions)b::text[], %(types)b::text[], %(values)b::bytea[])
        AS v(channel, version, type, value)
    WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
)"""
        if values
        else ""
    )
    return f"""
WITH missing_bases AS MATERIALIZED ({_missing_bases(q, bases=bases)}){logged}{stored_values}
INSERT INTO {q}.checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
    checkpoint, value_channels, value_versions, metadata, metadata_exact)
SELECT
    %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s, %(run_id)s,
    %(step)s, %(source)s, %(checkpoint)s::jsonb, %(value_channels)b::text[],
    %(value_versions)b::text[], %(metadata)s::jsonb, %(metadata_exact)s
WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
{_checkpoint_conflict()}"""


class ParentStatus(NamedTuple):
    """The row of `parent_status`."""

    parent_stored: bool
    newest_checkpoint_id: str | None


def parent_status(q: str) -> str:
    """After a put that wrote nothing, whose parent the saver saw committed: whether the
    parent is still stored, and the lane's newest checkpoint. Sent only then, never on the
    hot path (the put's own missing-bases guard is the detection)."""
    return f"""SELECT EXISTS (
    SELECT 1 FROM {q}.checkpoints p
    WHERE p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(checkpoint_ns)s AND p.checkpoint_id = %(checkpoint_id)s),
  (SELECT max(c.checkpoint_id) FROM {q}.checkpoints c
    WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s)"""


def _checkpoint_conflict() -> str:
    return f"""ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
    run_id = EXCLUDED.run_id,
    step = EXCLUDED.step,
    source = EXCLUDED.source,
    checkpoint = EXCLUDED.checkpoint,
    value_channels = EXCLUDED.value_channels,
    value_versions = EXCLUDED.value_versions,
    metadata = EXCLUDED.metadata,
    metadata_exact = EXCLUDED.metadata_exact
{WRITTEN}"""


def put(q: str, *, log: bool = True) -> str:
    """`put` with lists in the delta layout and offloaded values."""
    logged = f", {_checkpoint_run(q)}" if log else ""
    return f"""
-- The stored values this put holds without writing them, and the list versions its deltas
-- extend (or whose items its snapshots reuse), must still be there: if one was pruned or
-- deleted meanwhile, nothing is written and the caller sends the put again, whole.
WITH missing_bases AS MATERIALIZED (
    {_missing_bases(q)}
    UNION ALL
    -- Items a pending write stored (a group is written whole, so its first item will do).
    (SELECT 1 FROM unnest(%(base_item_channels)b::text[], %(base_item_versions)b::text[]) AS b(channel, version)
     WHERE NOT EXISTS (
        SELECT 1 FROM {q}.channel_items i
        WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
          AND i.channel = b.channel AND i.version = b.version AND i.idx = 0 OFFSET 0)
     LIMIT 1)
){logged}, stored_values AS (
    INSERT INTO {q}.channel_values (
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
{_insert_items(q, "WHERE NOT EXISTS (SELECT 1 FROM missing_bases)")}
)
INSERT INTO {q}.checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source,
    checkpoint, value_channels, value_versions, metadata, metadata_exact)
SELECT
    %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s, %(run_id)s,
    %(step)s, %(source)s, %(checkpoint)s::jsonb, %(value_channels)b::text[],
    %(value_versions)b::text[], %(metadata)s::jsonb, %(metadata_exact)s
WHERE NOT EXISTS (SELECT 1 FROM missing_bases)
{_checkpoint_conflict()}"""


def _insert_items(q: str, guard: str = "") -> str:
    """The channel_items rows of `rows._item_params`, each once (`guard`: a WHERE)."""
    return f"""    INSERT INTO {q}.channel_items (
        thread_id, checkpoint_ns, channel, version, idx, type, value, object_key, object_sha256, object_size)
    SELECT %(thread_id)s, %(checkpoint_ns)s, i.channel, i.version, i.idx, i.type, i.value,
           i.object_key, i.object_sha256, i.object_size
    FROM unnest(%(item_channels)b::text[], %(item_of)b::text[], %(item_idx)b::int[], %(item_types)b::text[],
                %(item_values)b::bytea[], %(item_object_keys)b::text[], %(item_object_shas)b::text[],
                %(item_object_sizes)b::int8[])
        AS i(channel, version, idx, type, value, object_key, object_sha256, object_size)
    {guard}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version, idx) DO NOTHING"""


def put_writes_items(q: str, *, log: bool = True, run: bool = True) -> str:
    """Insert a task's writes, some stored as items under their write keys (never a
    special channel's, so never replacing); `log` and `run` as for `put_writes`."""
    logged = f"{_task_log(q, run=run)}, " if log else ""
    return f"""
WITH {_checkpoint_gone(q)}, {logged}stored_items AS (
{_insert_items(q, f"WHERE {KEPT}")}
)
INSERT INTO {q}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value,
    object_key, object_sha256, object_size, item_version)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.value, w.object_key, w.object_sha256, w.object_size, w.item_version
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(values)b::bytea[],
            %(object_keys)b::text[], %(object_shas)b::text[], %(object_sizes)b::int8[],
            %(write_item_versions)b::text[])
    AS w(idx, channel, type, value, object_key, object_sha256, object_size, item_version)
{_not_packed_already(q)} AND {KEPT}
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
RETURNING 1"""


def _task_writes(q: str, alias: str) -> str:
    """The rows of this put_writes' task at its checkpoint (a primary-key range)."""
    return f"""{q}.checkpoint_writes {alias}
    WHERE {alias}.thread_id = %(thread_id)s AND {alias}.checkpoint_ns = %(checkpoint_ns)s
      AND {alias}.checkpoint_id = %(checkpoint_id)s AND {alias}.task_id = %(task_id)s"""


def _not_packed_already(q: str) -> str:
    """Skips the writes a packed row of the task holds already (indexes 0 to its own):
    as with a row per write, the first write at an index is the one kept."""
    return f"""WHERE (w.idx < 0 OR w.idx > coalesce((
    SELECT max(p.idx) FROM {_task_writes(q, "p")} AND p.type = %(packed_type)s), -1))"""


def put_packed_writes(q: str, *, items: bool, log: bool = True, run: bool = True) -> str:
    """A task's writes as one row, for a task that has no writes at the checkpoint yet,
    holding the task's action with `log`; returns a row when it stored it. For a task
    re-run (or a retry) it stores nothing, and the caller sends `put_writes`, a row per
    write, which keeps the first write at each index and adds the rest, as the official
    saver's row per write does."""
    ctes = (
        [_checkpoint_gone(q)]
        + ([_task_log(q, run=run, folded=True)] if log else [])
        + ([f"stored_items AS (\n{_insert_items(q, f'WHERE {KEPT}')}\n)"] if items else [])
    )
    action_columns, action_values, from_step = (f", {FOLDED_COLUMNS}", f", {FOLDED_VALUES}", "\nFROM task_step s") if log else ("", "", "")
    return f"""
WITH {", ".join(ctes)}
INSERT INTO {q}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value, item_version{action_columns})
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       %(packed_idx)s, %(packed_channel)s, %(packed_type)s, %(packed_value)b, %(packed_item_version)s{action_values}{from_step}
WHERE NOT EXISTS (SELECT 1 FROM {_task_writes(q, "t")} AND t.idx >= 0) AND {KEPT}
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
RETURNING 1"""


def put_writes(q: str, *, replace: bool, offloaded: bool = True, log: bool = True, run: bool = True) -> str:
    """Insert a task's writes; `replace` (special channels only) overwrites a retry's rows;
    without `offloaded` the statement leaves the object-reference columns out; with `log`
    it stores the task's action row too, and with `run` its run's row (see `_task_log`)."""
    with_ctes = f"WITH {_checkpoint_gone(q)}" + (f", {_task_log(q, run=run)}" if log else "") + "\n"
    conflict = (
        "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, "
        "value = EXCLUDED.value, task_path = EXCLUDED.task_path, object_key = EXCLUDED.object_key, "
        "object_sha256 = EXCLUDED.object_sha256, object_size = EXCLUDED.object_size"
        if replace
        else "DO NOTHING"
    )
    # Special channels have indexes below 0, which a packed row never holds.
    skip = f"WHERE {KEPT}\n" if replace else f"{_not_packed_already(q)} AND {KEPT}\n"
    if not offloaded:
        return f"""
{with_ctes}INSERT INTO {q}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.value
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(values)b::bytea[])
    AS w(idx, channel, type, value)
{skip}ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict.split(", object_key")[0]}
RETURNING 1"""
    return f"""
{with_ctes}INSERT INTO {q}.checkpoint_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value,
    object_key, object_sha256, object_size)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.value, w.object_key, w.object_sha256, w.object_size
FROM unnest(%(idx)b::int[], %(channels)b::text[], %(types)b::text[], %(values)b::bytea[],
            %(object_keys)b::text[], %(object_shas)b::text[], %(object_sizes)b::int8[])
    AS w(idx, channel, type, value, object_key, object_sha256, object_size)
{skip}ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}
RETURNING 1"""


def name_sends(q: str) -> str:
    """Name the action rows of a checkpoint's Send tasks stored as `.../__send__` (their
    writes were stored before the checkpoint's put told the saver its Sends, see
    memory.CheckpointNotes), and put the names in their runs' agents in place of the
    unknown ones. Sent only then, after both are stored."""
    sends = """unnest(%(task_ids)b::text[], %(idxs)b::int4[], %(run_ids)b::text[], %(unknown)b::text[], %(agents)b::text[])
        AS f(task_id, idx, run_id, unknown, agent)"""
    return f"""
WITH named AS (
    UPDATE {q}.action_log a SET agent = f.agent
    FROM {sends}
    WHERE a.thread_id = %(thread_id)s AND a.checkpoint_ns = %(checkpoint_ns)s AND a.checkpoint_id = %(checkpoint_id)s
      AND a.task_id = f.task_id AND a.idx = f.idx AND a.run_id = f.run_id AND a.agent = f.unknown
), named_folded AS (
    UPDATE {q}.checkpoint_writes w SET agent = f.agent
    FROM {sends}
    WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = %(checkpoint_ns)s AND w.checkpoint_id = %(checkpoint_id)s
      AND w.task_id = f.task_id AND f.idx = 0 AND w.run_id = f.run_id AND w.agent = f.unknown
)
UPDATE {q}.run_log r SET agents = (
    SELECT array_agg(n.name ORDER BY n.first) FROM (
        SELECT u.name, min(u.ord) AS first FROM (
            SELECT e.name, e.ord FROM unnest(r.agents) WITH ORDINALITY AS e(name, ord)
            WHERE e.name <> ALL(%(unknown)b::text[])
            UNION ALL
            SELECT f.agent, 9223372036854775807 FROM unnest(%(run_ids)b::text[], %(agents)b::text[]) AS f(run_id, agent)
            WHERE f.run_id = r.run_id
        ) u GROUP BY u.name
    ) n)
WHERE r.thread_id = %(thread_id)s AND r.run_id = ANY(%(run_ids)b::text[])"""


def log_unsaved_run(q: str) -> str:
    """The action row of a run whose tasks were not saved (durability="exit": LangGraph puts
    only its last checkpoint), stored against the checkpoint it ran from (its own, for a
    thread's first run), and its agent in the run's row. Sent after that checkpoint's put,
    only then; idempotent."""
    return f"""
WITH logged AS (
    INSERT INTO {q}.action_log (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload)
    VALUES (%(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(run_id)s, 0, %(action_step)s::int,
            %(agent)s, %(action_type)s, %(payload)s::jsonb)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO NOTHING
)
UPDATE {q}.run_log r SET agents = r.agents || ARRAY[%(agent)s::text]
WHERE r.thread_id = %(thread_id)s AND r.run_id = %(run_id)s AND NOT %(agent)s::text = ANY(r.agents)"""
