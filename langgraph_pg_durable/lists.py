"""Sans-I/O delta layout of list channels: a version stores what it appended, not the list again.

Each item of a list channel is serialized on its own and stored once per thread in
`channel_items`, under the version that introduced it (version, idx). A version's row
in `channel_values` describes its list as segments, runs of items (version, start,
count), and is one of:
- a snapshot: its segments describe the whole list (`list_chain` empty);
- a delta: its segments are what it appended; `list_chain` names the snapshot and the
  deltas before it, oldest first, at most `snapshot_every - 1` rows.
The list is the concatenation of the segments of its chain, then its own. A snapshot is
written every `snapshot_every` versions and whenever a change is not a pure append.

A new version extends the version its parent checkpoint holds, known from an in-process
memory (`ListMemory`); when it has nothing, a snapshot is written. Correctness never
depends on it: the rows alone describe every value.

A pending write to a channel in this layout stores its items the same way, under a
write key of its own (`write_items`), and its row in `checkpoint_writes` only names
them; the next version's delta then uses those items instead of storing them again.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import zlib
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from .errors import DeserializationError, DurableCheckpointError, ListIntegrityError, shown
from .safe_serde import BlockedTypeError, PlaintextRefusedError, checked_loads
from .msgpack_frame import is_one_object
from .offload import MAX_INLINE_BYTES, ObjectRef, Placement, Upload

T = TypeVar("T")

WRITE_KEY_PREFIX = "~"  # write keys never look like versions, which start with a digit

LIST_TYPE = "langgraph-pg-durable/list-v1"
WRITE_ITEMS_TYPE = "langgraph-pg-durable/write-items-v1"  # a pending write whose items are in channel_items
CHAIN_SEPARATOR = "\x1f"  # joins a chain's versions into one text parameter
DEFAULT_SNAPSHOT_EVERY = 16

Segment = tuple[str, int, int]  # version whose items these are, first idx, count
RawItems = dict[int, tuple[str, bytes]]  # idx -> (serializer type, bytes) of one version's items
Location = tuple[str, int]  # version, idx


class ListState:
    """What a writer needs to know of a stored list version to append to it.

    A state read back from the database keeps the items' stored bytes and digests them
    only if a put ever extends it: most reads are never followed by a put on them.
    """

    __slots__ = ("version", "chain", "locations", "_digests", "_raw", "_item_versions")

    def __init__(
        self,
        version: str,
        chain: tuple[str, ...],
        digests: tuple[bytes, ...] | None,
        locations: tuple[Location, ...],
        raw: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        self.version = version
        self.chain = chain  # the rows before this one, snapshot first; () for a snapshot
        self.locations = locations  # where each item is stored, in list order
        self._digests = digests
        self._raw = raw
        self._item_versions: frozenset[str] | None = None

    @property
    def item_versions(self) -> frozenset[str]:
        """The versions (and write keys) whose items the list uses."""
        if self._item_versions is None:
            self._item_versions = frozenset(location[0] for location in self.locations)
        return self._item_versions

    @property
    def digests(self) -> tuple[bytes, ...]:
        """Of each item's serialized form, in list order."""
        if self._digests is None:
            self._digests = tuple(digest(*unpacked(t, d)) for t, d in self._raw or ())
            self._raw = None
        return self._digests


@dataclass(frozen=True)
class ItemRow:
    channel: str
    version: str
    idx: int
    type: str
    data: bytes | None
    ref: ObjectRef | None


@dataclass(frozen=True)
class ListRow:
    """The channel_values fields of a list version, and the items it introduces."""

    value: bytes  # orjson of {"n": counts} or {"s": segments} (see `list_body`)
    chain: tuple[str, ...]
    item_versions: tuple[str, ...]
    items: list[ItemRow]
    uploads: list[Upload]
    state: ListState
    needs: tuple[str, ...]  # stored versions of the channel it relies on (must still exist)
    item_needs: tuple[str, ...] = ()  # write keys whose stored items it uses (must still exist)


def digest(type_: str, data: bytes) -> bytes:
    return hashlib.blake2b(type_.encode() + b"\x00" + data, digest_size=16).digest()


