"""The connection a saver on its own pool keeps between calls (spare.py), on a real server:
a run of puts takes a connection from the pool once, not twice a step; a pool of one is
used as before; a kept connection the server ended is replaced without a failed call; and
closing the saver closes the one it kept."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import psycopg
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints import first_put, next_put
from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

PUTS = 12


def _requests(pool) -> int:
    """How many connections the pool has handed out so far."""
    return pool.get_stats().get("requests_num", 0)


def _puts(saver, thread_id: str, count: int) -> dict:
    """The first checkpoint of `thread_id` and `count` more; the last one's config."""
    config = first_put(saver, thread_id, {"n": 0})
    for step in range(count):
        config = _next(saver, config, step + 1, step)
    return config


def _next(saver, config: dict, n: int, step: int) -> dict:
    version = {"n": saver.get_next_version(saver.get_tuple(config).checkpoint["channel_versions"]["n"], None)}
    return next_put(saver, config, {"n": n}, version, version, step=step)


def test_a_run_of_puts_takes_a_connection_from_the_pool_once(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, min_size=2, max_size=4) as saver:
        saver.setup()
        before = _requests(saver.conn)
        config = _puts(saver, "kept", PUTS)
        assert _requests(saver.conn) - before <= 2  # the first put's, and one after a hold ran out at most
        assert saver.get_tuple(config).checkpoint["channel_values"] == {"n": PUTS}


def test_a_pool_of_one_hands_out_its_connection_at_every_call(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, min_size=1, max_size=1) as saver:
        saver.setup()
        before = _requests(saver.conn)
        _puts(saver, "one", PUTS)
        assert _requests(saver.conn) - before >= PUTS + 1


def test_a_kept_connection_the_server_ended_is_replaced_and_the_put_stored(pg_dsn: str, schema_name: str) -> None:
    name = f"lgpd-spare-{uuid.uuid4().hex[:8]}"
    dsn = pg_dsn + ("&" if "?" in pg_dsn else "?") + f"application_name={name}"
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema_name, min_size=2, max_size=2) as saver:
        saver.setup()
        config = _puts(saver, "ended", 2)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()[0]
        assert ended >= 1
        config = _next(saver, config, 99, 2)
        assert saver.get_tuple(config).checkpoint["channel_values"] == {"n": 99}


def test_closing_the_saver_closes_the_connection_it_kept(pg_dsn: str, schema_name: str) -> None:
    name = f"lgpd-spare-{uuid.uuid4().hex[:8]}"
    dsn = pg_dsn + ("&" if "?" in pg_dsn else "?") + f"application_name={name}"
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema_name, min_size=2, max_size=2) as saver:
        saver.setup()
        _puts(saver, "closed", 2)
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        left = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()[0]
    assert left == 0


async def test_the_async_saver_takes_a_connection_from_the_pool_once(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, min_size=2, max_size=4) as saver:
        await saver.setup()
        before = _requests(saver.conn)
        config = {"configurable": {"thread_id": "kept-async", "checkpoint_ns": ""}}
        version = None
        for step in range(-1, PUTS):
            version = saver.get_next_version(version, None)
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"n": step + 1}
            checkpoint["channel_versions"] = {"n": version}
            config = await saver.aput(config, checkpoint, {"source": "loop", "step": step}, {"n": version})
        assert _requests(saver.conn) - before <= 2
        assert (await saver.aget_tuple(config)).checkpoint["channel_values"] == {"n": PUTS}


def test_a_caller_waiting_for_the_pool_gets_the_connection_the_saver_would_keep(pg_dsn: str, schema_name: str) -> None:
    """The interleaving forced: the saver keeps one of its pool's two connections, the test
    holds the other, and a thread waits for the pool; the saver's next call gives the
    connection back rather than keep it, and the thread gets it (kept, it would wait out
    its timeout: the pool is at its size)."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, min_size=2, max_size=2) as saver:
        saver.setup()
        config = _puts(saver, "waited", 1)
        version = {"n": saver.get_next_version(saver.get_tuple(config).checkpoint["channel_versions"]["n"], None)}
        pool = saver.conn
        held = pool.getconn()  # the pool's other connection: it has none left
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(pool.getconn(timeout=30)))
        waiter.start()
        deadline = time.monotonic() + 30
        while pool.get_stats().get("requests_waiting", 0) < 1:  # the thread is in the pool's queue
            assert time.monotonic() < deadline and waiter.is_alive()
            time.sleep(0.001)
        started = time.monotonic()
        next_put(saver, config, {"n": 2}, version, version, step=1)  # on the kept connection
        waiter.join(30)
        assert got and time.monotonic() - started < 10  # handed over at the call's end, not at the timeout
        pool.putconn(got[0])
        pool.putconn(held)


def test_a_closed_connection_is_never_kept(pg_dsn: str) -> None:
    """Spare reads only the transaction status: libpq's of a closed connection is UNKNOWN."""
    from psycopg import pq

    from langgraph_pg_durable.spare import Spare

    conn = psycopg.connect(pg_dsn, autocommit=True)
    assert conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
    conn.close()
    assert conn.pgconn.transaction_status == pq.TransactionStatus.UNKNOWN
    idle_pool = type("Pool", (), {"waiting": lambda self: 0})()
    assert not Spare(enabled=True).keep(conn, time.monotonic(), idle_pool)
