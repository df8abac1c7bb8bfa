"""Bounded decoding: item sizes known at write time are enforced at read, counts are
checked against the rows fetched, and each item decodes from exactly its own bytes."""

from __future__ import annotations

import zlib
from typing import Any

import ormsgpack
import psycopg
import pytest
from psycopg import sql

from checkpoints import first_put
from langgraph_pg_durable import DeserializationError, DurablePostgresSaver, ListIntegrityError
from langgraph_pg_durable.core.codec import COMPRESSED, LEGACY_COMPRESSED


def _execute(pg_dsn: str, schema: str, statement: str, *args: Any) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute(sql.SQL(statement).format(s=sql.Identifier(schema)), args).rowcount >= 1


@pytest.fixture
def threads(pg_dsn: str, schema_name: str):
    items = [f"item {i} " * 200 for i in range(10)]  # past 1 KiB each: stored compressed
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        yield first_put(saver, "kept", {"items": items}), first_put(saver, "t", {"items": items}), items


def _read_fails(pg_dsn: str, schema: str, config: dict, error: type[Exception], *names: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as fresh:
        with pytest.raises(error) as failure:
            fresh.get_tuple(config)
        with pytest.raises(error):
            list(fresh.list({"configurable": {"thread_id": "t"}}))
    for name in names:
        assert name in str(failure.value), (name, str(failure.value))


def _kept_reads(pg_dsn: str, schema: str, kept: dict, items: list[Any]) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as fresh:
        assert fresh.get_tuple(kept).checkpoint["channel_values"]["items"] == items


def test_a_planted_zip_bomb_item_is_refused_by_its_stated_size(pg_dsn: str, schema_name: str, threads) -> None:
    kept, config, items = threads
    bomb = (2000).to_bytes(4, "big") + zlib.compress(b"\x00" * (256 << 20), 9)  # 256 MiB in ~260 KB
    _execute(pg_dsn, schema_name, "UPDATE {s}.channel_items SET value = %s WHERE thread_id = 't' AND idx = 4", bomb)
    _read_fails(pg_dsn, schema_name, config, DeserializationError, "'t'", "'items'", "item 4", "past its size")
    _kept_reads(pg_dsn, schema_name, kept, items)


def test_a_count_in_a_list_row_is_checked_against_the_items_fetched(pg_dsn: str, schema_name: str, threads) -> None:
    kept, config, items = threads
    _execute(
        pg_dsn,
        schema_name,
        """UPDATE {s}.channel_values SET value = '{{"n":[1000000000000]}}'
                                     WHERE thread_id = 't' AND list_chain IS NOT NULL""",
    )
    _read_fails(pg_dsn, schema_name, config, ListIntegrityError, "'t'", "'items'", "999,999,999,999", "10 are stored")
    _kept_reads(pg_dsn, schema_name, kept, items)


def test_an_item_row_holding_two_objects_does_not_shift_the_others(pg_dsn: str, schema_name: str, threads) -> None:
    kept, config, items = threads
    two = ormsgpack.packb("first") + ormsgpack.packb("second")
    _execute(pg_dsn, schema_name, "UPDATE {s}.channel_items SET type = 'msgpack', value = %s WHERE thread_id = 't' AND idx = 2", two)
    _read_fails(pg_dsn, schema_name, config, DeserializationError, "'t'", "'items'", "not exactly one msgpack object")
    _kept_reads(pg_dsn, schema_name, kept, items)


def test_items_stored_compressed_before_sizes_were_kept_read_back(pg_dsn: str, schema_name: str, threads) -> None:
    _, config, items = threads
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT idx, type, value FROM {}.channel_items WHERE thread_id = 't'").format(sql.Identifier(schema_name))
        ).fetchall()
        assert rows and all(t.endswith(COMPRESSED) for _, t, _ in rows)
        for idx, type_, value in rows:  # rewrite each as the earlier format stored it
            legacy = type_[: -len(COMPRESSED)] + LEGACY_COMPRESSED
            conn.execute(
                sql.SQL("UPDATE {}.channel_items SET type = %s, value = %s WHERE thread_id = 't' AND idx = %s").format(
                    sql.Identifier(schema_name)
                ),
                (legacy, bytes(value)[4:], idx),
            )
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(config).checkpoint["channel_values"]["items"] == items