# Postgres compresses a row's values only once the row passes ~2 KB (TOAST), and an item
# has a row of its own: items from 1 KiB up are compressed here, when that saves a tenth.
COMPRESS_MIN_BYTES = 1024
# Appended to the serializer's type of a compressed item: the bytes are the item's size
# (4 bytes, big-endian) then its zlib stream, so a read inflates exactly that much.
COMPRESSED = "+zlibn"
LEGACY_COMPRESSED = "+zlib"  # items written before the size was stored: the zlib stream alone
MAX_ITEM_BYTES = MAX_INLINE_BYTES  # no item inflates past what a row could hold
ZLIB_MAX_RATIO = 1032  # deflate's own bound: no stream inflates more than this


def is_compressed(type_: str) -> bool:
    return type_.endswith((COMPRESSED, LEGACY_COMPRESSED))


def packed(type_: str, data: bytes) -> tuple[str, bytes]:
    """An item's bytes as stored: compressed when that pays."""
    if len(data) >= COMPRESS_MIN_BYTES:
        smaller = zlib.compress(data, 1)
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


def unpacked_item(type_: str, data: bytes | None, where: Any) -> tuple[str, bytes]:
    """`unpacked`, with a failure named by `where()` (thread, channel, version, item)."""
    try:
        return unpacked(type_, data)
    except ValueError as exc:
        raise DeserializationError(f"{where()}: {exc}") from None


def _item_row(channel: str, key: str, idx: int, type_: str, data: bytes, placement: Placement,
              *, where: str, uploads: list[Upload], purpose: str) -> ItemRow:
    """One channel_items row: the item's bytes packed, inline or offloaded (upload queued)."""
    type_, data = packed(type_, data)
    inline, ref = placement.place(data, where=where)
    if ref is not None:
        uploads.append(Upload(ref, data, purpose))
    return ItemRow(channel, key, idx, type_, inline, ref)


def usable(value: Any, version: str, snapshot_every: int) -> bool:
    """Whether a value takes the list layout: a plain list, deltas on, a version we can join."""
    return snapshot_every > 1 and type(value) is list and CHAIN_SEPARATOR not in version


def plan(
    serde: SerializerProtocol,
    *,
    channel: str,
    version: str,
    value: list[Any],
    base: ListState | None,
    snapshot_every: int,
    placement: Placement,
    where: str,
    dump: Any,
    offered: Mapping[bytes, Location] | None = None,
) -> ListRow:
    """The rows that store `value` as version `version`: a delta on `base` (the version
    the parent checkpoint holds) when `value` only appends to it within the chain limit,
    else a snapshot reusing whatever items `base` already stored.

    `offered` are items the parent checkpoint's pending writes stored, by digest: an
    appended item found there is used where it is rather than stored again.
    """
    digests, stored_form = _serialize_items(serde, value, channel=channel, where=where, dump=dump)
    appends = base is not None and _extends(digests, base.digests)

    items: list[ItemRow] = []
    uploads: list[Upload] = []

    def store(item_index: int) -> Location:
        type_, data = stored_form(item_index)
        idx = len(items)
        items.append(_item_row(channel, version, idx, type_, data, placement, where=f"item {item_index} of {where}",
                               uploads=uploads, purpose=f"put of {where}, item {item_index}"))
        return version, idx

    offered = offered or {}
    if base is not None and appends and len(base.chain) + 1 < snapshot_every:
        chain = (*base.chain, base.version)
        own = [offered.get(digests[i]) or store(i) for i in range(len(base.digests), len(value))]
        locations = base.locations + tuple(own)
        segments = _segments(own)
    else:
        chain = ()
        known: dict[bytes, Location] = dict(offered)
        if base is not None:
            known.update(zip(base.digests, base.locations))
        placed = []
        for i, d in enumerate(digests):
            if d not in known:
                known[d] = store(i)  # an item twice in the list is stored once
            placed.append(known[d])
        locations = tuple(placed)
        segments = _segments(locations)
    item_versions = tuple(dict.fromkeys(s[0] for s in segments))
    state = ListState(version, chain, digests, locations)
    body = list_body(segments, item_versions)
    # A snapshot reusing stored items relies on the base rows that hold them.
    reused = any(location[0] != version for location in locations)
    needs = chain if chain else (base.version,) if reused and base is not None else ()
    offered_keys = {location[0] for location in offered.values()}
    item_needs = tuple(v for v in item_versions if v in offered_keys)
    return ListRow(body, chain, item_versions, items, uploads, state, needs, item_needs)


