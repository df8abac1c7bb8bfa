"""Values to bytes and back: the serializer's calls with errors that name what failed, the
scalars a checkpoint row keeps inline, JSON for jsonb columns, and list-item compression.

Every layer that serializes (encode, lists, metadata) takes a `Codec`, not the serializer
and callbacks around it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import operator
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import orjson
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..errors import DeserializationError, DurableCheckpointError, SerializationError, Where, caused, named, shown
from .chunks import Chunked, as_chunked
from .keys import require_text
from .offload import MAX_INLINE_BYTES
from .safe_serde import BlockedTypeError, DurableSerializer, PlaintextRefusedError, checked_loads, checked_msgpack_loads, msgpack_loader

T = TypeVar("T")
StoredItem = tuple[str, bytes]  # (serializer type, bytes) of one list item, decompressed


def dump_json(document: Any) -> str:
    """JSON text for a jsonb parameter; orjson where it can, json for what it refuses (huge ints)."""
    try:
        return orjson.dumps(document).decode()
    except TypeError:
        return json.dumps(document, separators=(",", ":"))


def dump_json_bytes(document: Any) -> bytes:
    """`dump_json`'s text as UTF-8, without the trip through str (its length is its size)."""
    try:
        return orjson.dumps(document)
    except TypeError:
        return json.dumps(document, separators=(",", ":")).encode()


def load_json(text: str | None) -> Any:
    """A jsonb column fetched as text (the reads cast them: orjson beats the driver's loader)."""
    return None if text is None else orjson.loads(text)


INLINE_MAX_CHARS: Final = 256  # a str value up to this long is kept in the checkpoint row


def is_inline(value: Any) -> bool:
    """Whether a channel value lives in its checkpoint's row rather than a channel_values row.

    Only scalars (None, bool, int, float, short str), by type alone: a put keeps an
    unchanged channel's value where an earlier put stored it, so the choice must not
    depend on anything but the value (not on a saver's settings).
    """
    return value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= INLINE_MAX_CHARS)


def digest(type_: str, data: bytes) -> bytes:
    """What identifies an item's serialized form (a delta recognises stored items by it)."""
    return hashlib.blake2b(type_.encode() + b"\x00" + data, digest_size=16).digest()


def decode_failure(type_: Any, exc: BaseException) -> str:
    """What went wrong decoding a stored value of `type_`, in a line (not the bytes)."""
    if isinstance(exc, (BlockedTypeError, PlaintextRefusedError)):
        return f"the stored value {exc}"
    lines = str(exc).strip().splitlines()
    detail = lines[0][:200] if lines else ""
    return f"the stored value (type {shown(type_, 60)}) cannot be decoded: {type(exc).__name__}: {detail}".rstrip(": ")


# The scalars whose serialized form a Codec keeps, by (type, value) (`dump_inline`, `dump`):
# not floats, since -0.0 == 0.0 (and hash alike) and they serialize apart; how many at most.
_KEPT_SCALARS: Final = frozenset({type(None), bool, int, str})
KEPT_INLINE_FORMS: Final = 256


