"""Opening an object store from a URL or instance, the payload cache, gc cutoffs.

What the two object storages (`objects_async.py` and its generated sync twin
`objects.py`) share and that has no sync or async flavour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import obstore
from obstore.store import from_url

from .errors import ConfigError, shown
from .core.offload import is_object_key

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
        raise ConfigError(f"object_store {shown(object_store)} cannot be opened: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    """The error's type and the first line of its message, for an error of ours to quote."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def is_missing(exc: BaseException) -> bool:
    """Whether a store call failed because the object is not there."""
    return isinstance(exc, (FileNotFoundError, obstore.exceptions.NotFoundError))


def old_keys(batch: Iterable[Mapping[str, Any]], older_than: datetime, prefix: str) -> list[str]:
    """The payload keys of `prefix` in a listing batch last written before `older_than`."""
    return [meta["path"] for meta in batch if meta["last_modified"] < older_than and is_object_key(prefix, meta["path"])]


def gc_cutoff(grace_period: timedelta, reuse_window: timedelta) -> datetime:
    """Objects last written before this instant may be collected."""
    if grace_period < reuse_window:
        raise ConfigError(
            f"gc grace_period {grace_period} is shorter than the saver's object_reuse_window "
            f"{reuse_window}: an object a put is about to reference again could be deleted"
        )
    return datetime.now(timezone.utc) - grace_period
