"""The object store behind offloaded values, through obstore: S3 and S3-compatible servers,
GCS, Azure, a local directory or memory, one API, native sync and async calls.

This is the only module that talks to the store. It uploads before a row references an
object, verifies every read against its SHA-256, and keeps two small in-process
memories that only save work: recently confirmed uploads and recently read payloads.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import obstore
from obstore.store import from_url

from .errors import ConfigError, ObjectStoreError, shown
from .core.offload import ObjectRef, Upload, is_object_key, verify

DEFAULT_CACHE_BYTES = 64 << 20
# A put skips re-uploading an object this process confirmed less than this long ago.
# gc() refuses a grace period shorter than it: such an object may be about to be
# referenced again without being rewritten (which would refresh its age).
DEFAULT_REUSE_WINDOW = timedelta(seconds=60)
# Applied to stores built from a URL: fail a call within about the database deadline.
DEFAULT_CLIENT_RETRY = {"max_retries": 3, "retry_timeout": timedelta(seconds=30)}


def open_store(object_store: Any, options: Mapping[str, Any] | None = None) -> Any:
    """A store from a URL (`s3://bucket/prefix`, `gs://`, `az://`, `file:///path`, `memory://`)
    and obstore options, or a ready obstore store as given."""
    if object_store is None:
        return None
    if not isinstance(object_store, str):
        if options:
            raise ConfigError("object_store_options apply to a URL; pass them to the store you built instead")
        return object_store
    kwargs = dict(options or {})
    if object_store.startswith("file://"):
        kwargs.setdefault("mkdir", True)
    elif not object_store.startswith("memory:"):
        kwargs.setdefault("retry_config", DEFAULT_CLIENT_RETRY)
    try:
        return from_url(object_store, **kwargs)
    except Exception as exc:
        raise ConfigError(f"object_store {shown(object_store)} cannot be opened: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _is_missing(exc: BaseException) -> bool:
    return isinstance(exc, (FileNotFoundError, obstore.exceptions.NotFoundError))


class PayloadCache:
    """A bounded LRU of verified payloads by SHA-256: reads of shared objects fetch once."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, sha256: str) -> bytes | None:
        with self._lock:
            data = self._items.get(sha256)
            if data is not None:
                self._items.move_to_end(sha256)
            return data

    def add(self, sha256: str, data: bytes) -> None:
        if len(data) > self.max_bytes // 4:  # one huge value must not flush everything else
            return
        with self._lock:
            if sha256 in self._items:
                return
            self._items[sha256] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old)


