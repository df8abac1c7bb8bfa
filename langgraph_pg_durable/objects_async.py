# async:
"""AsyncObjectStorage: uploads, verified reads and garbage listing on one obstore store,
for the async saver, which calls it from its event loop only.

`objects.py`, the sync twin, is generated from this file (`python tools/async_to_sync.py`).
Together they are the only code that reads or writes objects: an object is uploaded and
confirmed before a row references it, every read is verified against its SHA-256, and two
small in-process memories only save work: recently confirmed uploads and recently read
payloads (`memory.PayloadCache`).
"""
# end
# sync:
# """ObjectStorage: uploads, verified reads and garbage listing on one obstore store,
# for the sync saver, which calls it from many threads at once.
#
# Together with `objects_async.py` (its source) the only code that reads or writes objects:
# an object is uploaded and confirmed before a row references it, every read is verified
# against its SHA-256, and two small in-process memories only save work: recently confirmed
# uploads and recently read payloads (`memory.PayloadCache`).
# """
# end

from __future__ import annotations

# async:
import asyncio
from collections.abc import Awaitable
from contextlib import nullcontext

# end
# sync:
# import threading
# from concurrent.futures import ThreadPoolExecutor, wait
# end
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import obstore

from .errors import ObjectStoreError, shown
from .core.offload import ObjectRef, Upload, verify
from .memory import PayloadCache
from .store import DEFAULT_CACHE_BYTES, DEFAULT_REUSE_WINDOW, first_line, is_missing, old_keys

T = TypeVar("T")
# What `store_alongside` runs while it uploads: a call that sends a statement.
# async:
Send = Callable[[], Awaitable[T]]
# end
# sync:
# Send = Callable[[], T]
# end
# sync:
# # Statements (and, apart, uploads) the sync saver runs alongside its callers' threads at once.
# WORKER_THREADS = 32
# end


