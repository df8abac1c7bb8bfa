"""Fewer, smaller rows: scalar channel values live in their checkpoint's row (exact types,
still encrypted), and a task's writes share one row (read back as written)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import ERROR, INTERRUPT, empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_pg_durable.core.codec import INLINE_MAX_CHARS

SCALARS: dict[str, Any] = {
    "none": None,
    "yes": True,
    "no": False,
    "zero": 0,
    "big": 2**62,
    "ratio": 1.0,
    "negative": -2.5,
    "empty": "",
    "word": "secret-marker",
    "nul": "a\x00b",
    "edge": "x" * INLINE_MAX_CHARS,
}
ROWS: dict[str, Any] = {"long": "y" * (INLINE_MAX_CHARS + 1), "list": [1, 2], "dict": {"a": 1}}


def _checkpoint(saver: Any, values: dict[str, Any], previous: dict[str, str] | None = None) -> tuple[dict, dict]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    versions = dict(previous or {})
    new = {ch: saver.get_next_version(versions.get(ch), None) for ch in values if ch not in versions}
    checkpoint["channel_versions"] = {**versions, **new}
    return checkpoint, new


def _values_rows(pg_dsn: str, schema: str, thread_id: str) -> set[str]:
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(f'SELECT channel FROM "{schema}".channel_values WHERE thread_id = %s', (thread_id,))
        return {r[0] for r in rows}


def test_scalars_keep_their_types_and_need_no_values_row(pg_dsn: str, schema_name: str) -> None:
    thread = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    values = {**SCALARS, **ROWS}
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        first, new = _checkpoint(saver, values)
        stored = saver.put(thread, first, {"source": "input", "step": -1}, new)
        # A second checkpoint changes one scalar and keeps the rest where they are.
        second, new = _checkpoint(saver, {**values, "zero": 1}, {k: v for k, v in first["channel_versions"].items() if k != "zero"})
        saver.put(stored, second, {"source": "loop", "step": 0}, new)
    assert _values_rows(pg_dsn, schema_name, thread["configurable"]["thread_id"]) == set(ROWS)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        latest = fresh.get_tuple(thread).checkpoint["channel_values"]
        older = fresh.get_tuple(stored).checkpoint["channel_values"]
        history = [t.checkpoint["channel_values"] for t in fresh.list(thread)]
    for got, want in ((latest, {**values, "zero": 1}), (older, values)):
        assert got == want
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}
    assert history == [latest, older]


async def test_the_async_saver_reads_what_the_sync_saver_kept_inline(pg_dsn: str, schema_name: str) -> None:
    thread = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        checkpoint, new = _checkpoint(saver, SCALARS)
        saver.put(thread, checkpoint, {"source": "input", "step": -1}, new)
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as asaver:
        got = (await asaver.aget_tuple(thread)).checkpoint["channel_values"]
    assert got == SCALARS and type(got["yes"]) is bool and type(got["ratio"]) is float


@pytest.mark.parametrize("secret", ["secret-marker"])
def test_the_serializer_makes_the_inline_bytes_so_encryption_covers_them(pg_dsn: str, schema_name: str, secret: str) -> None:
    thread = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=serde) as saver:
        saver.setup()
        checkpoint, new = _checkpoint(saver, {"word": secret})
        saver.put(thread, checkpoint, {"source": "input", "step": -1}, new)
        assert saver.get_tuple(thread).checkpoint["channel_values"] == {"word": secret}
    with psycopg.connect(pg_dsn) as conn:
        body = conn.execute(
            f'SELECT checkpoint::text FROM "{schema_name}".checkpoints WHERE thread_id = %s',
            (thread["configurable"]["thread_id"],),
        ).fetchone()[0]
    assert "word" in body and secret not in body and "aes" in body


def _write_rows(pg_dsn: str, schema: str, thread_id: str) -> list[tuple[str, int, str]]:
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute(
            f'SELECT task_id, idx, type FROM "{schema}".checkpoint_writes WHERE thread_id = %s ORDER BY task_id, idx',
            (thread_id,),
        ).fetchall()


def test_a_tasks_writes_share_one_row_and_read_back_as_written(pg_dsn: str, schema_name: str) -> None:
    thread_id = str(uuid.uuid4())
    null_task = "00000000-0000-0000-0000-000000000000"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        checkpoint, new = _checkpoint(saver, {"n": 1})
        stored = saver.put(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, checkpoint, {"source": "input", "step": -1}, new
        )
        saver.put_writes(stored, [("a", [1, 2]), ("b", None), ("c", {"x": "y" * 300})], "task-1", "path")
        saver.put_writes(stored, [("a", "again"), ("b", 2), ("c", 3)], "task-1", "path")  # a retry: ignored
        saver.put_writes(stored, [("a", 10), (ERROR, ValueError("boom"))], "task-2")  # special: a row each
        # LangGraph sends the null task's writes again with more appended: each keeps its row.
        saver.put_writes(stored, [("a", "first"), ("b", "second")], null_task)
        saver.put_writes(stored, [("a", "first"), ("b", "second"), ("c", "third")], null_task)
        saver.put_writes(stored, [(INTERRUPT, "wait")], "task-3")
    rows = _write_rows(pg_dsn, schema_name, thread_id)
    assert [r[0] for r in rows].count("task-1") == 1 and rows[[r[0] for r in rows].index("task-1")][2].endswith("writes-v1")
    assert [r[0] for r in rows].count("task-2") == 2 and [r[0] for r in rows].count(null_task) == 3
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        got = fresh.get_tuple(stored).pending_writes
        listed = next(iter(fresh.list(stored))).pending_writes
    by_task: dict[str, list] = {}
    for task_id, channel, value in got:
        by_task.setdefault(task_id, []).append((channel, value if not isinstance(value, Exception) else repr(value)))
    assert by_task["task-1"] == [("a", [1, 2]), ("b", None), ("c", {"x": "y" * 300})]
    assert by_task[null_task] == [("a", "first"), ("b", "second"), ("c", "third")]
    assert by_task["task-2"] == [(ERROR, repr(ValueError("boom"))), ("a", 10)]  # by index: ERROR is -1
    assert by_task["task-3"] == [(INTERRUPT, "wait")]
    assert [(t, c) for t, c, _ in listed] == [(t, c) for t, c, _ in got]
