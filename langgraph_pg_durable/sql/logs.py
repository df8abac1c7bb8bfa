"""Reads of the action log: pages of runs and of actions, in keyset order (see core.logs)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from .columns import Columns
from .action_row import FOLDED_COLUMNS


class RunColumn(Columns):
    """A row of `runs_page`: the `runs` view's columns."""

    THREAD_ID = 0
    RUN_ID = 1
    STARTED_AT = 2
    ENDED_AT = 3
    STEPS = 4
    STATUS = 5
    AGENTS = 6
    TOKENS = 7  # not the view's: see RUN_TOKENS
    HOLDS_THREAD = 8  # not the view's: whether the run holds its thread (thread_holders, see sql/fencing.py)


class ActionColumn(Columns):
    """A row of `actions_page`: the `actions` view's columns, the payload as text (orjson
    parses it faster than the driver), and the write index that completes the key."""

    THREAD_ID = 0
    CHECKPOINT_NS = 1
    CHECKPOINT_ID = 2
    RUN_ID = 3  # '' for no run, as stored; the record says None
    STEP = 4
    TASK_ID = 5
    AGENT = 6
    ACTION_TYPE = 7
    PAYLOAD = 8
    CREATED_AT = 9
    IDX = 10


def run_tokens(q: str, *, one_thread: bool) -> str:
    """The tokens a run's model replies report (`usage_metadata.total_tokens`), each reply
    once though a subgraph node returns its sub-agent's replies again (NULL: none
    reported). Guarded by type: a payload read back is not trusted to have our shape.
    `one_thread`: the page's thread is `%(thread_id)s`, which the subquery names too. The
    run is matched as the run indexes' expression (`nullif(run_id, '')`): compared as
    the bare column, each run of a page read its thread's action rows (or, on a table
    small enough, all of them) to find its own."""
    return f"""(SELECT sum((u.m->'usage_metadata'->>'total_tokens')::numeric) FROM (
        SELECT DISTINCT ON (coalesce(s.m->>'id', md5(s.m::text))) s.m FROM (
            SELECT jsonb_path_query(a.payload, '$.messages[*] ? (@.usage_metadata.total_tokens.type() == "number")') AS m
            FROM {q}.action_rows a
            WHERE {_on_thread("a", one_thread=one_thread)} AND nullif(a.run_id, '') = r.run_id) s) u)"""


def _on_thread(alias: str, *, one_thread: bool) -> str:
    """A subquery of a runs page anchored on its run's thread, and on the page's thread
    too when there is one: on Citus a subquery anchored on the row alone sends a page of one
    thread to every shard, and one anchored on the parameter alone beside one anchored on
    the row is refused ("complex joins")."""
    anchor = f"{alias}.thread_id = r.thread_id"
    return f"{anchor} AND {alias}.thread_id = %(thread_id)s" if one_thread else anchor


def last_root_step(q: str, on_thread: Callable[[str], str]) -> str:
    """The step of the newest root checkpoint of the run of `run_log r` (NULL: none);
    `on_thread(alias)` anchors the subquery on the thread (see _on_thread)."""
    return f"""(SELECT max(s.step) FROM {q}.checkpoints s
        WHERE {on_thread("s")} AND s.run_id = r.run_id AND s.checkpoint_ns = '')"""


def last_write(q: str, on_thread: Callable[[str], str]) -> str:
    """When the run of `run_log r` last wrote: its newest root checkpoint's time, or its
    row's own when a later write set it (an error, an interrupt, a new agent). The row is
    written when it changes, not at every checkpoint (migration 0013, whose `runs` view
    reads the same)."""
    return f"""greatest(r.ended_at, (SELECT max(c.created_at) FROM {q}.checkpoints c
        WHERE {on_thread("c")} AND c.run_id = r.run_id AND c.checkpoint_ns = ''
          AND c.step = {last_root_step(q, on_thread)}))"""


