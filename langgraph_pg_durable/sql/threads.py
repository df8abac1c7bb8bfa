"""Reads of threads as a whole: a page of thread summaries in thread_id order (see core.threads).

Only checkpoint rows and run rows are read, never a value: a summary costs the same
whatever the thread holds.
"""

from __future__ import annotations

from .columns import Columns


class ThreadColumn(Columns):
    """A row of `threads_page`: one thread's summary."""

    THREAD_ID = 0
    CHECKPOINTS = 1  # in every namespace
    LAST_STEP = 2  # of the newest root checkpoint
    LAST_CHECKPOINT_ID = 3  # the newest root checkpoint
    LAST_RUN_ID = 4  # its run
    STATUS = 5  # that run's status (run_log); None without the action log
    LAST_ACTIVITY = 6  # when the newest checkpoint of any namespace was written
    METADATA = 7  # the newest root checkpoint's metadata, as JSON text
    HELD_BY = 8  # the run that holds the thread (thread_holders, see sql/fencing.py); None: none


def threads_page(q: str, where: str, having: str) -> str:
    """One page of thread summaries after `%(after)s` in thread_id order: `where` filters
    checkpoint rows (`c`), `having` the threads (both built by core.threads from fixed
    fragments). Grouped along the primary key, so a page reads its own threads' rows only."""
    return f"""
WITH page AS MATERIALIZED (
    SELECT c.thread_id, count(*) AS checkpoints, max(c.created_at) AS last_activity,
           max(c.checkpoint_id) FILTER (WHERE c.checkpoint_ns = '') AS last_checkpoint_id
    FROM {q}.checkpoints c
    WHERE c.thread_id > %(after)s AND {where}
    GROUP BY c.thread_id
    HAVING {having}
    ORDER BY c.thread_id
    LIMIT %(page)s
)
SELECT p.thread_id, p.checkpoints, l.step AS last_step, p.last_checkpoint_id,
       nullif(l.run_id, '') AS last_run_id, r.status, p.last_activity, l.metadata::text AS metadata,
       h.run_id AS held_by
FROM page p
LEFT JOIN {q}.checkpoints l
  ON l.thread_id = p.thread_id AND l.checkpoint_ns = '' AND l.checkpoint_id = p.last_checkpoint_id
LEFT JOIN {q}.run_log r ON r.thread_id = p.thread_id AND r.run_id = l.run_id
LEFT JOIN {q}.thread_holders h ON h.thread_id = p.thread_id
ORDER BY p.thread_id"""
