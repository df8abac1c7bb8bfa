"""Catalog reads for `diagnose()` (`lgpd doctor`): the server, its durability settings, the
schema's tables and indexes, and the threads that stand out. Each is one statement; the
thread ones scan the checkpoints once (a diagnosis, not a hot path)."""

from __future__ import annotations

SERVER = "SELECT current_setting('server_version') AS version, current_setting('server_version_num')::int AS number"

# Settings under which an acknowledged commit can be lost, and what replication waits for.
SETTINGS = """
SELECT name, setting FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'synchronous_standby_names', 'wal_level')
ORDER BY name"""

EXTENSIONS = "SELECT extname, extversion FROM pg_extension ORDER BY extname"

RELATIONS = """
SELECT c.relname, c.relkind::text, pg_total_relation_size(c.oid) AS total_bytes, greatest(c.reltuples, 0)::bigint AS rows_estimate
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'i')
ORDER BY pg_total_relation_size(c.oid) DESC, c.relname"""


def oldest_threads(q: str) -> str:
    return f"""
SELECT thread_id, max(created_at) AS last_activity, count(*) AS checkpoints
FROM {q}.checkpoints GROUP BY thread_id ORDER BY last_activity, thread_id LIMIT %(top)s"""


def largest_threads(q: str) -> str:
    return f"""
SELECT thread_id, max(created_at) AS last_activity, count(*) AS checkpoints
FROM {q}.checkpoints GROUP BY thread_id ORDER BY checkpoints DESC, thread_id LIMIT %(top)s"""