def runs_page(q: str, where: str, *, one_thread: bool = False) -> str:
    """One page of `list_runs()` under `where` (built by core.logs from fixed fragments),
    newest first; `one_thread`: `where` names the thread. The `runs` view's columns, each
    subquery anchored on the page's thread too: on Citus a page of one thread then goes
    to the one shard that holds it (the view's, anchored on the row alone, go to all)."""
    on_thread = functools.partial(_on_thread, one_thread=one_thread)
    derived = {
        "ended_at": f"{last_write(q, on_thread)} AS ended_at",
        "steps": f"coalesce(greatest(r.last_step, {last_root_step(q, on_thread)}) - r.first_step + 1, 0) AS steps",
    }
    columns = ", ".join(derived.get(name, f"r.{name}") for name in RunColumn.names() if name not in ("tokens", "holds_thread"))
    holds = f"EXISTS (SELECT 1 FROM {q}.thread_holders h WHERE {on_thread('h')} AND h.run_id = r.run_id)"
    return f"""
SELECT {columns}, {run_tokens(q, one_thread=one_thread)}::bigint AS tokens, {holds} AS holds_thread
FROM {q}.run_log r WHERE {where}
ORDER BY r.started_at DESC, r.thread_id DESC, r.run_id DESC
LIMIT %(page)s"""


def _action_columns(**exprs: str) -> str:
    """The `ActionColumn` columns of `action_rows a` (the action_log rows and the actions
    packed writes rows hold, migration 0014): the payload as text, and `exprs`."""
    return ", ".join({"payload": "a.payload::text", **exprs}.get(name, f"a.{name}") for name in ActionColumn.names())


def actions_page(q: str, where: str, *, one_thread: bool = False) -> str:
    """One page of `list_actions()` under `where` (over `action_rows a`), oldest first; a
    step not stored is read from the checkpoint, as the `actions` view does. `one_thread`:
    `where` names the thread, and so does the join (Citus then reads that shard alone)."""
    anchor = " AND c.thread_id = %(thread_id)s" if one_thread else ""
    return f"""
SELECT {_action_columns(step="coalesce(a.step, c.step + 1)")}
FROM {q}.action_rows a
LEFT JOIN {q}.checkpoints c
  ON a.step IS NULL AND c.thread_id = a.thread_id AND c.checkpoint_ns = a.checkpoint_ns
 AND c.checkpoint_id = a.checkpoint_id{anchor}
WHERE {where}
ORDER BY a.created_at, a.thread_id, a.checkpoint_ns, a.checkpoint_id, a.task_id, a.run_id, a.idx
LIMIT %(page)s"""


def actions_from(q: str) -> str:
    """`actions_from()`: a namespace's action rows at a checkpoint and the checkpoints after
    it, in checkpoint order. Each table is read in its primary key's order and stops at the
    limit, however long the thread: action_log's rows, and the actions packed writes rows
    hold (`action_rows` of migration 0014, at index 0); the two windows are then merged.
    (Through the view, the writes' window was sorted whole: their key has no run_id.) A step
    not stored is read from its checkpoint by a probe of that row alone, made only for a
    row without one."""
    step = f"""coalesce(a.step, (SELECT c.step + 1 FROM {q}.checkpoints c
        WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = a.checkpoint_ns AND c.checkpoint_id = a.checkpoint_id))"""
    columns = f"thread_id, checkpoint_ns, checkpoint_id, task_id, {{idx}}, {FOLDED_COLUMNS}, created_at"
    window = """
    WHERE {t}.thread_id = %(thread_id)s AND {t}.checkpoint_ns = %(checkpoint_ns)s AND {t}.checkpoint_id >= %(checkpoint_id)s"""
    return f"""
SELECT {_action_columns(step=step)}
FROM ((SELECT {columns.format(idx="idx")} FROM {q}.action_log l{window.format(t="l")}
    ORDER BY l.checkpoint_id, l.task_id, l.run_id, l.idx LIMIT %(limit)s)
  UNION ALL
  (SELECT {columns.format(idx="0 AS idx")} FROM {q}.checkpoint_writes w{window.format(t="w")} AND w.action_type IS NOT NULL
    ORDER BY w.checkpoint_id, w.task_id, w.idx LIMIT %(limit)s)) a
ORDER BY a.checkpoint_id, a.task_id, a.run_id, a.idx
LIMIT %(limit)s"""


# -- backfill_actions -------------------------------------------------------------------------


class ThreadNeed(Columns):
    """A row of `backfill_threads`: a thread of the page, and whether it needs a backfill."""

    THREAD_ID = 0
    NEEDED = 1  # bool: it has no run row, or a checkpoint without a run id