@dataclass(frozen=True)
class WriteItems:
    """A pending write stored as items: its row's body, its items, what a delta may reuse."""

    key: str  # the write key the items are stored under, in place of a version
    body: bytes  # the checkpoint_writes value: orjson of {"k": key, "n": count, "list": bool}
    items: list[ItemRow]
    uploads: list[Upload]
    offered: list[tuple[bytes, Location]]  # (digest, location) of each item


def write_items(
    serde: SerializerProtocol,
    *,
    channel: str,
    value: Any,
    identity: str,
    placement: Placement,
    where: str,
    dump: Any,
) -> WriteItems:
    """Store a pending write's items (a list's, or the one value) in channel_items.

    `identity` names the write (checkpoint, task, index); the key also hashes the items
    (under encryption: random bytes), so a task that wrote other values on a retry never
    shares a key with the first try.
    """
    values = value if type(value) is list else [value]
    digests, stored_form = _serialize_items(serde, values, channel=channel, where=where, dump=dump)
    h = hashlib.blake2b(identity.encode(), digest_size=9)
    if isinstance(serde, EncryptedSerializer):
        # A key hashed from the plaintext would let a reader of the tables test a guess of
        # it: under encryption the key is random (unique all the same).
        h.update(os.urandom(16))
    else:
        for d in digests:
            h.update(d)
    key = WRITE_KEY_PREFIX + base64.urlsafe_b64encode(h.digest()).decode()
    items: list[ItemRow] = []
    uploads: list[Upload] = []
    for idx in range(len(values)):
        type_, data = stored_form(idx)
        items.append(_item_row(channel, key, idx, type_, data, placement, where=f"item {idx} of {where}",
                               uploads=uploads, purpose=f"put_writes of {where}, item {idx}"))
    body = orjson.dumps({"k": key, "n": len(values), "list": type(value) is list})
    return WriteItems(key, body, items, uploads, [(d, (key, i)) for i, d in enumerate(digests)])


def load_write(
    serde: SerializerProtocol, load: Any, body: bytes, items: Mapping[Location, T] | None, decoded: bool, *, where: str
) -> Any:
    """A pending write's value from its row's body and its items (raw, or `decoded`)."""
    try:
        head = orjson.loads(body)
        key, count, is_list = head["k"], head["n"], head["list"]
    except Exception as exc:
        raise DeserializationError(f"{where}: the row of a write stored as items is malformed ({type(exc).__name__})") from exc
    if not isinstance(key, str) or type(count) is not int or not isinstance(is_list, bool) or count < 0:
        raise DeserializationError(f"{where}: the row of a write stored as items is malformed")
    if count > len(items or {}):  # a count read from a row never sizes an allocation unchecked
        raise ListIntegrityError(f"{where}: the write names {count:,} items; only {len(items or {}):,} are stored")
    locations = [(key, i) for i in range(count)]
    found = pick(items or {}, locations, where=where)
    values = found if decoded else _decode_all(serde, load, found, where=where)
    if not is_list and len(values) != 1:
        raise DeserializationError(f"{where}: the row of a write stored as items is malformed")
    return values if is_list else values[0]


def _serialize_items(
    serde: SerializerProtocol, values: Sequence[Any], *, channel: str, where: str, dump: Any
) -> tuple[tuple[bytes, ...], Any]:
    """Each item's digest, and a function giving the (type, bytes) to store for item i.

    Digests come from a deterministic serialization: under EncryptedSerializer the inner
    serializer's, since ciphertext differs on every call (the stored bytes are encrypted).
    """
    plain_serde = getattr(serde, "serde", serde) if isinstance(serde, EncryptedSerializer) else serde
    plain = [dump(plain_serde, item, channel=channel, where=where) for item in values]
    digests = tuple(digest(t, d) for t, d in plain)
    if plain_serde is serde:
        return digests, plain.__getitem__
    return digests, lambda i: dump(serde, values[i], channel=channel, where=where)


