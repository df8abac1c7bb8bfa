"""A PostgreSQL crash-restart (`pg_ctl restart -m immediate`) in the middle of a 300-step run.

To make the crash land on a statement in flight, and not merely between two, the test
holds a lock on the checkpoints table once the run is under way, waits until the
run's next `put` is blocked on it, and only then crash-restarts the server. The
saver must then reconnect and re-send (or give up with DatabaseUnavailableError);
either way, resuming the thread completes the run, and no committed checkpoint is lost.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from typing_extensions import TypedDict

from langgraph_pg_durable import AsyncDurablePostgresSaver, DatabaseUnavailableError, DurablePostgresSaver
from pg_server import PgServer

STEPS = 300
PAUSE_AT = 40  # the node run with count == PAUSE_AT waits until the test has taken its lock
TIMEOUT = 120.0  # for each wait below; a hang fails the test instead of blocking the session


class CounterState(TypedDict):
    count: int
    log: Annotated[list[int], operator.add]


def counter_graph(checkpointer: Any, reached: threading.Event, proceed: threading.Event) -> Any:
    """One node looping STEPS times; each step appends its number to `log`."""

    def work(state: CounterState) -> dict[str, Any]:
        count = state["count"]
        if count == PAUSE_AT and not proceed.is_set():
            reached.set()
            proceed.wait(TIMEOUT)
        return {"count": count + 1, "log": [count]}

    def again(state: CounterState) -> str:
        return "work" if state["count"] < STEPS else END

    builder = StateGraph(CounterState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", again, ["work", END])
    return builder.compile(checkpointer=checkpointer)


EXPECTED = {"count": STEPS, "log": list(range(STEPS))}
# Checkpoints of a full run: the input (-1), __start__ (0), then one per `work` step.
ALL_STEPS = list(range(-1, STEPS + 1))


def committed(dsn: str, schema: str, thread_id: str) -> list[tuple[int, str]]:
    """(step, checkpoint_id) of the thread's committed checkpoints, by step."""
    query = sql.SQL("SELECT step, checkpoint_id FROM {}.checkpoints WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY step").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, (thread_id,)).fetchall()


def blocked_on_checkpoints(dsn: str, schema: str) -> int:
    """Statements waiting for a lock on the checkpoints table."""
    table = sql.Identifier(schema, "checkpoints").as_string()
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass", (table,)).fetchone()[0]


async def poll_until(condition: Callable[[], bool], what: str, run_ended: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if run_ended():
            pytest.fail(f"the run ended before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {TIMEOUT:.0f}s")
        await asyncio.sleep(0.02)


class Run:
    """The graph run under test, in a thread (sync saver) or a task (async saver)."""

    def __init__(self, mode: str, dsn: str, schema: str, config: dict[str, Any]) -> None:
        self.mode, self.dsn, self.schema, self.config = mode, dsn, schema, config
        self.reached, self.proceed = threading.Event(), threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.mode == "sync":
            self._thread = threading.Thread(target=self._run_sync, name="graph-run", daemon=True)
            self._thread.start()
        else:
            self._task = asyncio.get_running_loop().create_task(self._run_async())

    def _run_sync(self) -> None:
        try:
            with DurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema) as saver:
                graph = counter_graph(saver, self.reached, self.proceed)
                self.result = graph.invoke({"count": 0, "log": []}, self.config, durability="sync")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    async def _run_async(self) -> None:
        try:
            async with AsyncDurablePostgresSaver.from_conn_string(self.dsn, schema=self.schema) as saver:
                graph = counter_graph(saver, self.reached, self.proceed)
                self.result = await graph.ainvoke({"count": 0, "log": []}, self.config, durability="sync")
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def ended(self) -> bool:
        if self._thread is not None:
            return not self._thread.is_alive()
        return self._task is not None and self._task.done()

    async def wait(self) -> None:
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, TIMEOUT)
            assert not self._thread.is_alive(), f"the run did not end within {TIMEOUT:.0f}s of the restart"
        elif self._task is not None:
            await asyncio.wait_for(self._task, TIMEOUT)


async def resume(mode: str, dsn: str, schema: str, config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Invoke the thread with None on a new saver; its result and the ids in its history."""
    never = threading.Event()
    never.set()  # no pause on resume
    if mode == "sync":
        with DurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
            graph = counter_graph(saver, threading.Event(), never)
            final = graph.invoke(None, config, durability="sync")
            ids = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn, schema=schema) as saver:
            graph = counter_graph(saver, threading.Event(), never)
            final = await graph.ainvoke(None, config, durability="sync")
            ids = [s.config["configurable"]["checkpoint_id"] async for s in graph.aget_state_history(config)]
    return final, ids


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_crash_restart_mid_run_loses_no_committed_checkpoint(mode: str, pg_server: PgServer, schema_name: str) -> None:
    if not pg_server.can_restart:
        pytest.skip(f"the {pg_server.kind!r} test server cannot be crash-restarted (e.g. one given by DSN)")
    dsn = pg_server.dsn
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema_name) as saver:
        saver.setup()
    thread_id = f"restart-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * STEPS}

    run = Run(mode, dsn, schema_name, config)
    run.start()
    locker = None
    try:
        await poll_until(run.reached.is_set, f"step with count {PAUSE_AT}", run.ended)
        assert [step for step, _ in committed(dsn, schema_name, thread_id)] == list(range(-1, PAUSE_AT + 1))

        # Hold the run's next put in flight, so the crash interrupts a statement.
        locker = psycopg.connect(dsn)
        locker.execute(sql.SQL("LOCK TABLE {}.checkpoints IN SHARE ROW EXCLUSIVE MODE").format(sql.Identifier(schema_name)))
        run.proceed.set()
        await poll_until(lambda: blocked_on_checkpoints(dsn, schema_name) > 0, "put blocked on the lock", run.ended)
        before = committed(dsn, schema_name, thread_id)
        assert [step for step, _ in before] == list(range(-1, PAUSE_AT + 1))

        await asyncio.to_thread(pg_server.restart_immediate)
        await run.wait()
    finally:
        run.proceed.set()
        if locker is not None:
            locker.close()
        if not run.ended():
            await run.wait()

    # The saver rode out the restart, or gave up with the error it promises; nothing else.
    if run.error is not None:
        assert isinstance(run.error, DatabaseUnavailableError), f"unexpected {run.error!r}"
    else:
        assert run.result == EXPECTED

    final, history_ids = await resume(mode, dsn, schema_name, config)
    assert final == EXPECTED
    after = committed(dsn, schema_name, thread_id)
    assert set(before) <= set(after), "a checkpoint committed before the crash is gone"
    assert {cid for _, cid in before} <= set(history_ids)
    # Each step was checkpointed exactly once: the re-sent put did not fork or duplicate.
    assert [step for step, _ in after] == ALL_STEPS
    assert len(history_ids) == len(ALL_STEPS)
