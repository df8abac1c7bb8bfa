"""Statements of one writer per thread (fencing; see core/fencing.py).

A run takes the thread with its first read of it (or its first write, when it did not
read): `take_over` or `take_if_free`, sent after the thread's writer lock, in the read's or
the write's transaction, so the read sees every write of the run it took the thread from.
Each returns a row when it took the thread (none when the run held it already, or, for
`take_if_free`, when another live run holds it). Every write then carries the run's token
(`fence`) and stores nothing when the thread's row names another (sql/writes.py,
`fence_lost`): the check is a probe of this table's primary key inside the write, never a
statement of its own. `holder` is read only after a write or take stored nothing, to say why.
"""

from __future__ import annotations

from typing import NamedTuple

from .logs import last_write


def fence_lost(q: str) -> str:
    """A condition, true when the write carries a token (`fence`) that is no longer the
    thread's: another run took the thread, or the thread was deleted since. One
    primary-key probe; none without a token (policy `allow`)."""
    return f"""%(fence)s::text IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {q}.thread_holders h WHERE h.thread_id = %(thread_id)s AND h.writer = %(fence)s)"""


_TAKE = """INSERT INTO {q}.thread_holders AS h (thread_id, run_id, writer)
SELECT %(thread_id)s, %(holder_run)s, %(fence)s{guard}
ON CONFLICT (thread_id) DO UPDATE SET run_id = EXCLUDED.run_id, writer = EXCLUDED.writer, taken_at = EXCLUDED.taken_at
WHERE h.writer <> EXCLUDED.writer
RETURNING 1"""


def take_over(q: str) -> str:
    """The run takes the thread, whoever held it (`takeover`): the holder's next write is refused."""
    return _TAKE.format(q=q, guard="")


def _last_write(q: str) -> str:
    """When the run of `run_log r` on the thread last wrote (see sql.logs.last_write)."""
    return last_write(q, lambda alias: f"{alias}.thread_id = %(thread_id)s")


def _live_holder(q: str) -> str:
    """The thread's holder when it is another run that is live: its row in run_log says
    `running` and it wrote within `window`. The same run id under another token is the
    same run started again (a retry after a crash): not a rival."""
    return f"""SELECT 1 FROM {q}.thread_holders o JOIN {q}.run_log r ON r.thread_id = o.thread_id AND r.run_id = o.run_id
    WHERE o.thread_id = %(thread_id)s AND r.thread_id = %(thread_id)s AND o.run_id <> %(holder_run)s
      AND r.status = 'running' AND {_last_write(q)} > now() - %(window)s::interval"""


def take_if_free(q: str) -> str:
    """The run takes the thread unless another live run holds it (`reject`, `wait`); then
    the row stays, and the write that follows stores nothing."""
    return _TAKE.format(q=q, guard=f"\nWHERE NOT EXISTS ({_live_holder(q)})")


class Holder(NamedTuple):
    """The row of `holder`: who holds the thread, since when, and whether it is live."""

    run_id: str
    writer: str
    taken_at: object  # datetime
    status: str | None  # of the run's row in run_log (None: none)
    last_write: object | None  # datetime: when the run last wrote (see _last_write)
    live: bool


def holder(q: str) -> str:
    """The thread's holder (no row: none), a `Holder` row, with its run's status and whether
    it is live as `take_if_free` judges it. Sent only after a write or take stored nothing."""
    return f"""SELECT run_id, writer, taken_at, status, last_write,
       coalesce(status = 'running' AND last_write > now() - %(window)s::interval, false)
FROM (SELECT h.run_id, h.writer, h.taken_at, r.status, {_last_write(q)} AS last_write
      FROM {q}.thread_holders h
      LEFT JOIN {q}.run_log r ON r.thread_id = h.thread_id AND r.run_id = h.run_id AND r.thread_id = %(thread_id)s
      WHERE h.thread_id = %(thread_id)s) held"""
