"""The hot path's flights through libpq (`wire.exchange`): one implicit transaction per
flight, the server's errors raised as psycopg raises them, the connection usable after,
and statements prepared again when the session forgot them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from checkpoints import next_put
from langgraph_pg_durable import DurablePostgresSaver, wire


KEY = 424242  # an advisory lock key no other test takes


@pytest.fixture
def conn(pg_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE wire_rows (n int PRIMARY KEY)")
        yield conn


def _rows(conn: psycopg.Connection, *statements: tuple[str, dict]) -> list[tuple]:
    return conn.wait(wire.exchange(conn, statements))


def test_the_last_statements_rows_come_back_decoded(conn: psycopg.Connection) -> None:
    rows = _rows(
        conn,
        ("INSERT INTO wire_rows VALUES (%(n)s)", {"n": 1}),
        ("SELECT %(t)s::text, %(b)b::bytea, %(n)s::int8, %(j)s::jsonb, NULL::int", {"t": "é", "b": b"\x00", "n": 2**40, "j": '{"a": 1}'}),
    )
    assert rows == [("é", b"\x00", 2**40, {"a": 1}, None)]
    assert _rows(conn, ("INSERT INTO wire_rows VALUES (%(n)s) ON CONFLICT DO NOTHING", {"n": 1})) == []


def test_an_error_rolls_back_the_whole_flight_and_leaves_the_connection_usable(conn: psycopg.Connection, pg_dsn: str) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        _rows(
            conn,
            ("SELECT pg_advisory_xact_lock(%(k)s)", {"k": KEY}),
            ("INSERT INTO wire_rows VALUES (%(n)s)", {"n": 7}),
            ("SELECT 1 / %(z)s", {"z": 0}),
        )
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and wire.usable(conn)
    assert _rows(conn, ("SELECT count(*) FROM wire_rows WHERE n = %(n)s", {"n": 7})) == [(0,)]
    with psycopg.connect(pg_dsn) as other:  # the lock went with the rolled-back flight
        held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND objsubid = 1"
        assert other.execute(held, (KEY,)).fetchone() == (0,)


def test_a_parameter_of_another_type_gets_a_statement_of_its_own(conn: psycopg.Connection) -> None:
    # psycopg dumps a small int as int2 and a large one as int8: one prepared text, two types.
    assert [_rows(conn, ("SELECT %(v)s", {"v": v}))[0][0] for v in (1, 2**40, None, 3)] == [1, 2**40, None, 3]


@pytest.mark.parametrize("forget", ["DEALLOCATE ALL", "DISCARD ALL"])
def test_a_saver_whose_session_forgot_its_statements_prepares_them_again(pg_dsn: str, schema_name: str, forget: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        saver = DurablePostgresSaver(conn, schema=schema_name)
        saver.setup()
        config = {"configurable": {"thread_id": "forgot", "checkpoint_ns": ""}}
        versions: dict[str, str] = {}
        for step in range(3):
            versions = {"doc": saver.get_next_version(versions.get("doc"), None)}
            config = next_put(saver, config, {"doc": {"step": step}}, versions, versions, step=step)
            conn.execute(forget)
        saver.put_writes(config, [("doc", {"step": 9})], "task-1")
        conn.execute(forget)
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_values"]["doc"] == {"step": 2}
        assert [w[1:] for w in got.pending_writes] == [("doc", {"step": 9})]


def test_only_an_idle_autocommit_connection_takes_this_path(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        assert not wire.usable(conn)
        conn.autocommit = True
        assert wire.usable(conn)
        with conn.transaction():
            assert not wire.usable(conn)
        with conn.pipeline():
            assert not wire.usable(conn)


def test_the_async_shell_drives_the_same_flight(pg_dsn: str) -> None:
    async def run() -> list[tuple]:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.UndefinedTable):
                await conn.wait(wire.exchange(conn, [("SELECT * FROM no_such_table WHERE x = %(x)s", {"x": 1})]))
            return await conn.wait(wire.exchange(conn, [("SELECT %(a)s::int + 1", {"a": 41})]))

    assert asyncio.run(run()) == [(42,)]


def test_without_prepared_statements_nothing_is_prepared_on_the_server(pg_dsn: str, schema_name: str) -> None:
    """prepare_threshold=None (PgBouncer in transaction mode): every statement goes unnamed."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, prepare_threshold=None, max_size=1) as saver:
        saver.setup()
        config: dict = {"configurable": {"thread_id": "unnamed", "checkpoint_ns": ""}}
        versions: dict[str, str] = {}
        for step in range(8):  # past any threshold
            versions = {"doc": saver.get_next_version(versions.get("doc"), None)}
            config = next_put(saver, config, {"doc": {"step": step}}, versions, versions, step=step)
            saver.put_writes(config, [("doc", {"step": step})], f"task-{step}")
            assert saver.get_tuple(config) is not None
        with saver.conn.connection() as conn:  # type: ignore[union-attr]
            assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)


def test_a_new_pool_connection_is_handed_out_with_the_first_reads_prepared(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, max_size=1) as saver:
        # Before setup() the warm-up finds no tables: the connection is handed out as it is.
        with saver.conn.connection() as conn:  # type: ignore[union-attr]
            assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
        saver.setup()
        versions = {"doc": saver.get_next_version(None, None)}
        next_put(saver, {"configurable": {"thread_id": "warm", "checkpoint_ns": ""}}, {"doc": {"v": 1}}, versions, versions, step=0)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, max_size=1) as fresh:
        with fresh.conn.connection() as conn:  # type: ignore[union-attr]
            prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
            assert conn.execute("SHOW lock_timeout").fetchone() == ("0",)  # the warm-up's own, reset
        assert sum("WITH target AS" in s for (s,) in prepared) == 2  # get_tuple, cold and warm
        assert any("WITH vals AS" in s for (s,) in prepared)  # a history page's details
        got = fresh.get_tuple({"configurable": {"thread_id": "warm"}})
        assert got is not None and got.checkpoint["channel_values"] == {"doc": {"v": 1}}
