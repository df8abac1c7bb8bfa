"""The two object storages without a server: concurrent uploads of one key are made once
(threads for the sync twin, tasks for the async one), a failed upload lets a waiter try
itself, and reads are verified and cached."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from typing import Any

import obstore
import pytest
from obstore.store import MemoryStore

from langgraph_pg_durable import ObjectIntegrityError, ObjectStoreError
from langgraph_pg_durable import objects, objects_async
from langgraph_pg_durable.objects import ObjectStorage
from langgraph_pg_durable.objects_async import AsyncObjectStorage
from langgraph_pg_durable.core.offload import ObjectRef, Upload, object_key


def _upload(data: bytes) -> Upload:
    sha = hashlib.sha256(data).hexdigest()
    return Upload(ObjectRef(object_key("t/objects", sha), sha, len(data)), data, "test")


class CountingObstore:
    """obstore, with each PUT and GET counted, PUTs held `delay` seconds, and the first
    `failures` PUTs refused."""

    def __init__(self, delay: float = 0.0, failures: int = 0) -> None:
        self.puts = self.gets = 0
        self.delay, self.failures = delay, failures
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(obstore, name)

    def _count_put(self) -> None:
        with self._lock:
            self.puts += 1
            if self.failures:
                self.failures -= 1
                raise OSError("refused\nsecond line")

    def put(self, store: Any, key: str, data: bytes) -> Any:
        time.sleep(self.delay)
        self._count_put()
        return obstore.put(store, key, data)

    async def put_async(self, store: Any, key: str, data: bytes) -> Any:
        await asyncio.sleep(self.delay)
        self._count_put()
        return await obstore.put_async(store, key, data)

    def get(self, store: Any, key: str) -> Any:
        self.gets += 1
        return obstore.get(store, key)

    async def get_async(self, store: Any, key: str) -> Any:
        self.gets += 1
        return await obstore.get_async(store, key)


def _in_threads(n: int, call: Any) -> list[BaseException | None]:
    errors: list[BaseException | None] = [None] * n

    def run(i: int) -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_threads_storing_one_key_at_once_upload_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingObstore(delay=0.2)
    monkeypatch.setattr(objects, "obstore", fake)
    storage, upload = ObjectStorage(MemoryStore()), _upload(b"x" * 1000)
    assert _in_threads(8, lambda: storage.store_all([upload, upload])) == [None] * 8
    assert fake.puts == 1
    assert storage.cache.get(upload.ref.sha256) == upload.data


def test_a_thread_waiting_on_a_failed_upload_uploads_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingObstore(delay=0.2, failures=1)
    monkeypatch.setattr(objects, "obstore", fake)
    storage, upload = ObjectStorage(MemoryStore()), _upload(b"y" * 1000)
    errors = _in_threads(2, lambda: storage.store_all([upload]))
    failed = [e for e in errors if e is not None]
    assert len(failed) == 1 and isinstance(failed[0], ObjectStoreError)
    assert upload.ref.key in str(failed[0]) and "OSError: refused" in str(failed[0]) and "second line" not in str(failed[0])
    assert fake.puts == 2
    assert bytes(obstore.get(storage.store, upload.ref.key).bytes()) == upload.data


async def test_tasks_storing_one_key_at_once_upload_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingObstore(delay=0.05)
    monkeypatch.setattr(objects_async, "obstore", fake)
    storage, upload, other = AsyncObjectStorage(MemoryStore()), _upload(b"x" * 1000), _upload(b"z" * 10)
    await asyncio.gather(*(storage.store_all([upload, other]) for _ in range(8)))
    assert fake.puts == 2


async def test_a_task_waiting_on_a_failed_upload_uploads_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingObstore(delay=0.05, failures=1)
    monkeypatch.setattr(objects_async, "obstore", fake)
    storage, upload = AsyncObjectStorage(MemoryStore()), _upload(b"y" * 1000)
    results = await asyncio.gather(storage.store_all([upload]), storage.store_all([upload]), return_exceptions=True)
    assert [type(r) for r in results].count(ObjectStoreError) == 1 and results.count(None) == 1
    assert fake.puts == 2


def _check_reads(storage: Any, fake: CountingObstore, fetch: Any) -> None:
    good, bad, gone = _upload(b"g" * 100), _upload(b"b" * 100), _upload(b"m" * 100)
    obstore.put(storage.store, good.ref.key, good.data)
    obstore.put(storage.store, bad.ref.key, b"tampered")
    assert fetch([(good.ref, "a"), (good.ref, "b")]) == {good.ref.key: good.data}
    assert fetch([(good.ref, "a")]) == {good.ref.key: good.data}
    assert fake.gets == 1  # the second read came from the cache
    with pytest.raises(ObjectIntegrityError, match="does not match"):
        fetch([(bad.ref, "here")])
    with pytest.raises(ObjectIntegrityError, match="missing"):
        fetch([(gone.ref, "here")])


def test_sync_reads_are_verified_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingObstore()
    monkeypatch.setattr(objects, "obstore", fake)
    storage = ObjectStorage(MemoryStore())
    _check_reads(storage, fake, storage.fetch_all)


def test_async_reads_are_verified_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingObstore()
    monkeypatch.setattr(objects_async, "obstore", fake)
    storage = AsyncObjectStorage(MemoryStore())
    _check_reads(storage, fake, lambda wanted: asyncio.run(storage.fetch_all(wanted)))


# -- uploads alongside the statement -------------------------------------------------------


class GatedObstore(CountingObstore):
    """CountingObstore whose PUTs first wait for `gate` (at most 5 s, then fail): the test
    opens it from what must run while the upload is in flight."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__(failures=failures)
        self.gate = threading.Event()

    def put(self, store: Any, key: str, data: bytes) -> Any:
        if not self.gate.wait(5):
            raise OSError("the gate never opened")
        return super().put(store, key, data)

    async def put_async(self, store: Any, key: str, data: bytes) -> Any:
        for _ in range(500):
            if self.gate.is_set():
                return await super().put_async(store, key, data)
            await asyncio.sleep(0.01)
        raise OSError("the gate never opened")


