"""A cold get_tuple (a saver that holds nothing of the thread) reads a long list's items
as runs, a row per few hundred items, and rebuilds the list exactly; a run it cannot send
whole (items of different stored types, an offloaded item) comes a row per item."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import ormsgpack
import psycopg
import pytest
from checkpoints import next_put
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import sql

from langgraph_pg_durable import DeserializationError, DurablePostgresSaver
from langgraph_pg_durable.sql.reads import COLD_READ_WORK_MEM, RUN_ITEMS, RUN_MIN_ITEMS, Detail, Part


def _stored(saver: DurablePostgresSaver, items: list[Any], appended: list[Any], thread_id: str = "cold") -> dict:
    """A list put whole, then a delta appending `appended`: the config of the second."""
    versions = {"items": saver.get_next_version(None, None)}
    config = next_put(saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, {"items": items}, versions, versions, step=0)
    grown = {"items": saver.get_next_version(versions["items"], None)}
    return next_put(saver, config, {"items": [*items, *appended]}, grown, grown, step=1)


def _cold_parts(dsn: str, schema: str, config: dict, **options: Any) -> tuple[Counter[str], list[Any]]:
    """What a new saver's get_tuple returns: the parts of its rows, and the list."""
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema, **options) as fresh:
        query = fresh._get_tuple_query(config)
        with fresh._connection() as conn:
            rows = fresh._send(conn, query)
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema, **options) as fresh:
        found = fresh.get_tuple(config)
    assert found is not None
    return Counter(row[Detail.PART] for row in rows), found.checkpoint["channel_values"]["items"]