class Codec:
    """The saver's serializer, as every layer below the shells uses it."""

    __slots__ = ("serde", "plain", "_msgpack", "_inline_forms", "_scalar_forms")

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde
        # Digests need a deterministic form: under encryption the inner serializer's, since
        # ciphertext differs on every call (the stored bytes are still encrypted).
        self.plain: SerializerProtocol = getattr(serde, "serde", serde) if isinstance(serde, EncryptedSerializer) else serde
        self._msgpack = msgpack_loader(serde)
        # The stored forms of inline scalars, for LangGraph's serializer and ours, which make
        # the same bytes of the same value every time (a step counter is put again at
        # every checkpoint); none for another serializer, whose output may not be the same
        # twice (an EncryptedSerializer's never is).
        deterministic = type(serde) in (JsonPlusSerializer, DurableSerializer)
        self._inline_forms: dict[tuple[type, Any], list[str]] | None = {} if deterministic else None
        # And of the same scalars as a write or a value stores them (a task writes its step
        # counter, its routing flags).
        self._scalar_forms: dict[tuple[type, Any], tuple[str, bytes]] | None = {} if deterministic else None

    @property
    def encrypted(self) -> bool:
        return self.plain is not self.serde

    def dump(self, value: Any, *, channel: str, where: Where) -> tuple[str, bytes]:
        """Serialize one value, naming the channel when the serializer refuses it."""
        forms = self._scalar_forms
        kind = type(value)
        if forms is None or kind not in _KEPT_SCALARS or (kind is str and len(value) > INLINE_MAX_CHARS):
            return _dump(self.serde, value, channel=channel, where=where)
        key = (kind, value)
        stored = forms.get(key)
        return stored if stored is not None else _keep(forms, key, _dump(self.serde, value, channel=channel, where=where))

    def load(self, type_: Any, data: Any, *, where: Where) -> Any:
        """Deserialize one stored value; any failure (a wrong key, foreign or corrupt bytes, a
        type the serializer refuses) is a DeserializationError naming `where`."""
        try:
            return checked_loads(self.serde, (type_, data if data is not None else b""))
        except Exception as exc:
            raise caused(DeserializationError(f"{named(where)}: {decode_failure(type_, exc)}"), exc) from exc

    def load_each(self, raw: Sequence[tuple[str, bytes | None]], where: Callable[[int], Where]) -> list[Any]:
        """Deserialize stored values in order, each as `load` would: when all are plain
        msgpack of the default serializer, in one C call (framed as `_framed` frames list
        items); else, and when that call fails, one by one, a failure naming `where(i)`. A
        checkpoint's pending writes: one call instead of one a write (and its checks)."""
        if self._msgpack is not None and raw and all(type_ == "msgpack" and data for type_, data in raw):
            try:
                return self._framed(len(raw), map(_DATA, raw))
            except Exception:  # one by one, to raise the error of the one that fails
                pass
        return [self.load(type_, data, where=where(i)) for i, (type_, data) in enumerate(raw)]

    def dump_inline(self, values: Mapping[str, Any], *, where: Where) -> dict[str, list[str]]:
        """The scalar channel values a checkpoint row keeps: channel -> [type, base64 of the bytes].

        A row per small value (a step counter, a routing flag) cost more than the value;
        the serializer still makes the bytes, so an EncryptedSerializer covers them.
        """
        out = {}
        forms = self._inline_forms
        for channel, value in values.items():
            if is_inline(value):
                key = (type(value), value)
                kept = forms is not None and key[0] in _KEPT_SCALARS
                stored = forms.get(key) if kept and forms is not None else None
                if stored is None:
                    type_, data = self.dump(value, channel=channel, where=where)
                    stored = [type_, base64.b64encode(data).decode("ascii")]
                    if kept and forms is not None:
                        _keep(forms, key, stored)
                # (Shared by the checkpoints that hold the value: a row's JSON is only ever read.)
                out[require_text(channel, "channel")] = stored
        return out

    def load_inline(self, stored: Any, *, where: str) -> dict[str, Any]:
        """The values `dump_inline` kept."""
        if not stored:
            return {}
        try:
            pairs = [(ch, type_, base64.b64decode(data, validate=True)) for ch, (type_, data) in stored.items()]
        except Exception as exc:
            malformed = DeserializationError(f"{where}: the scalar channel values in its row are malformed ({type(exc).__name__})")
            raise caused(malformed, exc) from exc
        try:
            # One C call for them all (see _load_items): scalars, of one type as a rule.
            values = self._load_items([(type_, data) for _, type_, data in pairs])
        except Exception:  # one at a time, naming the one that fails
            values = [self.load(type_, data, where=f"{where}, channel {shown(ch)}") for ch, type_, data in pairs]
        return dict(zip([ch for ch, _, _ in pairs], values))

    def dump_items(
        self, values: Sequence[Any], *, channel: str, where: Where, known: Sequence[bytes] = ()
    ) -> tuple[Chunked[bytes], Callable[[int], tuple[str, bytes]]]:
        """Each item's digest, and a function giving the (type, bytes) to store for item i
        (serialized again only under encryption).

        `known` are the digests of the first items, already stored: those items are not
        serialized (the function still serializes one if asked)."""
        start = len(known)
        plain = [_dump(self.plain, values[i], channel=channel, where=where) for i in range(start, len(values))]
        digests = as_chunked(known).extended(digest(t, d) for t, d in plain)
        serde = self.serde
        if not self.encrypted:

            def stored_form(i: int) -> tuple[str, bytes]:
                return plain[i - start] if i >= start else _dump(serde, values[i], channel=channel, where=where)

            return digests, stored_form
        return digests, lambda i: _dump(serde, values[i], channel=channel, where=where)

    def load_items(self, raw: Sequence[tuple[str, bytes | None]], *, where: Where) -> list[Any]:
        """Decode list items in order; a failure is a DeserializationError naming `where`."""
        with _item_errors(where):
            return self._load_items(raw)

    def load_spans(self, pieces: Sequence[tuple[str, bytes, int]], *, where: Where) -> list[Any] | None:
        """Decode list items given as pieces of (type, the bytes of `n` items end to end,
        n), in order, in one C call as `_load_items` frames them; None (nothing decoded)
        unless every piece is plain msgpack of the default serializer."""
        if self._msgpack is None or any(type_ != "msgpack" for type_, _, _ in pieces):
            return None
        with _item_errors(where):
            return self._framed(sum(n for _, _, n in pieces), [data for _, data, _ in pieces])

    def _load_items(self, raw: Sequence[tuple[str, bytes | None]]) -> list[Any]:
        """Plain msgpack items of the default serializer decode in one C call, framed as
        one msgpack array (the bytes a whole list would have) ending in a random sentinel:
        an item whose bytes are not exactly one object shifts the sentinel, and is refused
        (else it would read as another item). Any other item decodes on its own."""
        types = set(map(_TYPE, raw))
        if any(is_compressed(t) for t in types):
            raw = [unpacked(t, d) for t, d in raw]
            types = set(map(_TYPE, raw))
        if self._msgpack is None or types != {"msgpack"}:
            return [checked_loads(self.serde, (type_, data or b"")) for type_, data in raw]
        # (An empty item drops out of the frame, whose count then refuses it.)
        return self._framed(len(raw), filter(None, map(_DATA, raw)))

    def _framed(self, count: int, parts: Iterable[bytes]) -> list[Any]:
        """`count` msgpack items, their bytes end to end in `parts`, decoded in one C call:
        framed as one msgpack array (the bytes a whole list would have) ending in a random
        sentinel, so bytes that are not exactly `count` objects shift the sentinel and are
        refused (else they would read as other items)."""
        count += 1
        if count >= 1 << 32:
            raise ValueError(f"{count - 1:,} items are more than one list holds")
        header = (
            bytes([0x90 | count])
            if count < 16
            else (b"\xdc" + count.to_bytes(2, "big") if count < 1 << 16 else b"\xdd" + count.to_bytes(4, "big"))
        )
        framed = b"".join((header, *parts, _SENTINEL))
        assert self._msgpack is not None
        values = checked_msgpack_loads(self._msgpack, framed, self.serde)
        if not isinstance(values, list) or len(values) != count or values[-1] != _SENTINEL_VALUE:
            raise ValueError("an item's bytes are not exactly one msgpack object (it would read as another)")
        values.pop()
        return values