def _extends(digests: Sequence[bytes], base: Sequence[bytes]) -> bool:
    return len(digests) >= len(base) and tuple(digests[: len(base)]) == tuple(base)


def _segments(locations: Sequence[Location]) -> list[Segment]:
    """Runs of consecutive items of one version."""
    out: list[list[Any]] = []
    for version, idx in locations:
        if out and out[-1][0] == version and out[-1][1] + out[-1][2] == idx:
            out[-1][2] += 1
        else:
            out.append([version, idx, 1])
    return [(v, s, c) for v, s, c in out]


# -- reading -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredList:
    """A list version's row as read: its chain and its own segments."""

    chain: tuple[str, ...]
    segments: tuple[Segment, ...]


def list_body(segments: Sequence[Segment], item_versions: Sequence[str]) -> bytes:
    """A list row's value: when each of `item_versions` is used once, from its first item
    on (the common case), just the counts, {"n": [...]}, since the row's item_versions
    column already names the versions; else the segments, {"s": [[version, start, count]]}.
    A snapshot of a long list is then a few bytes per item, not a version string each."""
    if len(segments) == len(item_versions) and all(s[1] == 0 for s in segments):
        return orjson.dumps({"n": [count for _, _, count in segments]})
    return orjson.dumps({"s": segments})


