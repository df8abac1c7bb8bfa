"""Statements of `once()` (see langgraph_pg_durable/effects.py): a recorded effect read by its
key, and one recorded, first writer wins."""

from __future__ import annotations

from .columns import Columns
from .fencing import fence_lost


class EffectColumn(Columns):
    """A row of `find_effect` and `record_effect`: the result as stored."""

    TYPE = 0
    VALUE = 1


_KEY = """thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s AND checkpoint_id = %(checkpoint_id)s
  AND task_id = %(task_id)s AND key = %(key)s"""


def find_effect(q: str) -> str:
    """The result recorded under a key, if any: a probe of the primary key. When there is
    none and the run's token (`fence`) is no longer the thread's, a row of NULLs instead:
    the call is not to be made (sql/fencing.py)."""
    return f"""SELECT type, value FROM {q}.effects WHERE {_KEY}
UNION ALL
SELECT NULL, NULL WHERE {fence_lost(q)} AND NOT EXISTS (SELECT 1 FROM {q}.effects WHERE {_KEY})"""


def record_effect(q: str) -> str:
    """Record a result, or, when one is recorded under the key already (a task run twice at
    once, or a retry of this statement after a commit it did not hear of), return that one:
    the first writer wins and both callers go on with its result."""
    return f"""
WITH recorded AS (
    INSERT INTO {q}.effects (thread_id, checkpoint_ns, checkpoint_id, task_id, key, run_id, type, value, result)
    VALUES (%(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(key)s, %(run_id)s, %(type)s, %(value)s,
            %(result)s::jsonb)
    ON CONFLICT DO NOTHING
    RETURNING type, value
)
SELECT type, value FROM recorded
UNION ALL
SELECT type, value FROM {q}.effects WHERE {_KEY} AND NOT EXISTS (SELECT 1 FROM recorded)"""