class AsyncObjectStorage:
    """Uploads, verified reads and garbage listing on one obstore store."""

    def __init__(
        self,
        store: Any,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        reuse_window: timedelta = DEFAULT_REUSE_WINDOW,
    ) -> None:
        self.store = store
        self.cache = PayloadCache(cache_bytes)
        self.reuse_window = reuse_window
        self._confirmed: dict[str, float] = {}
        self._inflight: dict[str, asyncio.Event] = {}
        # async:
        # Claims run on the saver's event loop only and never await: nothing to lock.
        self._lock: Any = nullcontext()
        # end
        # sync:
        # # The sync saver's threads claim concurrently.
        # self._lock = threading.Lock()
        # # Where `store_alongside` sends the statement, and `store_all` uploads all but the first
        # # object. Two pools: an upload never queues behind a statement waiting for a row lock.
        # self._senders = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="lgpd-send")
        # self._uploaders = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="lgpd-upload")
        # end

    # -- uploads -------------------------------------------------------------------------
    # LangGraph saves a task's writes and the next checkpoint concurrently, and both hold
    # the same value: an upload in flight is waited for, not repeated.

    def confirmed(self, uploads: Sequence[Upload]) -> bool:
        """Whether every object was confirmed recently: a hint for how to send the statement
        (a claim under gc's lock, in `store_all` or `store_alongside`, decides)."""
        return all(self._claim(u.ref.key) is False for u in uploads)

    async def store_alongside(self, uploads: Sequence[Upload], send: Send[T]) -> T:
        """Upload `uploads` while `send()` runs (it sends, uncommitted, the statement that
        references them); its result once every object is confirmed, or the error of one
        that failed. Objects confirmed recently are not uploaded: then `send()` runs alone.
        When `send()` raises, the uploads it overlapped still finish first."""
        pending = [u for u in self._distinct(uploads) if self._claim(u.ref.key) is not False]
        if not pending:
            return await send()
        # async:
        uploading = asyncio.ensure_future(self.store_all(pending))
        try:
            result = await send()
        except BaseException:
            await asyncio.wait([uploading])
            if not uploading.cancelled():
                uploading.exception()  # retrieved: the statement's error is the one raised
            raise
        await uploading
        return result
        # end
        # sync:
        # # The statement goes to a worker, so that this thread starts the first upload at once.
        # sent = self._senders.submit(send)
        # try:
        #     self.store_all(pending)
        # finally:
        #     wait([sent])
        # return sent.result()
        # end

    async def store_all(self, uploads: Sequence[Upload]) -> None:
        """Upload and confirm every object before the caller writes rows that reference them."""
        # async:
        pending = self._distinct(uploads)
        if len(pending) == 1:
            await self._store(pending[0])
        elif pending:
            await asyncio.gather(*(self._store(u) for u in pending))
        # end
        # sync:
        # pending = self._distinct(uploads)
        # others = [self._uploaders.submit(self._store, u) for u in pending[1:]]
        # try:
        #     if pending:
        #         self._store(pending[0])
        # finally:
        #     wait(others)
        # for done in others:
        #     done.result()
        # end

    async def _store(self, upload: Upload) -> None:
        while True:
            claim = self._claim(upload.ref.key)
            if claim is False:
                return
            if claim is not True:
                await claim.wait()  # then confirmed, or failed: claim again
                continue
            if not self._begin(upload.ref.key, asyncio.Event()):
                continue
            started = time.monotonic()
            try:
                await obstore.put_async(self.store, upload.ref.key, upload.data)
            except BaseException as exc:
                self._end(upload, None)  # cancelled too: a waiter must not wait forever
                if isinstance(exc, Exception):
                    raise self._store_error(upload, exc) from exc
                raise
            self._end(upload, started)
            return

    def _claim(self, key: str) -> bool | asyncio.Event:
        """True: this call uploads `key`. False: confirmed recently, nothing to do.
        An event: another call is uploading it; wait, then claim again."""
        with self._lock:
            confirmed = self._confirmed.get(key)
            if confirmed is not None and time.monotonic() - confirmed < self.reuse_window.total_seconds():
                return False
            return self._inflight.get(key) or True

    def _begin(self, key: str, event: asyncio.Event) -> bool:
        with self._lock:
            if key in self._inflight:
                return False
            self._inflight[key] = event
            return True

    def _end(self, upload: Upload, started: float | None) -> None:
        """Forget the upload in flight; remember it as confirmed when it succeeded."""
        with self._lock:
            event = self._inflight.pop(upload.ref.key)
            if started is not None:
                self._confirmed[upload.ref.key] = started  # the object's age counts from before the PUT
                if len(self._confirmed) > 10_000:
                    horizon = time.monotonic() - self.reuse_window.total_seconds()
                    self._confirmed = {k: t for k, t in self._confirmed.items() if t >= horizon}
        if started is not None:
            self.cache.add(upload.ref.sha256, upload.data)
        event.set()

    @staticmethod
    def _distinct(uploads: Sequence[Upload]) -> list[Upload]:
        return list({u.ref.key: u for u in reversed(uploads)}.values())

    @staticmethod
    def _store_error(upload: Upload, exc: BaseException) -> ObjectStoreError:
        return ObjectStoreError(
            f"{upload.where}: storing object {shown(upload.ref.key)} ({upload.ref.size:,} bytes) failed, "
            f"so nothing was committed: {first_line(exc)}"
        )

    # -- reads -----------------------------------------------------------------------------

    async def fetch_all(self, wanted: Sequence[tuple[ObjectRef, str]]) -> dict[str, bytes]:
        """Each referenced payload by key, fetched once, verified against its SHA-256."""
        out: dict[str, bytes] = {}
        missing: dict[str, tuple[ObjectRef, str]] = {}
        for ref, where in wanted:
            if ref.key in out or ref.key in missing:
                continue
            data = self.cache.get(ref.sha256)
            if data is None:
                missing[ref.key] = (ref, where)
            else:
                out[ref.key] = data

        async def one(ref: ObjectRef, where: str) -> None:
            try:
                result = await obstore.get_async(self.store, ref.key)
                data: bytes | None = bytes(await result.bytes_async())
            except Exception as exc:
                data = self._missing_or_raise(ref, where, exc)
            out[ref.key] = verify(ref, data, where)
            self.cache.add(ref.sha256, out[ref.key])

        # async:
        await asyncio.gather(*(one(ref, where) for ref, where in missing.values()))
        # end
        # sync:
        # for ref, where in missing.values():
        #     one(ref, where)
        # end
        return out

    @staticmethod
    def _missing_or_raise(ref: ObjectRef, where: str, exc: BaseException) -> None:
        if is_missing(exc):
            return None
        raise ObjectStoreError(f"{where}: reading object {shown(ref.key)} failed: {first_line(exc)}") from exc

    async def probe(self, prefix: str) -> str:
        """Whether the store answers: 'reachable', or why not (the first line of its error)."""
        try:
            async for _batch in obstore.list(self.store, prefix + "/", chunk_size=1):
                break
        except Exception as exc:
            return f"unreachable: {first_line(exc)}"
        return "reachable"

    # -- garbage ---------------------------------------------------------------------------

    async def list_garbage_candidates(self, prefix: str, older_than: datetime) -> list[str]:
        """This prefix's payload keys last written before `older_than` (not the keys of a
        saver whose prefix lies below it)."""
        keys = []
        async for batch in obstore.list(self.store, prefix + "/"):
            keys.extend(old_keys(batch, older_than, prefix))
        return keys

    async def still_old(self, keys: Sequence[str], older_than: datetime) -> list[str]:
        """The keys whose object was not rewritten since listing (a put may have refreshed one)."""
        out = []
        for key in keys:
            try:
                if (await obstore.head_async(self.store, key))["last_modified"] < older_than:
                    out.append(key)
            except Exception as exc:
                if not is_missing(exc):
                    raise ObjectStoreError(f"gc: checking object {shown(key)} failed: {first_line(exc)}") from exc
        return out

    async def delete(self, keys: Sequence[str]) -> None:
        if keys:
            await obstore.delete_async(self.store, list(keys))
