"""Each read's result columns, as PostgreSQL names them, are the ones declared beside it."""

from __future__ import annotations

import psycopg

from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.core.arrays import TextArray
from langgraph_pg_durable.sql.reads import CheckpointColumn, Detail, RunLane
from langgraph_pg_durable.sql.threads import ThreadColumn


def _columns(conn: psycopg.Connection, sql: str, params: dict) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return [c.name for c in cur.description]


def test_the_server_names_every_read_column_as_declared(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        statements = saver.sql
    detail = list(Detail.names())
    lane = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c", "known": "[]", "known_lists": "[]"}
    empty = TextArray()
    with psycopg.connect(pg_dsn) as conn:
        for sql in statements.get_tuple.values():
            assert _columns(conn, sql, lane) == detail
        page = {
            "v_threads": empty,
            "v_namespaces": empty,
            "v_channels": empty,
            "v_versions": empty,
            "w_threads": empty,
            "w_namespaces": empty,
            "w_checkpoints": empty,
            "known": "[]",
            **dict.fromkeys(("known_threads", "known_namespaces", "known_channels", "known_versions"), ""),
        }
        assert _columns(conn, statements.page_details[False], page) == detail
        assert _columns(conn, statements.page_details[True], {**page, "thread_id": "t"}) == detail
        first = {key: value for key, value in page.items() if key[:2] not in ("v_", "w_")}
        first_page = statements.first_page("WHERE thread_id = %(thread_id)s")
        assert _columns(conn, first_page, {**first, "thread_id": "t", "page_size": 1}) == detail
        checkpoint = list(CheckpointColumn.names())
        assert _columns(conn, statements.list_page(""), {"page_size": 1}) == checkpoint
        assert _columns(conn, statements.latest_checkpoints, {"thread_ids": ["t"]}) == checkpoint
        assert _columns(conn, statements.run_lanes, {"run_ids": ["r"], "thread_ids": ["t"]}) == list(RunLane.names())
        threads = statements.threads_page("true", "true")
        assert _columns(conn, threads, {"after": "", "page": 1}) == list(ThreadColumn.names())