class ObjectStorage:
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
        self._inflight: dict[str, threading.Event | asyncio.Event] = {}
        self._lock = threading.Lock()

    # -- uploads -------------------------------------------------------------------------
    # LangGraph saves a task's writes and the next checkpoint concurrently, and both hold
    # the same value: an upload in flight is waited for, not repeated.

    def _claim(self, key: str) -> bool | threading.Event | asyncio.Event:
        """True: this call uploads `key`. False: confirmed recently, nothing to do.
        An event: another call is uploading it; wait, then claim again."""
        with self._lock:
            confirmed = self._confirmed.get(key)
            if confirmed is not None and time.monotonic() - confirmed < self.reuse_window.total_seconds():
                return False
            return self._inflight.get(key) or True

    def _begin(self, key: str, event: threading.Event | asyncio.Event) -> bool:
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
            f"so nothing was committed: {_first_line(exc)}"
        )

    # -- sync ----------------------------------------------------------------------------

    def store_all(self, uploads: Sequence[Upload]) -> None:
        """Upload and confirm every object before the caller writes rows that reference them."""
        for upload in self._distinct(uploads):
            self._store(upload)

    def _store(self, upload: Upload) -> None:
        while True:
            claim = self._claim(upload.ref.key)
            if claim is False:
                return
            if claim is not True:
                claim.wait()  # type: ignore[union-attr]  # then confirmed, or failed: claim again
                continue
            if not self._begin(upload.ref.key, threading.Event()):
                continue
            started = time.monotonic()
            try:
                obstore.put(self.store, upload.ref.key, upload.data)
            except Exception as exc:
                self._end(upload, None)
                raise self._store_error(upload, exc) from exc
            self._end(upload, started)
            return

    def fetch_all(self, wanted: Sequence[tuple[ObjectRef, str]]) -> dict[str, bytes]:
        """Each referenced payload by key, fetched once, verified against its SHA-256."""
        out: dict[str, bytes] = {}
        for ref, where in wanted:
            if ref.key in out:
                continue
            data = self.cache.get(ref.sha256)
            if data is None:
                try:
                    data = bytes(obstore.get(self.store, ref.key).bytes())
                except Exception as exc:
                    data = self._missing_or_raise(ref, where, exc)
                data = verify(ref, data, where)
                self.cache.add(ref.sha256, data)
            out[ref.key] = data
        return out

    def list_garbage_candidates(self, prefix: str, older_than: datetime) -> list[str]:
        """This prefix's payload keys last written before `older_than` (not the keys of a
        saver whose prefix lies below it)."""
        keys = []
        for batch in obstore.list(self.store, prefix + "/"):
            keys.extend(_old_keys(batch, older_than, prefix))
        return keys

    def still_old(self, keys: Sequence[str], older_than: datetime) -> list[str]:
        """The keys whose object was not rewritten since listing (a put may have refreshed one)."""
        out = []
        for key in keys:
            try:
                if obstore.head(self.store, key)["last_modified"] < older_than:
                    out.append(key)
            except Exception as exc:
                if not _is_missing(exc):
                    raise ObjectStoreError(f"gc: checking object {shown(key)} failed: {_first_line(exc)}") from exc
        return out

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            obstore.delete(self.store, list(keys))

    # -- async ---------------------------------------------------------------------------

    async def astore_all(self, uploads: Sequence[Upload]) -> None:
        pending = self._distinct(uploads)
        if len(pending) == 1:
            await self._astore(pending[0])
        elif pending:
            await asyncio.gather(*(self._astore(u) for u in pending))

    async def _astore(self, upload: Upload) -> None:
        while True:
            claim = self._claim(upload.ref.key)
            if claim is False:
                return
            if claim is not True:
                await claim.wait()  # type: ignore[union-attr]
                continue
            if not self._begin(upload.ref.key, asyncio.Event()):
                continue
            started = time.monotonic()
            try:
                await obstore.put_async(self.store, upload.ref.key, upload.data)
            except Exception as exc:
                self._end(upload, None)
                raise self._store_error(upload, exc) from exc
            self._end(upload, started)
            return

    async def afetch_all(self, wanted: Sequence[tuple[ObjectRef, str]]) -> dict[str, bytes]:
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

        await asyncio.gather(*(one(ref, where) for ref, where in missing.values()))
        return out

    async def alist_garbage_candidates(self, prefix: str, older_than: datetime) -> list[str]:
        keys = []
        async for batch in obstore.list(self.store, prefix + "/"):
            keys.extend(_old_keys(batch, older_than, prefix))
        return keys

    async def astill_old(self, keys: Sequence[str], older_than: datetime) -> list[str]:
        out = []
        for key in keys:
            try:
                if (await obstore.head_async(self.store, key))["last_modified"] < older_than:
                    out.append(key)
            except Exception as exc:
                if not _is_missing(exc):
                    raise ObjectStoreError(f"gc: checking object {shown(key)} failed: {_first_line(exc)}") from exc
        return out

    async def adelete(self, keys: Sequence[str]) -> None:
        if keys:
            await obstore.delete_async(self.store, list(keys))

    # -- shared --------------------------------------------------------------------------

    @staticmethod
    def _missing_or_raise(ref: ObjectRef, where: str, exc: BaseException) -> None:
        if _is_missing(exc):
            return None
        raise ObjectStoreError(f"{where}: reading object {shown(ref.key)} failed: {_first_line(exc)}") from exc


def _old_keys(batch: Iterable[Mapping[str, Any]], older_than: datetime, prefix: str) -> list[str]:
    return [meta["path"] for meta in batch if meta["last_modified"] < older_than and is_object_key(prefix, meta["path"])]


def gc_cutoff(grace_period: timedelta, reuse_window: timedelta) -> datetime:
    """Objects last written before this instant may be collected."""
    if grace_period < reuse_window:
        raise ConfigError(
            f"gc grace_period {grace_period} is shorter than the saver's object_reuse_window "
            f"{reuse_window}: an object a put is about to reference again could be deleted"
        )
    return datetime.now(timezone.utc) - grace_period
