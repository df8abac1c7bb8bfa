"""Opening an object store from a URL or instance, the payload cache, gc cutoffs.

What the two object storages (`objects_async.py` and its generated sync twin
`objects.py`) share and that has no sync or async flavour.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

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
    if unsigned_payload_fits(object_store, kwargs.get("config") or {}, os.environ):
        kwargs["config"] = {**(kwargs.get("config") or {}), "unsigned_payload": True}
    try:
        return from_url(object_store, **kwargs)
    except Exception as exc:
        raise ConfigError(f"object_store {shown(object_store)} cannot be opened: {first_line(exc)}") from exc


def unsigned_payload_fits(url: str, config: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """Whether an S3 store built from `url` and `config` should send payloads unsigned.

    S3's request signature covers the payload's SHA-256 unless told not to: ~0.5 ms of
    client CPU a MiB uploaded, on top of the SHA-256 that names each object (a 2 MB value:
    17.1 ms a PUT to the benchmark's server signed, 15.5 unsigned). The signature's hash
    only guards the bytes in transit; where the transport already does (TLS, or an
    endpoint on this machine's loopback) it is left out. Reads verify every object
    against its name's SHA-256 either way. A choice made in `config` or in the
    environment (AWS_UNSIGNED_PAYLOAD) stands, as does a plain-HTTP endpoint elsewhere."""
    if urlsplit(url).scheme.lower() not in ("s3", "s3a"):
        return False
    keys = {str(key).lower().removeprefix("aws_"): value for key, value in config.items()}
    if "unsigned_payload" in keys or "AWS_UNSIGNED_PAYLOAD" in environ:
        return False
    endpoint = keys.get("endpoint") or keys.get("endpoint_url") or environ.get("AWS_ENDPOINT") or environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return True  # AWS itself, over HTTPS
    parts = urlsplit(str(endpoint))
    if parts.scheme.lower() == "https":
        return True
    host = (parts.hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