@contextlib.contextmanager
def _item_errors(where: Where) -> Iterator[None]:
    """A failure to decode list items as a DeserializationError naming `where`."""
    try:
        yield
    except DurableCheckpointError:
        raise
    except (BlockedTypeError, PlaintextRefusedError) as exc:
        raise caused(DeserializationError(f"{named(where)}: a stored list item {exc}"), exc) from exc
    except Exception as exc:
        raise caused(
            DeserializationError(f"{named(where)}: a stored list item cannot be decoded ({type(exc).__name__}: {str(exc).strip()[:200]})"),
            exc,
        ) from exc


_TYPE: Final = operator.itemgetter(0)
_DATA: Final = operator.itemgetter(1)
# Ends the frame of a batch decode; random per process, so no stored bytes can forge it.
_SENTINEL_VALUE: Final = os.urandom(16)
_SENTINEL: Final = b"\xc4\x10" + _SENTINEL_VALUE


def _keep(forms: dict[tuple[type, Any], T], key: tuple[type, Any], form: T) -> T:
    """Keep a scalar's serialized `form` in `forms` (emptied once it holds KEPT_INLINE_FORMS)."""
    if len(forms) >= KEPT_INLINE_FORMS:
        forms.clear()
    forms[key] = form
    return form


def _dump(serde: SerializerProtocol, value: Any, *, channel: str, where: Where) -> tuple[str, bytes]:
    try:
        return serde.dumps_typed(value)
    except Exception as exc:
        raise caused(
            SerializationError(f"cannot serialize the value of channel {shown(channel)} ({named(where)}): {type(exc).__name__}: {exc}"),
            exc,
        ) from exc


