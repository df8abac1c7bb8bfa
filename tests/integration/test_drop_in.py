"""A drop-in for the official saver: the pools users already have, `before` as LangGraph
passes it, and a re-run task's writes kept exactly as the official saver keeps them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import ERROR, INTERRUPT, RESUME, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql
from psycopg.rows import dict_row, namedtuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_pg_durable import AsyncDurablePostgresSaver, ConfigError, DurablePostgresSaver
from langgraph_pg_durable.core.actions import NULL_TASK_ID

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths

# The pool the official saver's documentation prescribes, and others users run.
POOLS: dict[str, dict[str, Any]] = {
    "docs": {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    "never-prepared": {"autocommit": True, "prepare_threshold": None, "row_factory": namedtuple_row},
    "plain": {"autocommit": True},
    "transactions": {"autocommit": False, "prepare_threshold": 0, "row_factory": dict_row},
}


def _checkpoint(saver: Any, values: dict[str, Any], parent: dict[str, Any] | None = None) -> tuple[dict, dict]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    previous = dict(parent["channel_versions"]) if parent else {}
    new = {ch: saver.get_next_version(previous.get(ch), None) for ch in values}
    checkpoint["channel_versions"] = {**previous, **new}
    return checkpoint, new


def _first_checkpoint(saver: Any, thread_id: str = "t", values: dict[str, Any] | None = None) -> dict:
    """Put one checkpoint on a new thread with a sync saver; returns its config."""
    checkpoint, new = _checkpoint(saver, values or {"log": [0]})
    return saver.put({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, checkpoint, {"source": "loop", "step": 0}, new)


def _three_steps(saver: Any, thread_id: str) -> list[dict]:
    """Three checkpoints, each with writes; returns the configs put() gave."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    configs, parent = [], None
    for step in range(3):
        checkpoint, new = _checkpoint(saver, {"messages": ["m"] * (step + 1) * 500, "step": step}, parent)
        config = saver.put(config, checkpoint, {"source": "loop", "step": step, "run": "r"}, new)
        saver.put_writes(config, [("messages", ["next"]), ("step", step + 1)], f"task-{step}")
        configs.append(config)
        parent = checkpoint
    return configs


def _assert_reads_back(got: Any, configs: list[dict]) -> None:
    latest, history, filtered = got
    assert latest.config == configs[-1]
    assert len(latest.checkpoint["channel_values"]["messages"]) == 1500
    assert latest.pending_writes == [("task-2", "messages", ["next"]), ("task-2", "step", 3)]
    assert [t.config for t in history] == configs[::-1]
    assert [t.metadata["step"] for t in filtered] == [1]


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_the_sync_saver_works_on_the_pools_users_run(pg_dsn: str, schema_name: str, pool: str) -> None:
    with ConnectionPool(pg_dsn, min_size=1, max_size=2, kwargs=POOLS[pool], open=True) as users_pool:
        saver = DurablePostgresSaver(users_pool, schema=schema_name)
        saver.setup()
        saver.setup()  # a second run reads the ledger through the caller's row factory too
        configs = _three_steps(saver, "t")
        got = (
            saver.get_tuple({"configurable": {"thread_id": "t"}}),
            list(saver.list({"configurable": {"thread_id": "t"}})),
            list(saver.list(None, filter={"step": 1})),
        )
    _assert_reads_back(got, configs)


@pytest.mark.parametrize("pool", sorted(POOLS))
async def test_the_async_saver_works_on_the_pools_users_run(pg_dsn: str, schema_name: str, pool: str) -> None:
    async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, kwargs=POOLS[pool], open=False) as users_pool:
        saver = AsyncDurablePostgresSaver(users_pool, schema=schema_name)
        await saver.setup()
        await saver.setup()
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        configs, parent = [], None
        for step in range(3):
            checkpoint, new = _checkpoint(saver, {"messages": ["m"] * (step + 1) * 500, "step": step}, parent)
            config = await saver.aput(config, checkpoint, {"source": "loop", "step": step, "run": "r"}, new)
            await saver.aput_writes(config, [("messages", ["next"]), ("step", step + 1)], f"task-{step}")
            configs.append(config)
            parent = checkpoint
        got = (
            await saver.aget_tuple({"configurable": {"thread_id": "t"}}),
            [t async for t in saver.alist({"configurable": {"thread_id": "t"}})],
            [t async for t in saver.alist(None, filter={"step": 1})],
        )
    _assert_reads_back(got, configs)


