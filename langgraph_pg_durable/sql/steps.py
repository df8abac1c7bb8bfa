"""Reads of a thread step by step for `list_steps()` (see core.steps): each checkpoint's row,
the tasks that produced it and those that ran from it (from the action log), and how many
writes it has pending. Neither a value nor a write is read."""

from __future__ import annotations

from .columns import Columns
from .reads import newest_of_lanes


class StepColumn(Columns):
    """A row of `steps_page`: one checkpoint of the thread."""

    THREAD_ID = 0
    CHECKPOINT_NS = 1
    CHECKPOINT_ID = 2
    PARENT_CHECKPOINT_ID = 3
    RUN_ID = 4
    STEP = 5
    SOURCE = 6
    CREATED_AT = 7
    METADATA = 8  # jsonb as text
    PENDING_WRITES = 9
    # JSON text: [[task_id, agent, action_type, null, tools, reply, tokens], ...] of the tasks
    # that ran from the parent (see TASK_SUMMARY)
    MADE_BY = 10
    RAN_FROM = 11  # JSON text: [[task_id, agent, action_type, payload of an error or interrupt], ...]
    DURATION_MS = 12  # since the parent checkpoint, for a step the graph ran (source loop)


# What a person scanning a timeline needs of a task's row, from its payload alone (no value
# read): the tools its new messages call, its reply's first 120 characters, the tokens they
# report. Guarded by type: a payload read back is not trusted to have the shape we wrote.
TASK_SUMMARY = """jsonb_path_query_array(a.payload, '$.messages[*].tool_calls[*].function.name ? (@.type() == "string")'),
    left(jsonb_path_query_array(a.payload,
        '$.messages[*] ? (@.role == "assistant" && @.content.type() == "string" && @.content != "").content') ->> -1, 120),
    (SELECT sum((t.v #>> '{}')::numeric) FROM jsonb_path_query(a.payload,
        '$.messages[*].usage_metadata.total_tokens ? (@.type() == "number")') AS t(v))"""


def steps_page(q: str, where: str, *, across_lanes: bool = False) -> str:
    """One page of a thread's checkpoints, newest first, under `where` (on `c`, built by
    core.steps from fixed fragments); walks (thread_id, checkpoint_id) so a page reads
    only its own rows. Each subquery names the thread itself, not through `page`'s column:
    Citus refuses a subquery over a distributed table that reaches the thread only through
    a CTE ("complex joins are only supported when ...")."""
    tasks = f"""FROM {q}.action_rows a
        WHERE a.thread_id = %(thread_id)s AND a.checkpoint_ns = p.checkpoint_ns AND a.checkpoint_id = {{at}}"""
    # An update_state edit's row is stored at the checkpoint it edits (LangGraph writes it
    # there, then puts the edit's own checkpoint) but made the edit's checkpoint: that one
    # (source update or fork) is made by the last edit row committed before it and after
    # the edited checkpoint's previous child; no other checkpoint is credited with edit
    # rows, nor an edit with the tasks of another branch. (An edit of a past checkpoint
    # has no row: LangGraph stores no writes for it.)
    edit = "right(a.agent, 10) = '__update__'"
    previous_sibling = f"""(SELECT max(n.created_at) FROM {q}.checkpoints n
            WHERE n.thread_id = %(thread_id)s AND n.checkpoint_ns = p.checkpoint_ns
              AND n.parent_checkpoint_id = p.parent_checkpoint_id AND n.checkpoint_id < p.checkpoint_id)"""
    return f"""
WITH page AS MATERIALIZED ({_page(q, where, across_lanes)})
SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id, p.run_id, p.step, p.source,
       p.created_at, p.metadata::text AS metadata,
       (SELECT count(*) FROM {q}.checkpoint_writes w
        WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = p.checkpoint_ns
          AND w.checkpoint_id = p.checkpoint_id) AS pending_writes,
       CASE WHEN p.source IN ('update', 'fork') THEN (
           SELECT json_agg(e.entry) FROM (
               SELECT json_build_array(a.task_id, a.agent, a.action_type, NULL, {TASK_SUMMARY}) AS entry
               {tasks.format(at="p.parent_checkpoint_id")}
                 AND {edit} AND a.created_at <= p.created_at AND a.created_at > coalesce({previous_sibling}, '-infinity')
               ORDER BY a.created_at DESC, a.task_id LIMIT 1) e)
       ELSE (SELECT json_agg(json_build_array(a.task_id, a.agent, a.action_type, NULL, {TASK_SUMMARY}) ORDER BY a.created_at, a.task_id)
        {tasks.format(at="p.parent_checkpoint_id")} AND NOT {edit})
       END::text AS made_by,
       (SELECT json_agg(json_build_array(a.task_id, a.agent, a.action_type,
                        CASE WHEN a.action_type IN ('error', 'interrupt') THEN a.payload END)
                        ORDER BY a.created_at, a.task_id)
        {tasks.format(at="p.checkpoint_id")} AND NOT {edit})::text AS ran_from,
       CASE WHEN p.source = 'loop' THEN extract(epoch FROM p.created_at - (
           SELECT b.created_at FROM {q}.checkpoints b
           WHERE b.thread_id = %(thread_id)s AND b.checkpoint_ns = p.checkpoint_ns AND b.checkpoint_id = p.parent_checkpoint_id)) * 1000
       END::float8 AS duration_ms
FROM page p
ORDER BY p.checkpoint_id DESC"""


def _page(q: str, where: str, across_lanes: bool) -> str:
    """The page's checkpoints, newest first; `across_lanes` (no namespace in `where`): as
    `reads.newest_of_lanes` reads them."""
    lane = f"""SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.run_id, c.step, c.source,
           c.created_at, c.metadata
    FROM {q}.checkpoints c
    WHERE c.thread_id = %(thread_id)s AND {where}"""
    if not across_lanes:
        return f"""
    {lane}
    ORDER BY c.checkpoint_id DESC
    LIMIT %(page)s
"""
    return newest_of_lanes(
        lane, namespace="c.checkpoint_ns", order="c.checkpoint_id DESC", outer_order="checkpoint_id DESC", limit="%(page)s"
    )


class NeighbourColumn(Columns):
    """The row of `step_neighbours`."""

    PREVIOUS_STEP = 0  # the greatest root step below the one asked for (None: none)
    NEXT_STEP = 1  # the least above it


def step_neighbours(q: str) -> str:
    """The root steps just before and after `%(step)s` in a thread: two probes of the
    root-step index (its predicate written out: the namespace, and a bound on the step that
    implies it is not NULL), whatever the thread's length. Each is an
    ORDER BY ... LIMIT 1, not max()/min(): a plan made without statistics aggregates every
    step past the bound instead."""
    return f"""
SELECT (SELECT c.step FROM {q}.checkpoints c
        WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = '' AND c.step < %(step)s
        ORDER BY c.step DESC LIMIT 1) AS previous_step,
       (SELECT c.step FROM {q}.checkpoints c
        WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = '' AND c.step > %(step)s
        ORDER BY c.step LIMIT 1) AS next_step"""