def test_the_statement_runs_while_its_objects_upload_in_the_sync_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = GatedObstore()
    monkeypatch.setattr(objects, "obstore", fake)
    storage, upload = ObjectStorage(MemoryStore()), _upload(b"s" * 1000)

    def send() -> str:
        assert storage.cache.get(upload.ref.sha256) is None  # not confirmed yet
        fake.gate.set()  # the upload waits for this statement
        return "rows"

    assert storage.store_alongside([upload], send) == "rows"
    assert bytes(obstore.get(storage.store, upload.ref.key).bytes()) == upload.data  # stored before the result came back
    calls = []
    assert storage.store_alongside([upload], lambda: calls.append(threading.current_thread()) or "again") == "again"
    assert fake.puts == 1 and calls == [threading.current_thread()]  # confirmed: no upload, nothing alongside


async def test_the_statement_runs_while_its_objects_upload_in_the_async_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = GatedObstore()
    monkeypatch.setattr(objects_async, "obstore", fake)
    storage, upload = AsyncObjectStorage(MemoryStore()), _upload(b"a" * 1000)

    async def send() -> str:
        await asyncio.sleep(0)  # the upload task starts, and waits for the gate
        assert storage.cache.get(upload.ref.sha256) is None
        fake.gate.set()
        return "rows"

    assert await storage.store_alongside([upload], send) == "rows"
    assert bytes(obstore.get(storage.store, upload.ref.key).bytes()) == upload.data
    assert fake.puts == 1


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_failed_statement_still_waits_for_its_uploads_and_a_failed_upload_fails_the_call(
    twin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = GatedObstore(failures=1)
    fake.gate.set()
    monkeypatch.setattr(objects if twin == "sync" else objects_async, "obstore", fake)
    storage: Any = ObjectStorage(MemoryStore()) if twin == "sync" else AsyncObjectStorage(MemoryStore())
    refused, kept = _upload(b"r" * 1000), _upload(b"k" * 1000)

    def alongside(upload: Upload, send: Any) -> Any:
        if twin == "sync":
            return storage.store_alongside([upload], send)

        async def asend() -> Any:
            return send()

        return asyncio.run(storage.store_alongside([upload], asend))

    with pytest.raises(ObjectStoreError, match="OSError: refused"):  # the statement succeeded; the upload did not
        alongside(refused, lambda: "rows")

    def failing() -> None:
        raise ValueError("the statement failed")

    with pytest.raises(ValueError, match="the statement failed"):
        alongside(kept, failing)
    assert storage.cache.get(kept.ref.sha256) == kept.data  # the upload it overlapped finished, confirmed
    assert alongside(kept, lambda: "rows") == "rows" and fake.puts == 2


def test_the_sync_twin_uploads_the_objects_of_one_call_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    uploads = [_upload(bytes([i]) * 1000) for i in range(3)]
    together = threading.Barrier(len(uploads), timeout=5)  # broken unless the three PUTs overlap

    class Together(CountingObstore):
        def put(self, store: Any, key: str, data: bytes) -> Any:
            together.wait()
            return super().put(store, key, data)

    monkeypatch.setattr(objects, "obstore", Together())
    storage = ObjectStorage(MemoryStore())
    storage.store_all(uploads)
    assert all(bytes(obstore.get(storage.store, u.ref.key).bytes()) == u.data for u in uploads)


async def test_a_cancelled_upload_leaves_no_claim_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    started = asyncio.Event()

    class Stuck(CountingObstore):
        async def put_async(self, store: Any, key: str, data: bytes) -> Any:
            if not started.is_set():
                started.set()
                await asyncio.Event().wait()  # until cancelled
            return await super().put_async(store, key, data)

    fake = Stuck()
    monkeypatch.setattr(objects_async, "obstore", fake)
    storage, upload = AsyncObjectStorage(MemoryStore()), _upload(b"c" * 1000)
    first = asyncio.ensure_future(storage.store_all([upload]))
    await started.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(storage.store_all([upload]), 5)  # not waiting on the cancelled one's claim
    assert fake.puts == 1