def test_a_long_list_comes_in_runs_and_is_rebuilt_exactly(pg_dsn: str, schema_name: str) -> None:
    items: list[Any] = [f"line {i}" for i in range(700)] + [i * 7 for i in range(300)] + [{"role": "user", "n": i} for i in range(300)]
    appended = [b"\x00bytes", None, 3.5, ["nested", {"k": 1}]]
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _stored(saver, items, appended)
    parts, read = _cold_parts(pg_dsn, schema_name, config, list_min_bytes=0)
    assert read == items + appended
    # The snapshot's runs whole; the delta's four items have three stored types (the
    # serializer stores bytes and None under types of their own), so they come a row each.
    assert parts[Part.ITEM_RUN] == -(-len(items) // RUN_ITEMS) and parts[Part.ITEM] == len(appended)


def test_a_run_of_mixed_stored_types_comes_a_row_per_item(pg_dsn: str, schema_name: str) -> None:
    """Items from 1 KiB up are stored compressed (another stored type): a run holding both
    kinds is sent item by item, the runs around it whole."""
    items: list[Any] = [f"line {i}" for i in range(3 * RUN_ITEMS)]
    items[RUN_ITEMS + 5] = "compressible " * 200
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _stored(saver, items, ["last"])
    parts, read = _cold_parts(pg_dsn, schema_name, config, list_min_bytes=0)
    assert read == items + ["last"]
    assert parts[Part.ITEM] == RUN_ITEMS + 1  # the one broken run item by item, and the delta's one item
    assert parts[Part.ITEM_RUN] == 2  # the two whole runs of the snapshot


def test_a_run_with_an_offloaded_item_comes_a_row_per_item(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    store = {"object_store": f"file://{tmp_path}/objects", "offload_threshold": 64 * 1024, "list_min_bytes": 0}
    big = os.urandom(100 * 1024)
    items: list[Any] = [f"line {i}" for i in range(2 * RUN_ITEMS)]
    items[3] = big
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **store) as saver:
        saver.setup()
        config = _stored(saver, items, ["last"])
    parts, read = _cold_parts(pg_dsn, schema_name, config, **store)
    assert read == items + ["last"]
    assert parts[Part.ITEM] == RUN_ITEMS + 1 and parts[Part.ITEM_RUN] == 1


def test_short_groups_come_a_row_per_item(pg_dsn: str, schema_name: str) -> None:
    """A list grown a few items a step (a chat) has a group per step: under RUN_MIN_ITEMS
    items a group comes as rows, which cost the client less than a run each."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _stored(saver, [f"line {i}" for i in range(RUN_MIN_ITEMS)], ["short"] * (RUN_MIN_ITEMS - 1))
    parts, read = _cold_parts(pg_dsn, schema_name, config, list_min_bytes=0)
    assert read == [f"line {i}" for i in range(RUN_MIN_ITEMS)] + ["short"] * (RUN_MIN_ITEMS - 1)
    assert parts[Part.ITEM_RUN] == 1 and parts[Part.ITEM] == RUN_MIN_ITEMS - 1


def test_a_long_version_whose_first_run_is_broken_sends_each_item_once(pg_dsn: str, schema_name: str) -> None:
    """Every version's first RUN_MIN_ITEMS items are read in one scan; a longer version's
    come again in its runs, so they are dropped from the rows: with its first run broken
    (a compressed item among them), each of its items comes back exactly once."""
    items: list[Any] = [f"line {i}" for i in range(2 * RUN_ITEMS)]
    items[3] = "compressible " * 200
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _stored(saver, items, ["last"])
    parts, read = _cold_parts(pg_dsn, schema_name, config, list_min_bytes=0)
    assert read == [*items, "last"]
    assert parts[Part.ITEM] == RUN_ITEMS + 1 and parts[Part.ITEM_RUN] == 1


def test_a_chat_of_short_versions_comes_a_row_per_item(pg_dsn: str, schema_name: str) -> None:
    """A list grown by one or two items a step, across snapshots: every item comes back once,
    a row each, from the one scan of short versions."""
    expected: list[Any] = []
    config: dict = {"configurable": {"thread_id": "chat", "checkpoint_ns": ""}}
    version = None
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        for step in range(40):
            expected = [*expected, *[f"turn {step} part {k}" for k in range(1 + step % 2)]]
            version = saver.get_next_version(version, None)
            config = next_put(saver, config, {"items": expected}, {"items": version}, {"items": version}, step=step)
    parts, read = _cold_parts(pg_dsn, schema_name, config, list_min_bytes=0)
    assert read == expected
    assert parts[Part.ITEM] == len(expected) and parts[Part.ITEM_RUN] == 0


@pytest.mark.parametrize("count", [RUN_ITEMS - 1, RUN_ITEMS, RUN_ITEMS + 1, 2 * RUN_ITEMS])
def test_a_version_is_read_past_its_first_run_only_when_that_run_is_full(pg_dsn: str, schema_name: str, count: int) -> None:
    """A version's first run is read first, and its other runs only when it is full: at
    each side of the boundary every item comes back, in runs of up to RUN_ITEMS."""
    items = [f"line {i}" for i in range(count)]
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _stored(saver, items, ["last"])
    parts, read = _cold_parts(pg_dsn, schema_name, config, list_min_bytes=0)
    assert read == [*items, "last"]
    sizes = [min(RUN_ITEMS, count - start) for start in range(0, count, RUN_ITEMS)]
    short = sum(size for size in sizes if size < RUN_MIN_ITEMS)  # a last run of a few items comes a row each
    assert parts[Part.ITEM_RUN] == sum(size >= RUN_MIN_ITEMS for size in sizes) and parts[Part.ITEM] == short + 1


def test_a_run_item_holding_two_objects_is_refused_by_name_and_other_threads_read_back(pg_dsn: str, schema_name: str) -> None:
    """A whole run decodes in one call from its bytes end to end: an item whose stored bytes
    hold two msgpack objects shifts the frame's sentinel and is refused, naming the thread
    and channel (never read as the next item); another thread's list reads back whole."""
    items = [f"line {i}" for i in range(RUN_ITEMS)]
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _stored(saver, items, ["last"])
        kept = _stored(saver, items, ["last"], thread_id="kept")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        changed = conn.execute(
            sql.SQL("UPDATE {}.channel_items SET value = %s WHERE thread_id = 'cold' AND idx = 2 AND type = 'msgpack'").format(
                sql.Identifier(schema_name)
            ),
            [ormsgpack.packb("first") + ormsgpack.packb("second")],
        ).rowcount
    assert changed == 1
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as fresh:
        with pytest.raises(DeserializationError, match=r"'cold'.*'items'.*not exactly one msgpack object"):
            fresh.get_tuple(config)
    parts, read = _cold_parts(pg_dsn, schema_name, kept, list_min_bytes=0)
    assert read == [*items, "last"] and parts[Part.ITEM_RUN] == 1  # read by the runs' path


def _setting(saver: DurablePostgresSaver, setting: str = "work_mem") -> str:
    with saver._connection() as conn:
        row = conn.execute(f"SHOW {setting}").fetchone()
    assert row is not None
    return str(row[0] if isinstance(row, tuple) else next(iter(row.values())))


def test_the_pools_it_builds_hold_the_cold_reads_work_mem(pg_dsn: str, schema_name: str) -> None:
    """A cold read groups a long list's items in memory: the saver's own pool raises
    work_mem on each connection (never lowers it), except behind PgBouncer in transaction
    mode (prepare_threshold=None), where a session setting would reach other clients."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        assert _setting(saver) == COLD_READ_WORK_MEM
    with DurablePostgresSaver.from_conn_string(f"{pg_dsn}?options=-c%20work_mem%3D256MB", schema=schema_name) as saver:
        assert _setting(saver) == "256MB"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, prepare_threshold=None) as saver:
        assert _setting(saver) != COLD_READ_WORK_MEM


def test_the_pools_it_builds_plan_each_statement_once(pg_dsn: str, schema_name: str) -> None:
    """The saver's statements probe by primary key whatever the plan: its own pool has the
    server plan them generically (a cold get_tuple was planned again at every call, 1-2 ms
    each), unless the connection sets plan_cache_mode itself, and not behind PgBouncer in
    transaction mode. The cold read's statement then has generic plans only."""
    config = {"configurable": {"thread_id": "generic-plans", "checkpoint_ns": ""}}
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        assert _setting(saver, "plan_cache_mode") == "force_generic_plan"
        saver.setup()
        checkpoint = empty_checkpoint()
        saver.put(config, checkpoint, {"step": 0}, {})
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        fresh_tuple = fresh.get_tuple(config)
        assert fresh_tuple is not None and fresh_tuple.checkpoint["id"] == checkpoint["id"]
        with fresh._connection() as conn:
            plans = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s", ("%small_items%",)
            ).fetchall()
        assert plans and all(custom == 0 for _, custom in plans) and any(generic > 0 for generic, _ in plans)
    with DurablePostgresSaver.from_conn_string(f"{pg_dsn}?options=-c%20plan_cache_mode%3Dforce_custom_plan", schema=schema_name) as saver:
        assert _setting(saver, "plan_cache_mode") == "force_custom_plan"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, prepare_threshold=None) as saver:
        assert _setting(saver, "plan_cache_mode") == "auto"
