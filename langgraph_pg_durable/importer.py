"""Import threads from the official `langgraph-checkpoint-postgres` tables into ours.

The official saver reads its own tables (so every value is decoded as it would decode
it), and each checkpoint is put into ours oldest first with its pending writes, then the
thread's action log and run ids are filled (`backfill_actions`). Every write is
idempotent, so an import stopped half-way is simply run again; a thread whose every
checkpoint and write is already here is skipped. With `verify`, each imported thread's
history is read back from both savers and compared: states, metadata, pending writes.

Needs `langgraph-checkpoint-postgres` (`pip install 'langgraph-pg-durable[import]'`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from psycopg import sql
from psycopg.rows import dict_row

from .errors import ConfigError, shown
from .saver import DurablePostgresSaver
from .sql.schema import quote_schema

THREAD_PAGE = 500


@dataclass
class ImportReport:
    """What an import did: threads imported and skipped (already complete), checkpoints and
    writes put, and each difference a verification found (empty: every thread read back equal)."""

    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    checkpoints: int = 0
    writes: int = 0
    mismatches: list[str] = field(default_factory=list)


def _official_saver(conn: psycopg.Connection[dict[str, Any]]) -> Any:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise ConfigError(
            "importing from the official saver needs langgraph-checkpoint-postgres: pip install 'langgraph-pg-durable[import]'"
        ) from None
    return PostgresSaver(conn)


def _threads(conn: psycopg.Connection[dict[str, Any]], only: Sequence[str] | None) -> Iterator[str]:
    if only is not None:
        yield from sorted(set(only))
        return
    after = ""
    while True:
        rows = conn.execute(
            "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %s ORDER BY thread_id LIMIT %s", [after, THREAD_PAGE]
        ).fetchall()
        for row in rows:
            yield row["thread_id"]
        if len(rows) < THREAD_PAGE:
            return
        after = rows[-1]["thread_id"]


def _task_paths(conn: psycopg.Connection[dict[str, Any]], thread_id: str) -> dict[tuple[str, str, str], str]:
    """(namespace, checkpoint, task) -> task_path: the tuple's pending writes leave it out."""
    has_path = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'checkpoint_writes' AND column_name = 'task_path')"
    ).fetchone()
    if not has_path or not has_path["exists"]:
        return {}
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, task_id, max(task_path) AS task_path FROM checkpoint_writes"
        " WHERE thread_id = %s GROUP BY 1, 2, 3",
        [thread_id],
    ).fetchall()
    return {(r["checkpoint_ns"], r["checkpoint_id"], r["task_id"]): r["task_path"] or "" for r in rows}


def _key(t: Any) -> tuple[str, str]:
    return t.config["configurable"].get("checkpoint_ns", ""), t.config["configurable"]["checkpoint_id"]


def _complete(ours: DurablePostgresSaver, thread_id: str, tuples: Sequence[Any]) -> bool:
    """Whether the thread is already ours whole: every checkpoint is here, and the one put
    last (the newest: an import goes oldest first, each put followed by its writes) has
    all its pending writes."""
    held = {(s.checkpoint_ns, s.checkpoint_id) for s in ours.list_steps(thread_id)}
    if not all(_key(t) in held for t in tuples):
        return False
    newest = tuples[0]
    mine = ours.get_tuple(newest.config)
    return mine is not None and len(mine.pending_writes or ()) == len(newest.pending_writes or ())


def writer_for(target: DurablePostgresSaver) -> DurablePostgresSaver:
    """A copy of `target` that writes history as it was: the same pool, store and caches,
    but no log rows and no run ids, which `backfill_actions` then fills as LangGraph made them."""
    writer = copy.copy(target)
    writer.action_log = False
    writer.importing = True
    return writer


