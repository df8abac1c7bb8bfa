"""Writers and deleters of one thread never interleave: each takes the thread's writer
lock before its statement, in its transaction. The interleavings are forced: the test
holds the lock (as the other party would), waits until the saver's call is blocked on
it (pg_locks shows the waiter), then commits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from checkpoints import next_put
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, HistoryRewoundError
from langgraph_pg_durable.core.plan import Query
from langgraph_pg_durable.sql.schema import thread_lock_keys

# Every case runs through both write paths: the statements, and the write functions (as on Citus).
pytestmark = pytest.mark.both_write_paths

NOTES = [f"note {i}" for i in range(400)]  # a list in the delta layout


def _history(saver: DurablePostgresSaver) -> tuple[dict, dict[str, str]]:
    """Two checkpoints of thread 't': a doc and a growing list; returns the second and its versions."""
    v1 = {"doc": saver.get_next_version(None, None), "notes": saver.get_next_version(None, None)}
    first = next_put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, {"doc": {"v": 1}, "notes": NOTES}, v1, v1, step=0)
    v2 = {**v1, "notes": saver.get_next_version(v1["notes"], None)}
    second = next_put(saver, first, {"doc": {"v": 1}, "notes": [*NOTES, "more"]}, v2, {"notes": v2["notes"]}, step=1)
    return second, v2


class InBackground:
    """Runs a call in a thread; `result()` joins it and returns (or raises) its outcome."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.outcome: list[Any] = []
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.outcome.append(("ok", call()))
        except BaseException as exc:  # handed to the test
            self.outcome.append(("error", exc))

    def result(self) -> Any:
        self.thread.join(timeout=60)
        kind, value = self.outcome[0]
        if kind == "error":
            raise value
        return value


def wait_until_blocked_on_a_writer_lock(pg_dsn: str, call: InBackground, *, timeout: float = 30.0) -> None:
    """Return once another backend waits for an advisory lock (the call is blocked on it).
    A precondition polled for, not a sleep standing in for a result: it fails if the call
    finished without waiting."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        while True:
            waiting = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0]
            if waiting:
                return
            assert call.thread.is_alive(), f"the call did not wait for the writer lock: {call.outcome}"
            assert time.monotonic() < deadline, "the call never blocked on the writer lock"
            time.sleep(0.01)


@pytest.fixture
def saver(pg_dsn: str, schema_name: str):
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        yield saver


def test_a_put_waits_for_another_process_delete_thread_and_then_refuses_to_write_on_it(
    saver: DurablePostgresSaver, pg_dsn: str, schema_name: str
) -> None:
    """The put's parent, which the saver saw committed, is gone when its turn comes: it
    raises HistoryRewoundError and writes nothing (a delete by the saver itself would have
    made it forget the thread: see test_integrity)."""
    second, v2 = _history(saver)
    with psycopg.connect(pg_dsn) as deleter:  # a delete_thread in flight: lock held, rows deleted, not committed
        deleter.execute("SELECT pg_advisory_xact_lock(%s)", thread_lock_keys(schema_name, ["t"]))
        deleter.execute(saver.sql.delete_threads, {"thread_ids": ["t"]})
        v3 = {**v2, "notes": saver.get_next_version(v2["notes"], None)}
        values = {"doc": {"v": 1}, "notes": [*NOTES, "more", "and more"]}
        put = InBackground(lambda: next_put(saver, second, values, v3, {"notes": v3["notes"]}, step=2))
        wait_until_blocked_on_a_writer_lock(pg_dsn, put)
        deleter.commit()
    with pytest.raises(HistoryRewoundError) as rewound:
        put.result()
    assert rewound.value.missing_checkpoint_id == second["configurable"]["checkpoint_id"]
    assert rewound.value.newest_checkpoint_id is None and "no checkpoint of the thread" in str(rewound.value)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert list(fresh.list({"configurable": {"thread_id": "t"}})) == []


def test_a_delete_thread_waits_for_a_put_and_then_deletes_it_too(saver: DurablePostgresSaver, pg_dsn: str, schema_name: str) -> None:
    second, v2 = _history(saver)
    with psycopg.connect(pg_dsn) as writer, writer.transaction():  # a put in flight, not committed
        in_flight = DurablePostgresSaver(writer, schema=schema_name)
        v3 = {**v2, "notes": in_flight.get_next_version(v2["notes"], None)}
        next_put(in_flight, second, {"doc": {"v": 1}, "notes": [*NOTES, "x"]}, v3, {"notes": v3["notes"]}, step=2)
        delete = InBackground(lambda: saver.delete_thread("t"))
        wait_until_blocked_on_a_writer_lock(pg_dsn, delete)
    delete.result()
    with psycopg.connect(pg_dsn) as conn:
        left = [
            conn.execute(f'SELECT count(*) FROM "{schema_name}".{table} WHERE thread_id = %s', ["t"]).fetchone()[0]
            for table in ("checkpoints", "channel_values", "channel_items", "checkpoint_writes")
        ]
    assert left == [0, 0, 0, 0]


def test_a_prune_waits_for_a_put_and_keeps_what_it_needs(saver: DurablePostgresSaver, pg_dsn: str, schema_name: str) -> None:
    second, v2 = _history(saver)
    with psycopg.connect(pg_dsn) as writer, writer.transaction():
        in_flight = DurablePostgresSaver(writer, schema=schema_name)
        v3 = {**v2, "notes": in_flight.get_next_version(v2["notes"], None)}
        values = {"doc": {"v": 1}, "notes": [*NOTES, "more", "x"]}
        third = next_put(in_flight, second, values, v3, {"notes": v3["notes"]}, step=2)
        prune = InBackground(lambda: saver.prune(["t"]))
        wait_until_blocked_on_a_writer_lock(pg_dsn, prune)
    prune.result()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert [t.config for t in fresh.list({"configurable": {"thread_id": "t"}})] == [third]
        assert fresh.get_tuple(third).checkpoint["channel_values"] == values


def test_writes_wait_for_a_delete_thread_and_then_refuse_to_write_on_it(saver: DurablePostgresSaver, pg_dsn: str, schema_name: str) -> None:
    """Their checkpoint, which the saver saw committed, is gone when their turn comes: no
    pending write is left behind for a checkpoint that is not there."""
    second, _ = _history(saver)
    with psycopg.connect(pg_dsn) as deleter:
        deleter.execute("SELECT pg_advisory_xact_lock(%s)", thread_lock_keys(schema_name, ["t"]))
        deleter.execute(saver.sql.delete_threads, {"thread_ids": ["t"]})
        writes = InBackground(lambda: saver.put_writes(second, [("doc", {"w": 1}), ("x", 2)], "task"))
        wait_until_blocked_on_a_writer_lock(pg_dsn, writes)
        deleter.commit()
    with pytest.raises(HistoryRewoundError, match="put_writes of task 'task'"):
        writes.result()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema_name}".checkpoint_writes').fetchone()[0] == 0


class _Watched:
    """A saver's queue, seen from the test: `queued` is set once a second flight found it
    taken and waits in it."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.queued = threading.Event()

    def __enter__(self) -> None:
        if not self.queue.acquire(blocking=False):
            self.queued.set()
            self.queue.acquire()

    def __exit__(self, *exc: object) -> None:
        self.queue.release()


