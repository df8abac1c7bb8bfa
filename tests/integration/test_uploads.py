"""How a put stores its objects on a real S3 server: a step's value is uploaded once for the
task's write and the next checkpoint; the statement that references an object runs while it
uploads, and commits only after it; an upload that fails rolls the statement back and leaves
the connection idle; an object gc deleted is uploaded again, not referenced."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import obstore
import psycopg
import pytest
from psycopg import pq

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, ObjectStoreError, objects, objects_async
from langgraph_pg_durable.core.offload import object_key
from test_offload import MIB, Driver, blob_graph, payload, referenced_keys, rows, store_for, stored_keys, thread

NO_REUSE = {"object_reuse_window": timedelta(0)}  # every put uploads; gc may collect anything past 0 s


class HookedObstore:
    """obstore, with each PUT's key recorded and `before_put(key)` run before it goes out
    (in a thread for the async saver, so that its event loop keeps sending statements)."""

    def __init__(self, before_put: Callable[[str], None] | None = None) -> None:
        self.puts: list[str] = []
        self.before_put = before_put

    def __getattr__(self, name: str) -> Any:
        return getattr(obstore, name)

    def put(self, store: Any, key: str, data: Any, **options: Any) -> Any:
        self.puts.append(key)
        if self.before_put is not None:
            self.before_put(key)
        return obstore.put(store, key, data, **options)

    async def put_async(self, store: Any, key: str, data: Any, **options: Any) -> Any:
        self.puts.append(key)
        if self.before_put is not None:
            await asyncio.to_thread(self.before_put, key)
        return await obstore.put_async(store, key, data, **options)


def hook(monkeypatch: pytest.MonkeyPatch, driver: Driver, before_put: Callable[[str], None] | None = None) -> HookedObstore:
    fake = HookedObstore(before_put)
    monkeypatch.setattr(objects if driver.mode == "sync" else objects_async, "obstore", fake)
    return fake


def wait_until_a_write_waits_uncommitted(pg_dsn: str, schema: str, *, timeout: float = 30.0) -> None:
    """Return once another backend is idle in a transaction that has written the rows of a
    write: a put_writes (checkpoint_writes) or a put (checkpoints) whose statement ran and
    that has not committed. A precondition polled for (it fails past `timeout`), not a sleep
    standing in for a result.

    Either call may be the one that uploads a step's value: the task's writes and the next
    checkpoint hold the same bytes, and LangGraph runs the two calls on threads of its own,
    in the order its scheduler gives them (on Python 3.13 the checkpoint's put often goes
    first). The first to claim the object uploads it, with its statement sent alongside and
    the thread's writer lock held to its commit; the other waits for that lock."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        while True:
            (waiting,) = conn.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.relation IN (to_regclass(format('%%I.checkpoint_writes', %s::text)),"
                " to_regclass(format('%%I.checkpoints', %s::text)))"
                " AND l.mode = 'RowExclusiveLock' AND l.granted AND a.state = 'idle in transaction'",
                (schema, schema),
            ).fetchone()  # type: ignore[misc]
            if waiting:
                return
            assert time.monotonic() < deadline, "no write's statement ran while its object uploaded"
            time.sleep(0.01)


def writes_before_their_checkpoint(saver: Any, mode: str) -> None:
    """Hold each put of a checkpoint that carries a value until a task's writes of a value were stored:
    the order in which the task's write uploads the step's value and the next checkpoint
    finds it confirmed. LangGraph runs the two calls on threads of its own and, on Python
    3.13, often starts the put first (then the put uploads, and the writes find it stored)."""
    if mode == "sync":
        stored, put_writes, put = threading.Event(), saver.put_writes, saver.put

        def put_writes_then_tell(config: Any, writes: Any, *args: Any) -> Any:
            try:
                return put_writes(config, writes, *args)
            finally:
                if any(channel == "blob" and value for channel, value in writes):
                    stored.set()

        def put_after_writes(config: Any, checkpoint: Any, *args: Any) -> Any:
            if checkpoint["channel_values"].get("blob"):
                assert stored.wait(30), "no task's writes were stored before the checkpoint"
            return put(config, checkpoint, *args)

        saver.put_writes, saver.put = put_writes_then_tell, put_after_writes
        return
    astored, aput_writes, aput = asyncio.Event(), saver.aput_writes, saver.aput

    async def aput_writes_then_tell(config: Any, writes: Any, *args: Any) -> Any:
        try:
            return await aput_writes(config, writes, *args)
        finally:
            if any(channel == "blob" and value for channel, value in writes):
                astored.set()

    async def aput_after_writes(config: Any, checkpoint: Any, *args: Any) -> Any:
        if checkpoint["channel_values"].get("blob"):
            await asyncio.wait_for(astored.wait(), 30)
        return await aput(config, checkpoint, *args)

    saver.aput_writes, saver.aput = aput_writes_then_tell, aput_after_writes


