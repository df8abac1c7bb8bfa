"""`list_threads()`: one summary per thread from checkpoint and run rows only (a role that
cannot read a single value lists them), filtered by status, run, metadata and time, in
thread_id order, streamed in pages."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import psycopg
import pytest
from langgraph.types import Command
from psycopg import sql

import agents
from langgraph_pg_durable import AsyncDurablePostgresSaver, ConfigError, DurablePostgresSaver


@pytest.fixture
def saver(pg_dsn: str, schema_name: str) -> Any:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        yield saver


def _populate(saver: Any) -> dict[str, str]:
    """A finished agent thread (two turns), an interrupted approval, a failed run; by role."""
    tag = uuid.uuid4().hex[:6]
    ids = {"done": f"a-done-{tag}", "interrupted": f"b-wait-{tag}", "error": f"c-fail-{tag}"}
    calc = agents.tool_agent(saver, agents.calculator_replies())
    done = {"configurable": {"thread_id": ids["done"]}, "metadata": {"user": "ana"}}
    calc.invoke({"messages": [("user", "what is 1+2?")]}, done, durability="sync")
    calc.invoke({"messages": [("user", "thanks")]}, done, durability="sync")
    agents.approval(saver).invoke({"item": "book"}, {"configurable": {"thread_id": ids["interrupted"]}}, durability="sync")
    with pytest.raises(RuntimeError):
        agents.crashing_node(saver).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": ids["error"]}}, durability="sync")
    return ids


def test_each_thread_is_summarised_from_its_rows(saver: Any, pg_dsn: str, schema_name: str) -> None:
    ids = _populate(saver)
    listed = {t.thread_id: t for t in saver.list_threads()}
    assert set(listed) == set(ids.values())
    done = listed[ids["done"]]
    history = list(saver.list({"configurable": {"thread_id": ids["done"]}}))
    assert done.checkpoints == len(history) and done.last_checkpoint_id == history[0].config["configurable"]["checkpoint_id"]
    assert done.last_step == history[0].metadata["step"] and done.status == "done"
    assert done.last_run_id == next(saver.list_runs(ids["done"])).run_id
    assert done.metadata["user"] == "ana" and done.metadata["source"] == "loop"
    assert listed[ids["interrupted"]].status == "interrupted" and listed[ids["error"]].status == "error"
    assert all(t.last_activity.tzinfo is not None for t in listed.values())


def test_filters_and_paging(saver: Any) -> None:
    ids = _populate(saver)
    assert [t.thread_id for t in saver.list_threads(status="interrupted")] == [ids["interrupted"]]
    assert [t.thread_id for t in saver.list_threads(status="error")] == [ids["error"]]
    assert [t.thread_id for t in saver.list_threads(metadata={"user": "ana"})] == [ids["done"]]
    first_run = list(saver.list_runs(ids["done"]))[-1].run_id
    assert [t.thread_id for t in saver.list_threads(run_id=first_run)] == [ids["done"]]
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)
    assert list(saver.list_threads(since=later)) == []
    assert len(list(saver.list_threads(until=later))) == 3
    # Many threads: pages of 16, 32... in thread_id order; a limit stops the scan.
    approval = agents.approval(saver)
    for i in range(40):
        approval.invoke({"item": "x"}, {"configurable": {"thread_id": f"m-{i:03d}"}}, durability="sync")
    every = [t.thread_id for t in saver.list_threads()]
    assert every == sorted(every) and len(every) == 43
    assert [t.thread_id for t in saver.list_threads(limit=20)] == every[:20]
    waiting = [t.thread_id for t in saver.list_threads(status="interrupted", limit=35)]
    assert len(waiting) == 35 and waiting == sorted(waiting)  # filtered rows do not end the scan early
    resumed = {"configurable": {"thread_id": "m-000"}}
    approval.invoke(Command(resume="yes"), resumed, durability="sync")
    assert next(saver.list_threads(run_id=next(saver.list_runs("m-000")).run_id)).status == "done"


def test_bad_filters_are_refused_by_name(saver: Any) -> None:
    with pytest.raises(ConfigError, match="status 'finished'"):
        list(saver.list_threads(status="finished"))
    with pytest.raises(ConfigError, match="since"):
        list(saver.list_threads(since="yesterday"))
    with pytest.raises(ConfigError, match="limit"):
        list(saver.list_threads(limit=-1))


def test_listing_threads_reads_no_value(saver: Any, pg_dsn: str, schema_name: str) -> None:
    """A role that may read checkpoint, run and holder rows but no value, write or item lists them all."""
    ids = _populate(saver)
    role = f"lister_{uuid.uuid4().hex[:8]}"
    schema = sql.Identifier(schema_name)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT SELECT ON {}.checkpoints, {}.run_log, {}.thread_holders TO {}").format(
                schema, schema, schema, sql.Identifier(role)
            )
        )
    try:
        dsn = psycopg.conninfo.make_conninfo(pg_dsn, user=role)
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema_name) as lister:
            assert {t.thread_id for t in lister.list_threads()} == set(ids.values())
            with pytest.raises(Exception, match="permission denied"):
                lister.get_tuple({"configurable": {"thread_id": ids["done"]}})
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_async_saver_lists_threads(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        graph = agents.approval(saver)
        await graph.ainvoke({"item": "book"}, {"configurable": {"thread_id": "async-1"}}, durability="sync")
        listed = [t async for t in saver.alist_threads()]
        assert [(t.thread_id, t.status) for t in listed] == [("async-1", "interrupted")]
