"""setup(): idempotent, safe from many processes at once, fine on a plain connection."""

from __future__ import annotations

import multiprocessing

import psycopg
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_pg_durable.sql.schema import migrations


def _setup_in_process(dsn: str, schema: str, barrier, results) -> None:
    try:
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema, max_size=1) as saver:
            barrier.wait(timeout=60)
            saver.setup()
        results.put("ok")
    except Exception as exc:  # reported to the parent, which asserts on it
        results.put(f"{type(exc).__name__}: {exc}")


def _ledger(dsn: str, schema: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f'SELECT version, name FROM "{schema}".schema_migrations ORDER BY version').fetchall()


def test_concurrent_setup_from_several_processes(pg_dsn: str, schema_name: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = 6
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    processes = [ctx.Process(target=_setup_in_process, args=(pg_dsn, schema_name, barrier, results)) for _ in range(workers)]
    for p in processes:
        p.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(timeout=60)
    assert outcomes == ["ok"] * workers
    assert _ledger(pg_dsn, schema_name) == [(m.version, m.name) for m in migrations()]


def test_setup_twice_changes_nothing(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        first = _ledger(pg_dsn, schema_name)
        saver.setup()
    assert _ledger(pg_dsn, schema_name) == first


def test_setup_and_writes_on_a_plain_non_autocommit_connection(pg_dsn: str, schema_name: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        assert not conn.autocommit
        saver = DurablePostgresSaver(conn, schema=schema_name)
        saver.setup()
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"a": 1}
        checkpoint["channel_versions"] = {"a": saver.get_next_version(None, None)}
        config = saver.put(
            {"configurable": {"thread_id": "plain", "checkpoint_ns": ""}},
            checkpoint,
            {"source": "input", "step": -1},
            dict(checkpoint["channel_versions"]),
        )
        saver.put_writes(config, [("a", 2)], "task")
    # Committed: another connection sees it.
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as other:
        fetched = other.get_tuple(config)
    assert fetched.checkpoint["channel_values"] == {"a": 1}
    assert fetched.pending_writes == [("task", "a", 2)]


async def test_async_setup_on_a_plain_connection(pg_dsn: str, schema_name: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        saver = AsyncDurablePostgresSaver(conn, schema=schema_name)
        await saver.setup()
        await saver.setup()
    assert [v for v, _ in _ledger(pg_dsn, schema_name)] == [m.version for m in migrations()]


def test_tables_live_in_their_own_schema(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
    with psycopg.connect(pg_dsn) as conn:
        tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema_name,))}
    assert {"checkpoints", "channel_values", "checkpoint_writes", "schema_migrations"} <= tables