def stored(
    chain: Sequence[str] | None, body: bytes, item_versions: Sequence[str] | None = None, *, where: str = "a list row"
) -> StoredList:
    """A list row as fetched: its chain, its value (`list_body`) and its item_versions;
    ListIntegrityError naming `where` for a row that is not one this saver writes."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ListIntegrityError(f"{where}: its list row is not JSON") from None
    if isinstance(doc, dict) and isinstance(doc.get("n"), list):
        counts = doc["n"]
        versions = tuple(item_versions or ())
        if not all(type(c) is int and c >= 0 for c in counts):
            raise ListIntegrityError(f"{where}: its list row holds counts that are not whole numbers >= 0")
        if len(versions) != len(counts):
            raise ListIntegrityError(f"{where}: its list row names {len(versions)} item versions for {len(counts)} counts")
        return StoredList(tuple(chain or ()), tuple((v, 0, c) for v, c in zip(versions, counts)))
    segments = doc.get("s") if isinstance(doc, dict) else None
    if not isinstance(segments, list) or not all(
        isinstance(seg, list) and len(seg) == 3 and isinstance(seg[0], str)
        and type(seg[1]) is int and type(seg[2]) is int and seg[1] >= 0 and seg[2] >= 0
        for seg in segments
    ):
        raise ListIntegrityError(f"{where}: its list row is malformed (no counts, no [version, start, count] segments)")
    return StoredList(tuple(chain or ()), tuple((v, start, count) for v, start, count in segments))


def locate(
    version: str, rows: Mapping[str, StoredList], *, where: str, available: Mapping[str, int] | None = None
) -> list[Location]:
    """Where each item of the list stored as `version` lives, in list order.

    `rows` holds the channel's list rows by version; a missing one raises
    ListIntegrityError naming `where`, never a shorter or other list (as `pick` does
    for a missing item). With `available` (how many items of each version the read
    holds), a segment naming more items of a version than that is refused before any
    is located: a count read from a row never sizes an allocation unchecked.
    """
    row = rows.get(version)
    if row is None:
        raise ListIntegrityError(f"{where}: the list row of version {shown(version)} is missing")
    segments: list[Segment] = []
    for link in row.chain:
        linked = rows.get(link)
        if linked is None:
            raise ListIntegrityError(
                f"{where}: version {shown(version)} appends to version {shown(link)}, whose row is missing "
                "(pruned or deleted elsewhere?)"
            )
        segments.extend(linked.segments)
    segments.extend(row.segments)
    if available is not None:
        for item_version, start, count in segments:
            if start + count > available.get(item_version, 0):
                raise ListIntegrityError(
                    f"{where}: version {shown(version)} names items {start:,} to {start + count - 1:,} of version "
                    f"{shown(item_version)}; {available.get(item_version, 0):,} are stored")
    return [(v, idx) for v, start, count in segments for idx in range(start, start + count)]


def pick(items: Mapping[Location, T], locations: Sequence[Location], *, where: str) -> list[T]:
    """The items at `locations`, in order; a missing one raises ListIntegrityError."""
    try:
        return [items[location] for location in locations]
    except KeyError as missing:
        item_version, idx = missing.args[0]
        raise ListIntegrityError(f"{where}: item {idx} of version {shown(item_version)} is missing") from None


DEFAULT_MIN_BYTES = 4096


@dataclass(frozen=True)
class ListPolicy:
    """How a saver stores list channels: `snapshot_every` 1 keeps every list whole, and a
    list starts in the delta layout once it serializes to more than `min_bytes` (a short
    list costs less rewritten whole than as rows of items)."""

    snapshot_every: int
    memory: ListMemory
    min_bytes: int = DEFAULT_MIN_BYTES


def restore(
    serde: SerializerProtocol,
    load: Any,
    *,
    wanted: Sequence[tuple[str, str]],
    rows: Mapping[tuple[str, str], StoredList],
    raw_items: Mapping[tuple[str, str], RawItems],
    where: Any,
    decoded: dict[str, dict[Location, Any]] | None = None,
) -> dict[tuple[str, str], tuple[list[Any], ListState | None]]:
    """Each wanted (channel, version) rebuilt from its rows and its items' bytes.

    `raw_items` maps (channel, version) to that version's items. With `decoded` (decoded
    items by channel, kept across the pages of a history walk so each item is decoded
    once) lists share item objects and no state is returned; without it every item is
    decoded afresh and each list comes with the ListState a writer needs to extend it.
    `where(channel, version)` names a list for errors.
    """
    by_channel: dict[str, dict[str, StoredList]] = {}
    for (channel, version), row in rows.items():
        by_channel.setdefault(channel, {})[version] = row
    present_by_channel: dict[str, dict[Location, tuple[str, bytes]]] = {}
    for (channel, version), items in raw_items.items():
        present_of = present_by_channel.setdefault(channel, {})
        for idx, item in items.items():
            present_of[(version, idx)] = item
    out: dict[tuple[str, str], tuple[list[Any], ListState | None]] = {}
    counts: dict[str, dict[str, int]] = {}  # per channel: items held of each version
    for channel, version in wanted:
        present = present_by_channel.get(channel, {})
        rows_of = by_channel.get(channel, {})
        named = where(channel, version)
        if channel not in counts:
            held = set(present) | set(decoded.get(channel, {}) if decoded is not None else ())
            counts[channel] = dict(Counter(item_version for item_version, _ in held))
        locations = locate(version, rows_of, where=named, available=counts[channel])
        if decoded is None:
            stored_bytes = pick(present, locations, where=named)
            value = _decode_all(serde, load, stored_bytes, where=named)
            state = ListState(version, rows_of[version].chain, None, tuple(locations), stored_bytes)
            out[(channel, version)] = (value, state)
        else:
            # In a walk every fetched item is decoded once into the walk's cache, used here
            # or not (its group is not fetched again), and lists are built from the cache.
            cache = decoded.setdefault(channel, {})
            fresh = [loc for loc in present if loc not in cache]
            if fresh:
                cache.update(zip(fresh, _decode_all(serde, load, [present[loc] for loc in fresh], where=named)))
            out[(channel, version)] = (pick(cache, locations, where=named), None)
    return out


def rebuild(
    serde: SerializerProtocol, load: Any, channel: str, state: ListState,
    raw_items: Mapping[tuple[str, str], RawItems], *, where: str,
) -> list[Any]:
    """A list version from a state the saver holds and its items' stored bytes, by
    (channel, version) group."""
    try:
        found = [raw_items[(channel, version)][idx] for version, idx in state.locations]
    except KeyError:
        missing = next(loc for loc in state.locations if loc[1] not in raw_items.get((channel, loc[0]), {}))
        raise ListIntegrityError(f"{where}: item {missing[1]} of version {shown(missing[0])} is missing") from None
    return _decode_all(serde, load, found, where=where)


def decode_into(
    serde: SerializerProtocol, load: Any, cache: dict[Location, Any], groups: Mapping[str, RawItems], *, where: str
) -> dict[Location, Any]:
    """`cache` (decoded items of one channel) with every item of `groups` (by version) in it."""
    fresh = [(version, idx) for version, group in groups.items() for idx in group if (version, idx) not in cache]
    if fresh:
        cache.update(zip(fresh, _decode_all(serde, load, [groups[v][i] for v, i in fresh], where=where)))
    return cache


def _decode_all(serde: SerializerProtocol, load: Any, raw: Sequence[tuple[str, bytes | None]], *, where: str) -> list[Any]:
    """Decode items in order; a failure is a DeserializationError naming `where`."""
    try:
        return _decode_items(serde, load, raw)
    except DurableCheckpointError:
        raise
    except (BlockedTypeError, PlaintextRefusedError) as exc:
        raise DeserializationError(f"{where}: a stored list item {exc}") from exc
    except Exception as exc:
        raise DeserializationError(f"{where}: a stored list item cannot be decoded ({type(exc).__name__}: "
                                   f"{str(exc).strip()[:200]})") from exc


def _decode_items(serde: SerializerProtocol, load: Any, raw: Sequence[tuple[str, bytes | None]]) -> list[Any]:
    """Plain msgpack items of the default serializer decode in one call, framed as one
    msgpack array (the bytes a whole list would have), which saves a Python call per
    item on long lists."""
    if any(is_compressed(t) for t, _ in raw):
        raw = [unpacked(t, d) for t, d in raw]
    for type_, data in raw:
        if type_ == "msgpack" and not is_one_object(data or b""):
            raise ValueError("an item's bytes are not exactly one msgpack object (it would read as another)")
    count = len(raw)
    if count > 1 and type(serde) is JsonPlusSerializer and all(t == "msgpack" for t, _ in raw):
        header = bytes([0x90 | count]) if count < 16 else (
            b"\xdc" + count.to_bytes(2, "big") if count < 1 << 16 else b"\xdd" + count.to_bytes(4, "big"))
        values = checked_loads(serde, ("msgpack", header + b"".join(data or b"" for _, data in raw)))
        if isinstance(values, list) and len(values) == count:
            return values
    return [load(serde, type_, data) for type_, data in raw]


class ListMemory:
    """Recent list versions stored or read, and which version of each channel recent
    checkpoints hold. Bounded; it only saves work: without it a put writes a snapshot.

    A new version only ever extends the version its parent checkpoint holds: that row
    and its chain are kept by prune as long as the parent survives, which a version
    that merely looks like a prefix (another branch, a pruned one) does not promise.
    """

    def __init__(self, max_states: int = 1024, max_checkpoints: int = 4096, max_locations: int = 1 << 20) -> None:
        self._states: OrderedDict[tuple[str, str, str, str], ListState] = OrderedDict()
        self._locations = 0
        self._max_locations = max_locations
        self._held: OrderedDict[tuple[str, str, str], dict[str, str]] = OrderedDict()
        self._offers: OrderedDict[tuple[str, str, str, str], dict[bytes, Location]] = OrderedDict()
        self._max_states = max_states
        self._max_checkpoints = max_checkpoints
        self._lock = threading.Lock()

    def holds(self, thread_id: str, ns: str, checkpoint_id: str, versions: Mapping[str, Any]) -> None:
        """Record the channel versions a checkpoint holds."""
        with self._lock:
            self._held[(thread_id, ns, checkpoint_id)] = {k: str(v) for k, v in versions.items()}
            while len(self._held) > self._max_checkpoints:
                self._held.popitem(last=False)

    def forget(self, thread_id: str, ns: str) -> None:
        """Drop what is known of a thread's lists (a base turned out to be gone)."""
        with self._lock:
            for key in [k for k in self._states if k[:2] == (thread_id, ns)]:
                self._locations -= len(self._states.pop(key).locations)
            for key in [k for k in self._offers if k[:2] == (thread_id, ns)]:
                del self._offers[key]

    def base(self, thread_id: str, ns: str, parent_id: str | None, channel: str) -> ListState | None:
        """The state of the channel's version in the parent checkpoint, if known."""
        if parent_id is None:
            return None
        with self._lock:
            version = self._held.get((thread_id, ns, parent_id), {}).get(channel)
            return None if version is None else self._states.get((thread_id, ns, channel, version))

    def offer(self, thread_id: str, ns: str, checkpoint_id: str, channel: str,
              offered: Sequence[tuple[bytes, Location]]) -> None:
        """Record items a pending write of a checkpoint stored, for its child's delta."""
        with self._lock:
            key = (thread_id, ns, checkpoint_id, channel)
            self._offers.setdefault(key, {}).update(offered)
            self._offers.move_to_end(key)
            while len(self._offers) > self._max_checkpoints:
                self._offers.popitem(last=False)

    def offered(self, thread_id: str, ns: str, checkpoint_id: str | None, channel: str) -> dict[bytes, Location]:
        """Items the checkpoint's pending writes to the channel stored, by digest."""
        with self._lock:
            return dict(self._offers.get((thread_id, ns, checkpoint_id or "", channel), {}))

    def recent(self, thread_id: str, ns: str, *, limit: int = 4, scan: int = 64) -> list[tuple[str, ListState]]:
        """(channel, state) of the lane's most recently stored or read list versions: the
        newest checkpoint usually holds one of them."""
        out = []
        with self._lock:
            for i, key in enumerate(reversed(self._states)):
                if i >= scan or len(out) >= limit:
                    break
                if key[:2] == (thread_id, ns):
                    out.append((key[2], self._states[key]))
        return out

    def remember(self, thread_id: str, ns: str, channel: str, state: ListState) -> None:
        """Keep a version's state, most recent last; the oldest go past `max_states`, or
        past `max_locations` items in all (a state holds a reference per item, and a long
        thread stores a version per step)."""
        key = (thread_id, ns, channel, state.version)
        with self._lock:
            old = self._states.pop(key, None)
            if old is not None:
                self._locations -= len(old.locations)
            self._states[key] = state
            self._locations += len(state.locations)
            while len(self._states) > 1 and (
                len(self._states) > self._max_states or self._locations > self._max_locations
            ):
                _, gone = self._states.popitem(last=False)
                self._locations -= len(gone.locations)

    @property
    def locations(self) -> int:
        """Item references the remembered states hold, in all."""
        return self._locations


