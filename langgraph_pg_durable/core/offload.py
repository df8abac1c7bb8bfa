"""Sans-I/O placement of serialized values: inline in the row, or a content-addressed object.

A value whose serialized form exceeds the threshold is stored once in the object store
under a key derived from its SHA-256; the row keeps that key, the hash and the size.
A read declares where its rows keep the reference (`RefColumns`): `attach` puts the
fetched bytes in the value column so the row decoders see inline data either way.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ConfigError, ObjectIntegrityError, SerializationError, Where, named, shown

DEFAULT_THRESHOLD: Final = 1 << 20  # 1 MiB
# Without an object store a value stays inline; PostgreSQL caps a field (and the bytea[]
# array a put sends) at 1 GB, and reading one back needs as much again in one piece.
MAX_INLINE_BYTES: Final = 256 << 20


@dataclass(slots=True)  # made per item or list row read or written: not frozen (see core.plan.Query)
class ObjectRef:
    """Where an offloaded value lives and what it must hash to."""

    key: str
    sha256: str
    size: int


@dataclass(slots=True)  # made per item or list row read or written: not frozen (see core.plan.Query)
class Upload:
    """An object a statement will reference: stored and confirmed before the statement runs."""

    ref: ObjectRef
    data: bytes
    where: str


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Placement:
    """How a saver places values: `threshold` 0 keeps every value inline. `sha256` names a
    payload (the saver's memory.RecentDigests: a value that is its task's write, the very
    same bytes, is hashed once)."""

    threshold: int = DEFAULT_THRESHOLD
    prefix: str = "objects"
    enabled: bool = True  # False: no object store configured
    max_inline: int = MAX_INLINE_BYTES
    sha256: Callable[[bytes], str] = field(default=sha256_hex, compare=False)

    @functools.cached_property
    def inline_up_to(self) -> int:
        """The size up to which `place` keeps any value inline (no object, no error)."""
        return min(self.threshold, self.max_inline) if self.enabled and self.threshold > 0 else self.max_inline

    def place_named(self, data: bytes, name: Callable[..., str], *parts: Any) -> tuple[bytes | None, ObjectRef | None]:
        """`place`, the value's name (`name(*parts)`, for a reference's upload or an error)
        made only for a value that does not stay inline: most values, every step, do."""
        if len(data) <= self.inline_up_to:
            return data, None
        return self.place(data, where=functools.partial(name, *parts))

    def place(self, data: bytes, *, where: Where) -> tuple[bytes | None, ObjectRef | None]:
        """(inline bytes, None) or (None, reference) for one serialized value."""
        size = len(data)
        if self.enabled and self.threshold > 0 and size > self.threshold:
            sha = self.sha256(data)
            return None, ObjectRef(object_key(self.prefix, sha), sha, size)
        if size > self.max_inline:
            fix = (
                f"set offload_threshold to at most {self.max_inline:,} (0 turns offload off)"
                if self.enabled
                else "pass object_store= (e.g. 's3://bucket/prefix' or 'file:///path')"
            )
            raise SerializationError(
                f"{named(where)} serializes to {size:,} bytes; values over {self.max_inline:,} bytes cannot stay in a PostgreSQL row: {fix}"
            )
        return data, None


_PREFIX_SEGMENT: Final = re.compile(r"[A-Za-z0-9_.-]+")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")


def validate_prefix(prefix: object) -> str:
    """An object-key prefix: '/'-separated segments of letters, digits, '_', '.' and '-'."""
    if not isinstance(prefix, str) or not all(
        _PREFIX_SEGMENT.fullmatch(segment) and segment not in (".", "..") for segment in prefix.split("/")
    ):
        raise ConfigError(
            f"object_prefix {shown(prefix)} is not a key prefix: use '/'-separated segments of "
            "letters, digits, '_', '.' and '-' (no empty, '.' or '..' segment)"
        )
    return prefix


def object_key(prefix: str, sha256: str) -> str:
    """The content address of a payload: identical bytes share one object."""
    return f"{prefix}/{sha256[:2]}/{sha256}"


def is_object_key(prefix: str, key: str) -> bool:
    """Whether `key` is one this prefix gives a payload: `{prefix}/ab/abc...` exactly.

    A key of a saver whose prefix lies below this one (`{prefix}/sub/ab/abc...`) is not.
    """
    head, _, sha256 = key.rpartition("/")
    return bool(_SHA256.fullmatch(sha256)) and head == f"{prefix}/{sha256[:2]}"


def check_reference(prefix: str, ref: ObjectRef, where: str) -> ObjectRef:
    """A reference read from a row, if it is one this saver would write: the key it derives
    from its prefix and the digest, and a plausible size. Nothing else is fetched."""
    valid = (
        isinstance(ref.sha256, str)
        and _SHA256.fullmatch(ref.sha256) is not None
        and isinstance(ref.size, int)
        and 0 <= ref.size
        and ref.key == object_key(prefix, ref.sha256)
    )
    if not valid:
        raise ObjectIntegrityError(
            f"{where}: the row references object {shown(ref.key)} with digest {shown(ref.sha256)}, "
            f"which is not a reference this saver writes under prefix {shown(prefix)}; nothing was fetched"
        )
    return ref


def verify(ref: ObjectRef, data: bytes | None, where: str) -> bytes:
    """The payload if it is the one the row references; else an error naming what is at fault
    (not the stored object's size or bytes: they may be another's)."""
    if data is None:
        raise ObjectIntegrityError(f"{where}: object {shown(ref.key)} is missing from the object store")
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ObjectIntegrityError(f"{where}: object {shown(ref.key)} does not match its reference's size and SHA-256")
    return data


# -- rows as read ------------------------------------------------------------------------


@dataclass(frozen=True)
class RefColumns:
    """Where a result's rows keep a value and the reference to it (declared beside the SQL)."""

    value: int
    object_key: int
    object_sha256: int
    object_size: int


def references(rows: Sequence[Sequence[Any]], columns: RefColumns) -> list[tuple[int, ObjectRef]]:
    """(row index, reference) of each fetched row whose value is offloaded."""
    key, sha, size = columns.object_key, columns.object_sha256, columns.object_size
    return [(i, ObjectRef(row[key], row[sha], row[size])) for i, row in enumerate(rows) if row[key] is not None]


def attach(rows: Sequence[Sequence[Any]], payloads: Mapping[str, bytes], columns: RefColumns) -> Sequence[Sequence[Any]]:
    """Rows with each offloaded value's bytes in place of its NULL value column; rows without
    a reference are passed through untouched, so a result with none costs nothing."""
    if not payloads:
        return rows
    key, value = columns.object_key, columns.value
    out = []
    for row in rows:
        if row[key] is None:
            out.append(row)
        else:
            filled = list(row)
            filled[value] = payloads[row[key]]
            out.append(tuple(filled))
    return out