def test_a_single_dict_row_connection_that_prepares_everything(pg_dsn: str, schema_name: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = DurablePostgresSaver(conn, schema=schema_name)
        saver.setup()
        configs = _three_steps(saver, "t")
        got = (
            saver.get_tuple({"configurable": {"thread_id": "t"}}),
            list(saver.list({"configurable": {"thread_id": "t"}})),
            list(saver.list(None, filter={"step": 1})),
        )
        # The caller's connection keeps its own row factory.
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    _assert_reads_back(got, configs)


# -- list(before=...) ---------------------------------------------------------------------


def test_before_is_read_for_its_checkpoint_id_alone(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        configs = _three_steps(saver, "t")
        other = _three_steps(saver, "u")
        newest = configs[-1]["configurable"]["checkpoint_id"]
        # LangGraph's subgraph time travel passes a `before` with no thread_id in it.
        before = {"configurable": {"checkpoint_id": newest}}
        on_thread = [t.config for t in saver.list({"configurable": {"thread_id": "t"}}, before=before)]
        everywhere = {t.config["configurable"]["checkpoint_id"] for t in saver.list(None, before=before)}
        # The Agent Server passes the id at the top level of `before`.
        top_level = [t.config for t in saver.list({"configurable": {"thread_id": "t"}}, before={"checkpoint_id": newest})]  # type: ignore[typeddict-unknown-key]
        # Without a checkpoint id it is an error naming `before`, not an empty page (the
        # official saver compares with NULL and lists nothing).
        with pytest.raises(ConfigError, match=r"^before names no checkpoint"):
            list(saver.list({"configurable": {"thread_id": "t"}}, before={"configurable": {}}))
        # An empty config lists every thread, as with the official saver.
        every_thread = list(saver.list({}))
    assert on_thread == top_level == configs[:2][::-1]
    assert everywhere == {c["configurable"]["checkpoint_id"] for c in [*configs, *other] if c["configurable"]["checkpoint_id"] < newest}
    assert len(every_thread) == 6


async def test_async_before_is_read_for_its_checkpoint_id_alone(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        configs = _three_steps(saver, "t")
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as asaver:
        before = {"configurable": {"checkpoint_id": configs[1]["configurable"]["checkpoint_id"]}}
        got = [t.config async for t in asaver.alist({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, before=before)]
    assert got == [configs[0]]


# -- a task's writes sent again ------------------------------------------------------------

# Each case: the put_writes calls of one checkpoint, in order, as (task_id, writes).
RERUNS: dict[str, list[tuple[str, list[tuple[str, Any]]]]] = {
    "more channels the second time": [("a", [("log", 1), ("plain", 1)]), ("a", [("log", 2), ("plain", 2), ("extra", 2)])],
    "one write, then two": [("a", [("log", 1)]), ("a", [("log", 2), ("plain", 2)])],
    "three writes, then two": [("a", [("log", 1), ("plain", 1), ("extra", 1)]), ("a", [("x", 2), ("y", 2)])],
    "two writes, then one": [("a", [("log", 1), ("plain", 1)]), ("a", [("other", 2)])],
    "the same writes again": [("a", [("log", 1), ("plain", 1)]), ("a", [("log", 1), ("plain", 1)])],
    "an error, then the re-run's writes": [("a", [(ERROR, "boom")]), ("a", [("log", 2), ("plain", 2)])],
    "writes, then an interrupt": [("a", [("log", 1), ("plain", 1)]), ("a", [(INTERRUPT, "ask")]), ("a", [(INTERRUPT, "again")])],
    "writes with an interrupt, twice": [("a", [("log", 1), (INTERRUPT, "ask")]), ("a", [("log", 2), ("plain", 2), (INTERRUPT, "ask2")])],
    "the null task, with more appended": [
        (NULL_TASK_ID, [(RESUME, "yes")]),
        (NULL_TASK_ID, [("log", 1), ("plain", 1)]),
        (NULL_TASK_ID, [("log", 1), ("plain", 1), ("extra", 1)]),
    ],
    "two tasks, each re-run": [
        ("a", [("log", 1), ("plain", 1)]),
        ("b", [("log", 3)]),
        ("b", [("log", 4), ("plain", 4), ("extra", 4)]),
        ("a", [("log", 2), ("plain", 2), ("extra", 2)]),
    ],
}


def _official_writes(pg_dsn: str, schema: str, calls: Sequence[tuple[str, list]]) -> list:
    """What the official saver keeps for those calls (its tables in their own schema)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    with psycopg.connect(pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-c search_path={schema}") as conn:
        official = PostgresSaver(conn)
        official.setup()
        config = _first_checkpoint(official)
        for task_id, writes in calls:
            official.put_writes(config, writes, task_id)
        return official.get_tuple(config).pending_writes


def _write_rows(pg_dsn: str, schema: str) -> int:
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute(sql.SQL("SELECT count(*) FROM {}.checkpoint_writes").format(sql.Identifier(schema))).fetchone()[0]


@pytest.mark.parametrize("case", sorted(RERUNS))
def test_writes_sent_again_keep_what_the_official_saver_keeps(pg_dsn: str, schema_name: str, case: str) -> None:
    calls = RERUNS[case]
    expected = _official_writes(pg_dsn, f"{schema_name}_official", calls)
    try:
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
            saver.setup()
            config = _first_checkpoint(saver)
            for task_id, writes in calls:
                saver.put_writes(config, writes, task_id)
            rows = _write_rows(pg_dsn, schema_name)
            # Every call sent once more, as a retry after a lost reply would: nothing new is stored.
            for task_id, writes in calls:
                saver.put_writes(config, writes, task_id)
            assert _write_rows(pg_dsn, schema_name) == rows
            got = saver.get_tuple(config).pending_writes
            listed = next(iter(saver.list(config))).pending_writes
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
            fresh_got = fresh.get_tuple(config).pending_writes
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(f"{schema_name}_official")))
    assert got == listed == fresh_got == expected


async def test_async_rerun_keeps_the_new_channels_write(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        checkpoint, new = _checkpoint(saver, {"log": [0]})
        config = await saver.aput({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint, {"source": "loop", "step": 0}, new)
        await saver.aput_writes(config, [("log", 1), ("plain", 1)], "done")
        await saver.aput_writes(config, [("log", 2), ("plain", 2), ("extra", ["new"])], "done")
        got = (await saver.aget_tuple(config)).pending_writes
    assert got == [("done", "log", 1), ("done", "plain", 1), ("done", "extra", ["new"])]


def test_a_rerun_that_writes_a_list_as_items_keeps_the_first_write(pg_dsn: str, schema_name: str) -> None:
    """A write to a list in the delta layout is stored as items; a re-run's new list at the
    same index is not the one kept, and its new channel's write is."""
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        config = _first_checkpoint(saver, values={"items": [f"item-{i}" for i in range(20)]})
        saver.put_writes(config, [("items", ["first"]), ("log", 1)], "task")
        saver.put_writes(config, [("items", ["second"]), ("log", 2), ("extra", 2)], "task")
        got = saver.get_tuple(config).pending_writes
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        fresh_got = fresh.get_tuple(config).pending_writes
    assert got == fresh_got == [("task", "items", ["first"]), ("task", "log", 1), ("task", "extra", 2)]


def test_writes_of_a_pooled_saver_on_a_thread_named_freely(pg_dsn: str, schema_name: str) -> None:
    """Task ids and channels are data: quotes and unicode go through as they are."""
    thread_id = f"t'\"{uuid.uuid4()}é"
    with ConnectionPool(pg_dsn, min_size=1, max_size=2, kwargs=POOLS["docs"], open=True) as pool:
        saver = DurablePostgresSaver(pool, schema=schema_name)
        saver.setup()
        config = _first_checkpoint(saver, thread_id)
        saver.put_writes(config, [("ch'an", 1), ('ch"an', 2)], "tâsk'")
        saver.put_writes(config, [("ch'an", 3), ('ch"an', 4), ("nouveau", 5)], "tâsk'")
        got = saver.get_tuple(config).pending_writes
    assert got == [("tâsk'", "ch'an", 1), ("tâsk'", 'ch"an', 2), ("tâsk'", "nouveau", 5)]