# -- list items as stored -------------------------------------------------------------------

# Postgres compresses a row's values only once the row passes ~2 KB (TOAST), and an item
# has a row of its own: items from 1 KiB up are compressed here, when that saves a tenth.
COMPRESS_MIN_BYTES: Final = 1024
# Appended to the serializer's type of a compressed item: the bytes are the item's size
# (4 bytes, big-endian) then its zlib stream, so a read inflates exactly that much.
COMPRESSED: Final = "+zlibn"
LEGACY_COMPRESSED: Final = "+zlib"  # items written before the size was stored: the zlib stream alone
MAX_ITEM_BYTES: Final = MAX_INLINE_BYTES  # no item inflates past what a row could hold
ZLIB_MAX_RATIO: Final = 1032  # deflate's own bound: no stream inflates more than this


def is_compressed(type_: object) -> bool:
    return isinstance(type_, str) and type_.endswith((COMPRESSED, LEGACY_COMPRESSED))


# Up to this many bytes an item is deflated with a 16 KiB window and an 8,192-entry hash:
# zlib.compress sets up ~256 KiB of state whatever the input, past glibc's mmap threshold
# (128 KiB), so each call could map, fault in and unmap fresh pages (a 1 KiB item took up
# to 52 us, against 4 this way; 48 k fewer instructions a step of a plain list of words).
# Below 16 KiB the smaller tables find the same matches: the same size out, give or take
# 0.2 % on text, JSON, msgpack and base64. The stream is plain zlib: any reader inflates it.
SMALL_DEFLATE_BYTES: Final = 16 << 10


def _deflated(data: bytes) -> bytes:
    """`data` as one zlib stream, at level 1."""
    if len(data) > SMALL_DEFLATE_BYTES:
        return zlib.compress(data, 1)
    deflater = zlib.compressobj(1, zlib.DEFLATED, 14, 6)
    return deflater.compress(data) + deflater.flush()


def packed(type_: str, data: bytes) -> tuple[str, bytes]:
    """An item's bytes as stored: compressed when that pays."""
    if len(data) >= COMPRESS_MIN_BYTES:
        smaller = _deflated(data)
        if len(smaller) * 10 <= len(data) * 9:
            return type_ + COMPRESSED, len(data).to_bytes(4, "big") + smaller
    return type_, data


def unpacked(type_: str, data: bytes | None) -> tuple[str, bytes]:
    """The serializer's type and bytes of an item as stored; raises ValueError for a
    compressed item that does not inflate to exactly its stated size (nothing read from
    the row sizes an allocation past that bound)."""
    data = data or b""
    if type_.endswith(COMPRESSED):
        if len(data) < 4:
            raise ValueError("a compressed item is shorter than its size header")
        size = int.from_bytes(data[:4], "big")
        if size > MAX_ITEM_BYTES:
            raise ValueError(f"a compressed item states a size of {size:,} bytes, past {MAX_ITEM_BYTES:,}")
        return type_[: -len(COMPRESSED)], _inflate(data[4:], size, exact=True)
    if type_.endswith(LEGACY_COMPRESSED):
        bound = min(MAX_ITEM_BYTES, len(data) * ZLIB_MAX_RATIO)
        return type_[: -len(LEGACY_COMPRESSED)], _inflate(data, bound, exact=False)
    return type_, data


def unpacked_item(type_: str, data: bytes | None, where: Callable[[], str]) -> StoredItem:
    """`unpacked`, with a failure named by `where()` (thread, channel, version, item)."""
    try:
        return unpacked(type_, data)
    except ValueError as exc:
        raise DeserializationError(f"{where()}: {exc}") from None


def _inflate(stream: bytes, limit: int, *, exact: bool) -> bytes:
    """One whole zlib stream inflated to at most `limit` bytes (exactly `limit` with `exact`)."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(stream, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"a compressed item does not inflate: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail or inflater.unused_data or not inflater.eof:
        raise ValueError("a compressed item inflates past its size, or has bytes after its stream")
    if exact and len(out) != limit:
        raise ValueError(f"a compressed item inflates to {len(out):,} bytes, not the {limit:,} it states")
    return out