class ItemCache:
    """Stored bytes of recent list items, by (thread, namespace), then (channel, version).

    A version's items never change once written, so a read can skip fetching the groups
    it holds (get_tuple sends their keys) and decode them from here. Bounded by bytes,
    least recently used thread first; a group it lacks is simply fetched.
    """

    def __init__(self, max_bytes: int = 64 << 20, max_keys_per_read: int = 5000) -> None:
        self.max_bytes = max_bytes
        self.max_keys_per_read = max_keys_per_read
        self._threads: OrderedDict[tuple[str, str], OrderedDict[tuple[str, str], RawItems]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def add(self, thread_id: str, ns: str, channel: str, version: str, items: RawItems) -> None:
        """Hold a group's items, decompressed: a warm read then never inflates them again."""
        if not items or not self.max_bytes:
            return
        if any(is_compressed(type_) for type_, _ in items.values()):
            items = {idx: unpacked(type_, data) for idx, (type_, data) in items.items()}
        size = sum(len(data) for _, data in items.values())
        if not items or size > self.max_bytes // 8:
            return
        with self._lock:
            groups = self._threads.setdefault((thread_id, ns), OrderedDict())
            self._threads.move_to_end((thread_id, ns))
            if (channel, version) in groups:
                return
            groups[(channel, version)] = items
            self._bytes += size
            while self._bytes > self.max_bytes and self._threads:
                oldest_thread, oldest_groups = next(iter(self._threads.items()))
                _, old = oldest_groups.popitem(last=False)
                self._bytes -= sum(len(data) for _, data in old.values())
                if not oldest_groups:
                    del self._threads[oldest_thread]

    def held(self, thread_id: str, ns: str) -> dict[tuple[str, str], RawItems]:
        """The newest groups held for one thread and namespace: (channel, version) -> items."""
        with self._lock:
            groups = self._threads.get((thread_id, ns))
            if not groups:
                return {}
            self._threads.move_to_end((thread_id, ns))
            keys = list(groups)[-self.max_keys_per_read:]
            return {key: groups[key] for key in keys}