def put_history(
    writer: DurablePostgresSaver,
    tuples: Sequence[Any],
    *,
    task_paths: dict[tuple[str, str, str], str] | None = None,
    thread_id: str | None = None,
    skip_writes_of: tuple[str, str] | None = None,
) -> tuple[int, int]:
    """Put `tuples` (newest first, as list() gives them) oldest first, each with its pending
    writes: into their own thread, or into `thread_id`; the writes of the checkpoint
    `skip_writes_of` (namespace, id) are left out. Returns (checkpoints, writes) put."""
    checkpoints = writes_put = 0
    for t in reversed(tuples):  # oldest first: each put extends its parent
        ns, checkpoint_id = _key(t)
        target_thread = thread_id or t.config["configurable"]["thread_id"]
        parent: RunnableConfig = {"configurable": {"thread_id": target_thread, "checkpoint_ns": ns}}
        if t.parent_config is not None:
            parent["configurable"]["checkpoint_id"] = t.parent_config["configurable"]["checkpoint_id"]
        config = writer.put(parent, t.checkpoint, t.metadata, dict(t.checkpoint["channel_versions"]))
        checkpoints += 1
        if (ns, checkpoint_id) == skip_writes_of:
            continue
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in t.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            writer.put_writes(config, writes, task_id, (task_paths or {}).get((ns, checkpoint_id, task_id), ""))
            writes_put += len(writes)
    return checkpoints, writes_put


def _differences(thread_id: str, theirs: Sequence[Any], ours: Sequence[Any]) -> list[str]:
    where = f"thread {shown(thread_id)}"
    if [_key(t) for t in theirs] != [_key(t) for t in ours]:
        return [f"{where}: the checkpoints read back differ ({len(theirs)} official, {len(ours)} imported)"]
    found = []
    for a, b in zip(theirs, ours):
        label = f"{where}, checkpoint {shown(_key(a)[1])}"
        for name, left, right in (
            ("state", a.checkpoint["channel_values"], b.checkpoint["channel_values"]),
            ("channel versions", a.checkpoint["channel_versions"], b.checkpoint["channel_versions"]),
            ("metadata", a.metadata, b.metadata),
            ("pending writes", list(a.pending_writes or ()), list(b.pending_writes or ())),
            (
                "parent",
                (a.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                (b.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
            ),
        ):
            if left != right:
                found.append(f"{label}: its {name} differs")
    return found


def import_official(
    source: str,
    target: DurablePostgresSaver,
    *,
    source_schema: str = "public",
    thread_ids: Sequence[str] | None = None,
    verify: bool = True,
    on_thread: Callable[[str, bool], None] | None = None,
) -> ImportReport:
    """Copy every thread (or `thread_ids`) of the official saver's tables at `source` (a
    connection string; its tables in `source_schema`) into `target`'s schema. Safe to run
    again: complete threads are skipped, the rest put again idempotently. `on_thread`
    is called after each thread with (thread_id, imported)."""
    quoted = quote_schema(source_schema)  # refuses a bad name before any I/O
    importer = writer_for(target)
    report = ImportReport()
    with psycopg.connect(source, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.SQL(quoted)))
        if conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL AS found").fetchone()["found"] is not True:  # type: ignore[index]
            raise ConfigError(f"schema {shown(source_schema)} of the source has no official checkpoints table")
        official = _official_saver(conn)
        for thread_id in _threads(conn, thread_ids):
            theirs = list(official.list({"configurable": {"thread_id": thread_id}}))
            if not theirs or _complete(target, thread_id, theirs):
                if theirs and target.action_log:
                    target.backfill_actions(thread_ids=[thread_id])  # a no-op unless a run stopped before it
                report.skipped.append(thread_id)
                if on_thread:
                    on_thread(thread_id, False)
                continue
            checkpoints, writes = put_history(importer, theirs, task_paths=_task_paths(conn, thread_id))
            report.checkpoints += checkpoints
            report.writes += writes
            if target.action_log:
                target.backfill_actions(thread_ids=[thread_id])
            if verify:
                report.mismatches += _differences(thread_id, theirs, list(target.list({"configurable": {"thread_id": thread_id}})))
            report.imported.append(thread_id)
            if on_thread:
                on_thread(thread_id, True)
    return report