def key_of(saver: Any, data: bytes) -> str:
    return object_key(saver.placement.prefix, hashlib.sha256(data).hexdigest())


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest, pg_dsn: str, schema_name: str) -> Driver:
    return Driver(request.param, pg_dsn, schema_name)


@pytest.fixture
def s3_store(s3_server: Any, s3_prefix: str) -> dict[str, Any]:
    return store_for(s3_server, s3_prefix)


async def test_a_steps_value_is_uploaded_once_and_not_again_while_the_saver_knows_it_stored(
    driver: Driver, s3_store: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = hook(monkeypatch, driver)
    config = thread()
    async with driver.saver(**s3_store) as saver:
        await driver.invoke(blob_graph(saver, 3, 2 * MIB), {"blob": b"", "step": 0}, config)
        values = [payload(step, 2 * MIB) for step in range(3)]
        # The node's write and the next checkpoint hold the same bytes: one PUT per step.
        assert fake.puts == [key_of(saver, v) for v in values]
        # Another thread writing the same values references the objects this saver just stored.
        await driver.invoke(blob_graph(saver, 3, 2 * MIB), {"blob": b"", "step": 0}, thread())
        assert len(fake.puts) == 3
    assert set(stored_keys(s3_store)) == set(fake.puts)
    async with driver.saver(**s3_store) as fresh:
        assert (await driver.state(blob_graph(fresh, 3, 2 * MIB), config)).values == {"blob": values[2], "step": 3}


async def test_the_write_runs_while_its_object_uploads_and_commits_only_after(
    driver: Driver, s3_store: dict[str, Any], pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, bool] = {}

    def before_put(key: str) -> None:
        # Blocks this upload until the write's statement has run: a saver that sent it only
        # after the upload never gets there (and fails the wait).
        wait_until_a_write_waits_uncommitted(pg_dsn, schema_name)
        seen[key] = key in referenced_keys(pg_dsn, schema_name)

    fake = hook(monkeypatch, driver, before_put)
    config = thread()
    async with driver.saver(**s3_store) as saver:
        await driver.invoke(blob_graph(saver, 2, 2 * MIB), {"blob": b"", "step": 0}, config)
    assert len(fake.puts) == 2
    assert seen == dict.fromkeys(fake.puts, False)  # no committed row referenced an object before its upload finished
    assert referenced_keys(pg_dsn, schema_name) == set(fake.puts) == set(stored_keys(s3_store))


async def test_an_upload_failing_after_the_write_ran_commits_nothing_and_leaves_the_connection_idle(
    driver: Driver, s3_store: dict[str, Any], pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing: list[str | None] = []  # the keys refused, until the test clears `refusing` by appending None

    def before_put(key: str) -> None:
        if None in refusing:
            return
        if not refusing:  # the first refusal comes once the write it belongs to has run
            wait_until_a_write_waits_uncommitted(pg_dsn, schema_name)
        refusing.append(key)
        raise OSError("refused by the test")

    hook(monkeypatch, driver, before_put)
    config, value = thread(), payload(0, 2 * MIB)
    # One connection, not a pool: the saver's next call finds it as this one left it.
    if driver.mode == "sync":
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            saver = DurablePostgresSaver(conn, schema=schema_name, **s3_store)
            saver.setup()
            graph = blob_graph(saver, 1, 2 * MIB)
            with pytest.raises(ObjectStoreError, match="refused by the test"):
                graph.invoke({"blob": b"", "step": 0}, config, durability="sync")
            assert conn.info.transaction_status == pq.TransactionStatus.IDLE
            assert graph.get_state(config).values == {"blob": b"", "step": 0}
            assert referenced_keys(pg_dsn, schema_name) == set() and stored_keys(s3_store) == {}
            refusing.append(None)
            assert graph.invoke(None, config, durability="sync") == {"blob": value, "step": 1}
    else:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as aconn:
            asaver = AsyncDurablePostgresSaver(aconn, schema=schema_name, **s3_store)
            await asaver.setup()
            graph = blob_graph(asaver, 1, 2 * MIB)
            with pytest.raises(ObjectStoreError, match="refused by the test"):
                await graph.ainvoke({"blob": b"", "step": 0}, config, durability="sync")
            assert aconn.info.transaction_status == pq.TransactionStatus.IDLE
            assert (await graph.aget_state(config)).values == {"blob": b"", "step": 0}
            assert referenced_keys(pg_dsn, schema_name) == set() and stored_keys(s3_store) == {}
            refusing.append(None)
            assert await graph.ainvoke(None, config, durability="sync") == {"blob": value, "step": 1}
    assert referenced_keys(pg_dsn, schema_name) == set(stored_keys(s3_store)) == {key_of(saver if driver.mode == "sync" else asaver, value)}


async def test_an_object_gc_deleted_is_uploaded_again_rather_than_referenced(
    driver: Driver, s3_store: dict[str, Any], pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = hook(monkeypatch, driver)
    value, first, second = payload(0, 2 * MIB), thread(), thread()
    async with driver.saver(**s3_store, **NO_REUSE) as saver:
        graph = blob_graph(saver, 1, 2 * MIB)
        await driver.invoke(graph, {"blob": b"", "step": 0}, first)
        key = key_of(saver, value)
        if driver.mode == "sync":
            saver.delete_thread(first["configurable"]["thread_id"])
        else:
            await saver.adelete_thread(first["configurable"]["thread_id"])
        assert await driver.gc(saver, timedelta(0)) == 1 and stored_keys(s3_store) == {}
        uploads = len(fake.puts)
        await driver.invoke(graph, {"blob": b"", "step": 0}, second)
        assert fake.puts[uploads:] and set(fake.puts[uploads:]) == {key}
    assert set(stored_keys(s3_store)) == {key} == referenced_keys(pg_dsn, schema_name)
    async with driver.saver(**s3_store) as fresh:
        assert (await driver.state(blob_graph(fresh, 1, 2 * MIB), second)).values == {"blob": value, "step": 1}


async def test_an_object_the_saver_stops_vouching_for_before_the_commit_is_uploaded_again(
    driver: Driver, s3_store: dict[str, Any], pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint's put finds its value confirmed (its task's write just uploaded it) and
    sends its statement with the locks; if, by the claim made under gc's lock, the saver's
    memory of that upload has expired, the object is uploaded again before the commit. Here
    the object is also deleted behind the saver's back: a saver trusting the earlier answer
    would commit a reference to nothing."""
    module = objects if driver.mode == "sync" else objects_async
    storage = objects.ObjectStorage if driver.mode == "sync" else objects_async.AsyncObjectStorage
    fake, late = hook(monkeypatch, driver), [0.0]

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + late[0]

    monkeypatch.setattr(module, "time", Clock)
    answer = storage.confirmed

    def confirmed(self: Any, uploads: Any) -> bool:
        vouched = answer(self, uploads)
        if vouched and not late[0]:
            obstore.delete(self.store, [u.ref.key for u in uploads])
            late[0] = 2 * self.reuse_window.total_seconds()  # the memory expires before the claim
        return vouched

    monkeypatch.setattr(storage, "confirmed", confirmed)
    config, value = thread(), payload(0, 2 * MIB)
    async with driver.saver(**s3_store) as saver:
        writes_before_their_checkpoint(saver, driver.mode)
        await driver.invoke(blob_graph(saver, 1, 2 * MIB), {"blob": b"", "step": 0}, config)
        key = key_of(saver, value)
    assert late[0] and fake.puts == [key, key]  # the write's upload, then the checkpoint's own
    assert set(stored_keys(s3_store)) == {key} == referenced_keys(pg_dsn, schema_name)
    async with driver.saver(**s3_store) as fresh:
        assert (await driver.state(blob_graph(fresh, 1, 2 * MIB), config)).values == {"blob": value, "step": 1}


def test_uploads_without_server_side_prepared_statements(pg_dsn: str, schema_name: str, s3_store: dict[str, Any]) -> None:
    """prepare_threshold=None (PgBouncer in transaction mode): the begin, the statement and
    the commit go unnamed, and the transaction still spans them."""
    config = thread()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, prepare_threshold=None, **s3_store) as saver:
        saver.setup()
        assert blob_graph(saver, 2, 2 * MIB).invoke({"blob": b"", "step": 0}, config, durability="sync")["step"] == 2
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, **s3_store) as fresh:
        assert blob_graph(fresh, 2, 2 * MIB).get_state(config).values == {"blob": payload(1, 2 * MIB), "step": 2}
    assert referenced_keys(pg_dsn, schema_name) == set(stored_keys(s3_store))


@pytest.mark.parametrize("forget", ["DEALLOCATE ALL", "DISCARD ALL"])
def test_a_put_of_a_large_value_on_a_session_that_forgot_its_statements_prepares_them_again(
    pg_dsn: str, schema_name: str, s3_store: dict[str, Any], forget: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        saver = DurablePostgresSaver(conn, schema=schema_name, **s3_store, **NO_REUSE)
        saver.setup()
        config = thread()
        blob_graph(saver, 1, 2 * MIB).invoke({"blob": b"", "step": 0}, config, durability="sync")
        latest = saver.get_tuple(config)
        assert latest is not None
        conn.execute(forget)
        saver.put_writes(latest.config, [("blob", payload(7, 2 * MIB))], "task-1")  # its first statements are the upload's
        got = saver.get_tuple(latest.config)
        assert got is not None and [w[1:] for w in got.pending_writes] == [("blob", payload(7, 2 * MIB))]
    assert rows(pg_dsn, schema_name, "SELECT count(*) FROM {s}.checkpoint_writes WHERE object_key IS NOT NULL") == [(2,)]