def _watch(saver: Any, key: int, watching: Callable[[Any], Any]) -> Any:
    """Put `watching` around the queue the saver's own mapping gives a write under the
    writer lock `key` (any flight of that thread waits in it); return the watcher."""
    slot = saver._queue_of(Query("put_writes", "", {}, locks=[key]))
    assert slot is not None, "a write of one thread waits in no queue"
    watched = saver._queues[slot] = watching(saver._queues[slot])
    return watched


def test_a_second_flight_of_a_thread_waits_in_the_saver(saver: DurablePostgresSaver, pg_dsn: str, schema_name: str) -> None:
    """LangGraph sends a task's writes and the next put from different threads at once. The
    second of a thread's flights waits in the saver, holding no connection, while the first
    waits for the writer lock (here held by another process): one backend waits on the
    server, not two; then both are stored."""
    second, _ = _history(saver)
    key = thread_lock_keys(schema_name, ["t"])[0]
    watched = _watch(saver, key, _Watched)
    with psycopg.connect(pg_dsn) as other:
        other.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        first = InBackground(lambda: saver.put_writes(second, [("doc", {"w": 1})], "task-a"))
        wait_until_blocked_on_a_writer_lock(pg_dsn, first)
        then = InBackground(lambda: saver.put_writes(second, [("doc", {"w": 2})], "task-b"))
        assert watched.queued.wait(timeout=30), "the second flight did not wait in the saver"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            waiting = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
        assert waiting == (1,)
        other.commit()
    first.result()
    then.result()
    got = saver.get_tuple(second)
    assert got is not None and sorted(task for task, _, _ in got.pending_writes) == ["task-a", "task-b"]


class _Running:
    """A task, as `wait_until_blocked_on_a_writer_lock` looks at an InBackground call."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.thread = SimpleNamespace(is_alive=lambda: not task.done())
        self.outcome = task


class _WatchedAsync:
    """`_Watched` for the async saver's queue (an asyncio.Lock): the check and the wait run
    with no await between them, so nothing else runs in between."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.queued = asyncio.Event()

    async def __aenter__(self) -> None:
        if self.queue.locked():
            self.queued.set()
        await self.queue.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.queue.release()


async def test_a_second_flight_of_a_thread_waits_in_the_async_saver(pg_dsn: str, schema_name: str) -> None:
    """The async shell's queue: as above, with the two writes as tasks on one loop."""
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        versions = {"doc": saver.get_next_version(None, None)}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"], checkpoint["channel_versions"] = {"doc": {"v": 1}}, dict(versions)
        root = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        first_put = await saver.aput(root, checkpoint, {"source": "input", "step": -1}, versions)
        key = thread_lock_keys(schema_name, ["t"])[0]
        watched = _watch(saver, key, _WatchedAsync)
        other = await psycopg.AsyncConnection.connect(pg_dsn)
        try:
            await other.execute("SELECT pg_advisory_xact_lock(%s)", [key])
            first = asyncio.create_task(saver.aput_writes(first_put, [("doc", {"w": 1})], "task-a"))
            await asyncio.to_thread(wait_until_blocked_on_a_writer_lock, pg_dsn, _Running(first))
            then = asyncio.create_task(saver.aput_writes(first_put, [("doc", {"w": 2})], "task-b"))
            await asyncio.wait_for(watched.queued.wait(), timeout=30)
            async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
                waiting = await (await conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).fetchone()
            assert waiting == (1,)
            await other.commit()
        finally:
            await other.close()
        await asyncio.wait_for(asyncio.gather(first, then), timeout=60)
        got = await saver.aget_tuple(first_put)
        assert got is not None and sorted(task for task, _, _ in got.pending_writes) == ["task-a", "task-b"]