def backfill_threads(q: str) -> str:
    """The next page of threads after `after` (keyset by thread_id), each with whether it
    lacks its log: no row in run_log, or a checkpoint without a run id. One grouped scan,
    its subquery tied to the table's own thread_id: Citus refuses one that reaches the
    thread through a CTE's column, and runs this one on each shard."""
    return f"""
SELECT c.thread_id,
       NOT EXISTS (SELECT 1 FROM {q}.run_log r WHERE r.thread_id = c.thread_id) OR bool_or(c.run_id IS NULL) AS needed
FROM {q}.checkpoints c
WHERE c.thread_id > %(after)s AND (%(only)s::text[] IS NULL OR c.thread_id = ANY(%(only)s::text[]))
GROUP BY c.thread_id
ORDER BY c.thread_id
LIMIT %(batch)s"""


class CheckpointFact(Columns):
    """A row of `checkpoint_facts` (core.backfill.CheckpointFacts, field by field)."""

    CHECKPOINT_NS = 0
    CHECKPOINT_ID = 1
    PARENT_CHECKPOINT_ID = 2
    RUN_ID = 3
    STEP = 4
    SOURCE = 5
    CREATED_AT = 6


def checkpoint_facts(q: str) -> str:
    """A thread's checkpoint rows without their values."""
    return f"SELECT {', '.join(CheckpointFact.names())} FROM {q}.checkpoints WHERE thread_id = %(thread_id)s"


class WriteFact(Columns):
    """A row of `write_facts` (core.backfill.WriteFacts, field by field)."""

    CHECKPOINT_NS = 0
    CHECKPOINT_ID = 1
    TASK_ID = 2
    IDX = 3
    TASK_PATH = 4
    PACKED = 5
    OBJECT_KEY = 6
    OBJECT_SIZE = 7
    CREATED_AT = 8


def write_facts(q: str) -> str:
    """A thread's writes rows without their values (`packed`: a row holding several writes)."""
    columns = ", ".join("type = %(packed_type)s AS packed" if name == "packed" else name for name in WriteFact.names())
    return f"SELECT {columns} FROM {q}.checkpoint_writes WHERE thread_id = %(thread_id)s"


def backfill_store(q: str) -> str:
    """A thread's backfill in one statement: run ids for its checkpoints without one, its
    action rows and its run rows, each inserted unless there (a rerun adds nothing)."""
    return f"""
WITH named AS (
    UPDATE {q}.checkpoints c SET run_id = u.run_id
    FROM unnest(%(c_namespaces)b::text[], %(c_ids)b::text[], %(c_runs)b::text[]) AS u(checkpoint_ns, checkpoint_id, run_id)
    WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = u.checkpoint_ns AND c.checkpoint_id = u.checkpoint_id
      AND c.run_id IS NULL
), logged AS (
    INSERT INTO {q}.action_log (
        thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload, created_at)
    SELECT %(thread_id)s, a.checkpoint_ns, a.checkpoint_id, a.task_id, a.run_id, a.idx, a.step, a.agent, a.action_type,
           a.payload::jsonb, a.created_at::timestamptz
    FROM unnest(%(a_namespaces)b::text[], %(a_ids)b::text[], %(a_tasks)b::text[], %(a_runs)b::text[], %(a_idx)b::int[],
                %(a_steps)b::int[], %(a_agents)b::text[], %(a_types)b::text[], %(a_payloads)b::text[], %(a_times)b::text[])
        AS a(checkpoint_ns, checkpoint_id, task_id, run_id, idx, step, agent, action_type, payload, created_at)
    WHERE NOT EXISTS (  -- held by the task's packed writes row (a thread logged in part)
        SELECT 1 FROM {q}.checkpoint_writes f
        WHERE f.thread_id = %(thread_id)s AND f.checkpoint_ns = a.checkpoint_ns AND f.checkpoint_id = a.checkpoint_id
          AND f.task_id = a.task_id AND f.run_id = a.run_id AND a.idx = 0)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, run_id, idx) DO NOTHING
)
INSERT INTO {q}.run_log (thread_id, run_id, started_at, ended_at, first_step, last_step, status, status_step, agents)
SELECT %(thread_id)s, r.run_id, r.started_at::timestamptz, r.ended_at::timestamptz, r.first_step, r.last_step, r.status,
       r.status_step, string_to_array(r.agents, E'\\x1f')
FROM unnest(%(r_ids)b::text[], %(r_started)b::text[], %(r_ended)b::text[], %(r_first)b::int[], %(r_last)b::int[],
            %(r_status)b::text[], %(r_status_steps)b::int[], %(r_agents)b::text[])
    AS r(run_id, started_at, ended_at, first_step, last_step, status, status_step, agents)
ON CONFLICT (thread_id, run_id) DO NOTHING"""
