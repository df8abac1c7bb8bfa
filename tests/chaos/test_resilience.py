"""Transient errors are retried; a pool runs calls in parallel; history streams."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import psycopg
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from roundtrip_proxy import RoundTripProxy


def _checkpoint(saver, values: dict):
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {k: version for k in values}
    return checkpoint


def _put(saver, config, values, step=0):
    checkpoint = _checkpoint(saver, values)
    return saver.put(config, checkpoint, {"source": "loop", "step": step}, dict(checkpoint["channel_versions"]))


def _with_app_name(dsn: str, name: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + f"application_name={name}"


def _terminate(dsn: str, app_name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (app_name,),
        ).fetchone()[0]


def test_lost_connections_are_retried(pg_dsn: str, schema_name: str) -> None:
    app_name = f"lgpd-{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(_with_app_name(pg_dsn, app_name), schema=schema_name, min_size=3, max_size=3) as saver:
        saver.setup()
        config = {"configurable": {"thread_id": "retried", "checkpoint_ns": ""}}
        first = _put(saver, config, {"a": 1})
        assert _terminate(pg_dsn, app_name) >= 1  # every pooled connection is now dead
        second = _put(saver, {"configurable": dict(first["configurable"])}, {"a": 2}, step=1)
        assert _terminate(pg_dsn, app_name) >= 1
        fetched = saver.get_tuple(second)
    assert fetched.checkpoint["channel_values"] == {"a": 2}
    assert fetched.parent_config == first


async def test_lost_connections_are_retried_async(pg_dsn: str, schema_name: str) -> None:
    app_name = f"lgpd-{uuid.uuid4().hex[:8]}"
    async with AsyncDurablePostgresSaver.from_conn_string(
        _with_app_name(pg_dsn, app_name), schema=schema_name, min_size=2, max_size=2
    ) as saver:
        await saver.setup()
        config = {"configurable": {"thread_id": "retried", "checkpoint_ns": ""}}
        checkpoint = _checkpoint(saver, {"a": 1})
        stored = await saver.aput(config, checkpoint, {"step": 0}, dict(checkpoint["channel_versions"]))
        assert _terminate(pg_dsn, app_name) >= 1
        await saver.aput_writes(stored, [("a", 5)], "task")
        assert _terminate(pg_dsn, app_name) >= 1
        fetched = await saver.aget_tuple(stored)
    assert fetched.pending_writes == [("task", "a", 5)]


def _waiting_on_lock(dsn: str, app_name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
            (app_name,),
        ).fetchone()[0]


def _poll(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        time.sleep(0.02)


def test_pooled_saver_runs_calls_in_parallel(pg_dsn: str, schema_name: str) -> None:
    """Four get_tuple calls blocked on a table lock at once: no saver-wide lock."""
    app_name = f"lgpd-{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(_with_app_name(pg_dsn, app_name), schema=schema_name, max_size=4) as saver:
        saver.setup()
        stored = _put(saver, {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}, {"a": 1})
        results: list = []
        with psycopg.connect(pg_dsn) as blocker:
            blocker.execute(f'LOCK TABLE "{schema_name}".checkpoints IN ACCESS EXCLUSIVE MODE')
            threads = [threading.Thread(target=lambda: results.append(saver.get_tuple(stored))) for _ in range(4)]
            for t in threads:
                t.start()
            _poll(lambda: _waiting_on_lock(pg_dsn, app_name) == 4)
            blocker.rollback()
        for t in threads:
            t.join(timeout=30)
    assert [r.checkpoint["channel_values"] for r in results] == [{"a": 1}] * 4


async def test_async_pooled_saver_runs_calls_in_parallel(pg_dsn: str, schema_name: str) -> None:
    app_name = f"lgpd-{uuid.uuid4().hex[:8]}"
    async with AsyncDurablePostgresSaver.from_conn_string(_with_app_name(pg_dsn, app_name), schema=schema_name, max_size=4) as saver:
        await saver.setup()
        checkpoint = _checkpoint(saver, {"a": 1})
        stored = await saver.aput(
            {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}, checkpoint, {}, dict(checkpoint["channel_versions"])
        )
        with psycopg.connect(pg_dsn) as blocker:
            blocker.execute(f'LOCK TABLE "{schema_name}".checkpoints IN ACCESS EXCLUSIVE MODE')
            calls = asyncio.gather(*(saver.aget_tuple(stored) for _ in range(4)))
            deadline = time.monotonic() + 30
            while await asyncio.to_thread(_waiting_on_lock, pg_dsn, app_name) < 4:
                assert time.monotonic() < deadline
            blocker.rollback()
            results = await calls
    assert [r.checkpoint["channel_values"] for r in results] == [{"a": 1}] * 4


def test_history_streams_without_reading_the_thread(pg_dsn: str, schema_name: str) -> None:
    proxy = RoundTripProxy(pg_dsn)
    try:
        with psycopg.connect(proxy.dsn, autocommit=True) as conn:
            saver = DurablePostgresSaver(conn, schema=schema_name)
            saver.setup()
            config = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
            for step in range(1000):
                config = _put(saver, {"configurable": dict(config["configurable"])}, {"blob": f"{step}-" + "x" * 2000}, step)
            thread = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}

            proxy.reset()
            everything = list(saver.list(thread))
            all_bytes = proxy.take_bytes()
            assert len(everything) == 1000

            proxy.reset()
            iterator = saver.list(thread)
            first = [next(iterator) for _ in range(10)]
            first_bytes = proxy.take_bytes()
            iterator.close()
            assert [t.config for t in first] == [t.config for t in everything[:10]]
            assert first_bytes < all_bytes / 20, (first_bytes, all_bytes)
            assert everything[0].checkpoint["channel_values"]["blob"].startswith("999-")
            assert everything[-1].checkpoint["channel_values"]["blob"].startswith("0-")
    finally:
        proxy.close()
