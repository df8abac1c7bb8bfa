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
import functools
import hashlib
import operator
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
import itertools
from typing import Any, Protocol, TypeVar

import orjson

from ..errors import DeserializationError, ListIntegrityError, Where, named, shown
from .codec import Codec, StoredItem, digest, packed, unpacked
from .chunks import Chunked, SegmentLocations, as_chunked
from .chunks import Location as Location, Segment as Segment  # (named here too, where the layout uses them)
from .item_group import ItemGroup
from .offload import ObjectRef, Placement, Upload

T = TypeVar("T")

WRITE_KEY_PREFIX = "~"  # write keys never look like versions, which start with a digit

LIST_TYPE = "langgraph-pg-durable/list-v1"
WRITE_ITEMS_TYPE = "langgraph-pg-durable/write-items-v1"  # a pending write whose items are in channel_items
CHAIN_SEPARATOR = "\x1f"  # joins a chain's versions into one text parameter
DEFAULT_SNAPSHOT_EVERY = 16
KEEP_SEGMENTS_FROM = 1024  # items of a list whose states keep its segments (see ListState.segments)

RawItems = MutableMapping[int, StoredItem]  # idx -> (serializer type, bytes) of one version's items (a dict, or an ItemGroup)
_TYPE = operator.itemgetter(0)  # the serializer type of a stored (type, bytes) item
_DATA = operator.itemgetter(1)  # the bytes of a stored (type, bytes) item
_COUNT = operator.itemgetter(2)  # how many items a segment holds
_VERSION = operator.itemgetter(0)  # the version of a location
_IDX = operator.itemgetter(1)  # the idx of a location


# Types whose objects cannot change once made, at their top level: the same object is
# the same item. Other items are compared by identity and by their top-level fields.
_SCALARS = frozenset({str, bytes, int, float, bool, complex, type(None)})
_FROZEN = _SCALARS | {tuple, frozenset}
_OPAQUE = object()  # the mark of an item whose fields cannot be seen: never taken as unchanged


def item_mark(item: Any) -> Any:
    """What an item shows at its top level, to tell later whether it changed in place:
    None for a frozen type, else its field names and the field objects (a dict's keys and
    values, a list's elements, an object's `__dict__` and pydantic extras).

    Shallow by design: an assignment to a field (`message.content = ...`) is seen, a
    change deep inside one (`message.tool_calls[0]["args"][...] = ...`) is not, as with
    LangGraph's DeltaChannel, which stores only what a node returned.
    """
    cls = type(item)
    if cls in _FROZEN:
        return None
    if cls is dict:
        return tuple(item), tuple(item.values())
    if cls is list:
        return len(item), tuple(item)
    fields = getattr(item, "__dict__", None)
    if type(fields) is not dict:
        return _OPAQUE
    extra = getattr(item, "__pydantic_extra__", None)
    if extra:
        return (*fields, *extra), (*fields.values(), *extra.values())
    return tuple(fields), tuple(fields.values())


def _same_mark(now: Any, then: Any) -> bool:
    if then is None:
        return now is None
    if then is _OPAQUE or now is _OPAQUE:
        return False
    return bool(now[0] == then[0] and len(now[1]) == len(then[1]) and all(map(operator.is_, now[1], then[1])))


def _unchanged(item: Any, mark: Any) -> bool:
    """Whether `item` still shows `mark` (`_same_mark(item_mark(item), mark)`), without
    building its mark: the check a long list of messages makes for every item at every
    append, compared in place at C speed."""
    if mark is None:  # a frozen type's
        return type(item) in _FROZEN
    if mark is _OPAQUE:
        return False
    keys, values = mark
    cls = type(item)
    if cls is list:
        return len(item) == keys and all(map(operator.is_, item, values))
    fields = item if cls is dict else getattr(item, "__dict__", None)
    if type(fields) is not dict or (cls is not dict and getattr(item, "__pydantic_extra__", None)):
        return _same_mark(item_mark(item), mark)
    same_size = len(fields) == len(keys) == len(values)
    return same_size and all(map(operator.is_, fields.values(), values)) and all(map(operator.eq, fields, keys))


_FIELDS_OF = operator.attrgetter("__dict__")
_KEYS, _VALUES = operator.itemgetter(0), operator.itemgetter(1)
_EXTRA = itertools.repeat("__pydantic_extra__")


def _all_unchanged(items: Sequence[Any], marks: Sequence[Any]) -> bool:
    """`all(map(_unchanged, items, marks))`, at C speed for a list of objects that keep
    their fields in a plain `__dict__` (LangChain's messages): every item's field names,
    field count and field objects compared at once, not item by item (a Python call an
    item, ~0.8 us a message at every append of a long chat). Any other list, or one that
    differs, is checked item by item."""
    try:
        fields = list(map(_FIELDS_OF, items))
        if set(map(type, fields)) <= {dict} and not any(map(getattr, items, _EXTRA, itertools.repeat(None))):
            chain = itertools.chain.from_iterable
            # Each item's field names as a tuple against its mark's (the names and their
            # count at once), then every field object against the mark's, end to end.
            if list(map(tuple, fields)) == list(map(_KEYS, marks)) and all(
                map(operator.is_, chain(map(dict.values, fields)), chain(map(_VALUES, marks)))
            ):
                return True
    except (AttributeError, TypeError):  # an item without __dict__ (a str, a dict), a frozen item's mark (None)
        pass
    return all(map(_unchanged, items, marks))


class Seen:
    """The item objects a list version was made of, each with its `item_mark` (`marks`
    None: every item is of a frozen type), roughly what they weigh (their stored bytes),
    and whether every one is an immutable scalar (`scalars`: a read may hand them out
    again instead of decoding their bytes, as nothing can change one in place)."""

    __slots__ = ("objects", "marks", "weight", "scalars")

    def __init__(self, objects: Sequence[Any], marks: Sequence[Any] | None, weight: int, scalars: bool = False) -> None:
        self.objects = as_chunked(objects)
        self.marks = as_chunked(marks) if marks is not None else None
        self.weight = weight
        self.scalars = scalars

    @classmethod
    def of(cls, value: Sequence[Any], weight: int, *, prefix: Seen | None = None, start: int = 0) -> Seen:
        """The objects of `value`, its first `start` items (and their marks) those of `prefix`:
        `unchanged_prefix` found them the same objects, so their chunks are shared."""
        tail = value[start:]
        types = set(map(type, tail))  # at C speed: most lists hold one or two types
        scalars = types <= _SCALARS and (start == 0 or (prefix is not None and prefix.scalars))
        before = prefix.marks if prefix is not None else None
        objects = prefix.objects.prefix(start).extended(tail) if prefix is not None and start else Chunked.of(value)
        if types <= _FROZEN:
            if before is None:
                return cls(objects, None, weight, scalars)
            return cls(objects, before.prefix(start).extended((None,) * len(tail)), weight, scalars)
        head = before.prefix(start) if before is not None else Chunked.of((None,) * start)
        return cls(objects, head.extended(map(item_mark, tail)), weight, scalars)

    def unchanged_prefix(self, value: Sequence[Any]) -> int:
        """How many of the first items of `value` are these objects, unchanged."""
        objects = self.objects
        n = min(len(objects), len(value))
        if objects.same_head(value):  # the common case, at C speed (see Chunked.same_head)
            if self.marks is None or _all_unchanged(value[:n], self.marks):
                return n
        marks = self.marks if self.marks is not None else itertools.repeat(None)
        for i, (item, seen, mark) in enumerate(zip(value, objects, marks)):
            if item is not seen or (mark is not None and not _unchanged(item, mark)):
                return i
        return n


class ListState:
    """What a writer needs to know of a stored list version to append to it.

    A state read back from the database keeps the items' stored bytes and digests them
    only if a put ever extends it: most reads are never followed by a put on them.

    It may also hold the item objects the list was made of (`Seen`): a put whose list
    starts with those same objects, unchanged, takes their digests from here instead of
    serializing them again.
    """

    __slots__ = ("version", "chain", "locations", "seen", "_digests", "_raw", "_item_versions", "_segments")

    def __init__(
        self,
        version: str,
        chain: tuple[str, ...],
        digests: Sequence[bytes] | None,
        locations: Sequence[Location],
        raw: Iterable[tuple[str, bytes]] | None = None,
        seen: Seen | None = None,
        segments: Chunked[Segment] | None = None,
    ) -> None:
        self.version = version
        self.chain = chain  # the rows before this one, snapshot first; () for a snapshot
        self.locations = as_chunked(locations)  # where each item is stored, in list order
        self.seen = seen  # dropped by the saver's memory when it holds too many objects
        self._digests = as_chunked(digests) if digests is not None else None
        self._raw = raw
        self._item_versions: frozenset[str] | None = None
        self._segments = segments  # of the whole list (see `segments`), when known

    def pinned(self) -> ListState:
        """This state with the objects it holds now (the saver's memory may let go of the
        original's at any time): a read that relies on them keeps them."""
        pinned = ListState(self.version, self.chain, self._digests, self.locations, self._raw, self.seen, self._segments)
        pinned._item_versions = self.item_versions  # computed once, for both
        return pinned

    def seeing(self, value: Sequence[Any], weight: int) -> ListState:
        """This state, holding `value`'s objects (the list as just decoded from it)."""
        return ListState(self.version, self.chain, self._digests, self.locations, self._raw, Seen.of(value, weight), self._segments)

    @property
    def segments(self) -> Chunked[Segment]:
        """The runs of items of one version the whole list is made of, in list order: what a
        snapshot's row holds. Kept from state to state for a long list (a put's delta extends
        its base's), so that its snapshot does not walk every item's location (0.37 ms a
        step, amortized, at 100,000 items); else made from the locations when asked."""
        if self._segments is None:
            locations = self.locations
            found = locations.segments() if isinstance(locations, SegmentLocations) else _segments(locations)
            self._segments = Chunked.of(found)
        return self._segments

    @property
    def item_versions(self) -> frozenset[str]:
        """The versions (and write keys) whose items the list uses."""
        if self._item_versions is None:
            locations = self.locations
            self._item_versions = locations.versions() if isinstance(locations, SegmentLocations) else frozenset(map(_VERSION, locations))
        return self._item_versions

    @property
    def digests(self) -> Chunked[bytes]:
        """Of each item's serialized form, in list order."""
        if self._digests is None:
            self._digests = Chunked.of(digest(*unpacked(t, d)) for t, d in self._raw or ())
            self._raw = None
        return self._digests


@dataclass(slots=True)  # made per item or list row read or written: not frozen (see core.plan.Query)
class ItemRow:
    """A channel_items row as stored (`type` and `data` packed: see `codec.packed`; `data`
    None when offloaded), and the item's serialized form (`unpacked`), which the item cache
    holds: the write path keeps it rather than inflating what it just compressed."""

    channel: str
    version: str
    idx: int
    type: str
    data: bytes | None
    ref: ObjectRef | None
    unpacked: StoredItem


@dataclass(slots=True)  # made per item or list row read or written: not frozen (see core.plan.Query)
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


def _nth_item(idx: int, where: Where) -> str:
    return f"item {idx} of {named(where)}"


def _item_row(
    channel: str,
    key: str,
    idx: int,
    type_: str,
    data: bytes,
    placement: Placement,
    *,
    where: Where,
    number: int,
    uploads: list[Upload],
    call: str,
) -> ItemRow:
    """One channel_items row, of item `number` of the list or write `where` names: the item's
    bytes packed, inline or offloaded (upload queued, for `call`: put or put_writes)."""
    stored_type, stored = packed(type_, data)
    inline, ref = placement.place_named(stored, _nth_item, number, where)
    if ref is not None:
        uploads.append(Upload(ref, stored, f"{call} of {named(where)}, item {number}"))
    return ItemRow(channel, key, idx, stored_type, inline, ref, (type_, data))


def usable(value: Any, version: str, snapshot_every: int) -> bool:
    """Whether a value takes the list layout: a plain list, deltas on, a version we can join."""
    return snapshot_every > 1 and type(value) is list and CHAIN_SEPARATOR not in version


def plan(
    codec: Codec,
    *,
    channel: str,
    version: str,
    value: list[Any],
    base: ListState | None,
    snapshot_every: int,
    placement: Placement,
    where: Where,
    offered: Mapping[bytes, Location] | None = None,
    offered_objects: Mapping[int, OfferedObject] | None = None,
) -> ListRow:
    """The rows that store `value` as version `version`: a delta on `base` (the version
    the parent checkpoint holds) when `value` only appends to it within the chain limit,
    else a snapshot reusing whatever items `base` already stored.

    `offered` are items the parent checkpoint's pending writes stored, by digest: an
    appended item found there is used where it is rather than stored again. Those
    writes' objects (`offered_objects`, by id): an appended item that is one of them,
    unchanged since it was written (its `item_mark`), takes the digest the write made of
    it, and is not serialized again (a plain list's step serialized its new item twice).
    """
    seen = base.seen if base is not None else None
    start = seen.unchanged_prefix(value) if seen is not None else 0
    unchanged = base.digests.prefix(start) if base is not None and start else Chunked()
    if offered_objects and base is not None and start == len(base.digests):
        unchanged = unchanged.extended(_written_digests(value, start, offered_objects))
    digests, stored_form = codec.dump_items(value, channel=channel, where=where, known=unchanged)
    # Every item of the base still there, unchanged: an append, without comparing digests.
    appends = base is not None and (start == len(base.digests) or _extends(digests, base.digests))

    items: list[ItemRow] = []
    uploads: list[Upload] = []

    def store(item_index: int) -> Location:
        type_, data = stored_form(item_index)
        idx = len(items)
        items.append(
            _item_row(
                channel,
                version,
                idx,
                type_,
                data,
                placement,
                where=where,
                number=item_index,
                uploads=uploads,
                call="put",
            )
        )
        return version, idx

    offered = offered or {}
    if base is not None and appends:
        # The base's items stay where they are, the appended ones are stored (or offered):
        # a delta on it, or a snapshot once its chain is full (the same items, the whole
        # list's segments; no digest of the base looked up again: 100,000 of them took a
        # snapshot of a long list 0.14 s).
        own = [offered.get(digests[i]) or store(i) for i in range(len(base.digests), len(value))]
        locations: Chunked[Location] = base.locations.extended(own)
        own_segments = _segments(own)
        # A long list's segments are kept from state to state; a short one's are found
        # again at its snapshot (cheaper than keeping them at every put).
        whole = _joined(base.segments, own_segments) if len(locations) > KEEP_SEGMENTS_FROM else None
        if len(base.chain) + 1 < snapshot_every:
            chain = (*base.chain, base.version)
            segments = own_segments
        else:
            chain = ()
            segments = list(whole) if whole is not None else _segments(locations)
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
        locations = Chunked.of(placed)
        segments = _segments(locations)
        whole = Chunked.of(segments) if len(locations) > KEEP_SEGMENTS_FROM else None
    item_versions = tuple(dict.fromkeys(s[0] for s in segments))
    weight = sum(len(row.data or b"") for row in items)
    if seen is not None and start:
        weight += seen.weight * start // max(len(seen.objects), 1)
    state = ListState(version, chain, digests, locations, seen=Seen.of(value, weight, prefix=seen, start=start), segments=whole)
    body = list_body(segments, item_versions)
    # A snapshot reusing stored items relies on the base rows that hold them.
    if chain:
        needs: tuple[str, ...] = chain
    else:
        reused = base is not None and any(location[0] != version for location in locations)
        needs = (base.version,) if reused and base is not None else ()
    item_needs: tuple[str, ...] = ()
    if offered:
        offered_keys = {location[0] for location in offered.values()}
        item_needs = tuple(v for v in item_versions if v in offered_keys)
    return ListRow(body, chain, item_versions, items, uploads, state, needs, item_needs)


def _written_digests(value: Sequence[Any], start: int, written: Mapping[int, OfferedObject]) -> list[bytes]:
    """The digests of the items of `value` from `start` on that are objects a pending write
    stored and still show the mark they had then, as far as they run unbroken."""
    found: list[bytes] = []
    for i in range(start, len(value)):  # (not islice: it would step over the first `start` items)
        item = value[i]
        entry = written.get(id(item))
        if entry is None or entry[0] is not item or not _unchanged(item, entry[1]):
            break
        found.append(entry[2])
    return found


@dataclass(slots=True)  # made per item or list row read or written: not frozen (see core.plan.Query)
class WriteItems:
    """A pending write stored as items: its row's body, its items, what a delta may reuse."""

    key: str  # the write key the items are stored under, in place of a version
    body: bytes  # the checkpoint_writes value: orjson of {"k": key, "n": count, "list": bool}
    items: list[ItemRow]
    uploads: list[Upload]
    offered: list[tuple[bytes, Location]]  # (digest, location) of each item
    objects: list[OfferedObject]  # each item's object, its mark and its digest (see `plan`)


# An item a pending write stored, as the next put may find it in its list: the object, its
# `item_mark` when written, and the digest of its serialized form.
OfferedObject = tuple[Any, Any, bytes]


def write_items(
    codec: Codec,
    *,
    channel: str,
    value: Any,
    identity: str,
    placement: Placement,
    where: Where,
) -> WriteItems:
    """Store a pending write's items (a list's, or the one value) in channel_items.

    `identity` names the write (checkpoint, task, index); the key also hashes the items
    (under encryption: random bytes), so a task that wrote other values on a retry never
    shares a key with the first try.
    """
    values = value if type(value) is list else [value]
    digests, stored_form = codec.dump_items(values, channel=channel, where=where)
    h = hashlib.blake2b(identity.encode(), digest_size=9)
    if codec.encrypted:
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
        items.append(
            _item_row(
                channel,
                key,
                idx,
                type_,
                data,
                placement,
                where=where,
                number=idx,
                uploads=uploads,
                call="put_writes",
            )
        )
    body = orjson.dumps({"k": key, "n": len(values), "list": type(value) is list})
    objects = [(item, item_mark(item), d) for item, d in zip(values, digests)]
    return WriteItems(key, body, items, uploads, [(d, (key, i)) for i, d in enumerate(digests)], objects)


def load_write(codec: Codec, body: bytes, items: Mapping[Location, Any] | None, decoded: bool, *, where: Where) -> Any:
    """A pending write's value from its row's body and its items (raw, or `decoded`)."""
    try:
        head = orjson.loads(body)
        key, count, is_list = head["k"], head["n"], head["list"]
    except Exception as exc:
        raise DeserializationError(f"{named(where)}: the row of a write stored as items is malformed ({type(exc).__name__})") from exc
    if not isinstance(key, str) or type(count) is not int or not isinstance(is_list, bool) or count < 0:
        raise DeserializationError(f"{named(where)}: the row of a write stored as items is malformed")
    if count > len(items or {}):  # a count read from a row never sizes an allocation unchecked
        raise ListIntegrityError(f"{named(where)}: the write names {count:,} items; only {len(items or {}):,} are stored")
    found = pick(items or {}, [(key, 0, count)], where=where)
    values = found if decoded else codec.load_items(found, where=where)
    if not is_list and len(values) != 1:
        raise DeserializationError(f"{named(where)}: the row of a write stored as items is malformed")
    return values if is_list else values[0]


def _extends(digests: Sequence[bytes], base: Sequence[bytes]) -> bool:
    return len(digests) >= len(base) and tuple(digests[: len(base)]) == tuple(base)


def _joined(segments: Chunked[Segment], more: Sequence[Segment]) -> Chunked[Segment]:
    """`segments` then `more`, the first of `more` merged into the last of `segments` when it
    runs on from it (as `_segments` of the locations end to end would have it)."""
    if segments and more:
        version, start, count = segments[-1]
        if more[0][0] == version and more[0][1] == start + count:
            return segments.prefix(len(segments) - 1).extended([(version, start, count + more[0][2]), *more[1:]])
    return segments.extended(more)


def _segments(locations: Iterable[Location]) -> list[Segment]:
    """Runs of consecutive items of one version: items of one version side by side are
    grouped at C speed, and a group whose idxs run on without a gap (the rule: a version's
    items are appended together) is one segment without a look at each."""
    if type(locations) is list and len(locations) == 1:  # a put's own, as a rule: one appended item
        version, idx = locations[0]
        return [(version, idx, 1)]
    out: list[Segment] = []
    for version, group in itertools.groupby(locations, _VERSION):
        idxs = list(map(_IDX, group))
        first = idxs[0]
        if idxs[-1] - first == len(idxs) - 1 and (len(idxs) < 3 or idxs == list(range(first, first + len(idxs)))):
            out.append((version, first, len(idxs)))
            continue
        start = count = 0
        for idx in idxs:
            if count and idx == start + count:
                count += 1
            else:
                if count:
                    out.append((version, start, count))
                start, count = idx, 1
        out.append((version, start, count))
    return out


# -- reading -----------------------------------------------------------------------------


@dataclass(slots=True)  # made per item or list row read or written: not frozen (see core.plan.Query)
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
    chain: Sequence[str] | None, body: bytes, item_versions: Sequence[str] | None = None, *, where: Where = "a list row"
) -> StoredList:
    """A list row as fetched: its chain, its value (`list_body`) and its item_versions;
    ListIntegrityError naming `where` for a row that is not one this saver writes."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ListIntegrityError(f"{named(where)}: its list row is not JSON") from None
    if isinstance(doc, dict) and isinstance(doc.get("n"), list):
        counts = doc["n"]
        versions = tuple(item_versions or ())
        # (At C speed: a snapshot's row holds a count per version, hundreds in a chat.)
        if not set(map(type, counts)) <= {int} or min(counts, default=0) < 0:
            raise ListIntegrityError(f"{named(where)}: its list row holds counts that are not whole numbers >= 0")
        if len(versions) != len(counts):
            raise ListIntegrityError(f"{named(where)}: its list row names {len(versions)} item versions for {len(counts)} counts")
        return StoredList(tuple(chain or ()), tuple(zip(versions, itertools.repeat(0), counts)))
    segments = doc.get("s") if isinstance(doc, dict) else None
    if not isinstance(segments, list) or not all(
        isinstance(seg, list)
        and len(seg) == 3
        and isinstance(seg[0], str)
        and type(seg[1]) is int
        and type(seg[2]) is int
        and seg[1] >= 0
        and seg[2] >= 0
        for seg in segments
    ):
        raise ListIntegrityError(f"{named(where)}: its list row is malformed (no counts, no [version, start, count] segments)")
    return StoredList(tuple(chain or ()), tuple((v, start, count) for v, start, count in segments))


def segments_of(version: str, rows: Mapping[str, StoredList], *, where: Where, available: Mapping[str, int] | None = None) -> list[Segment]:
    """The runs of items the list stored as `version` is made of, in list order.

    `rows` holds the channel's list rows by version; a missing one raises
    ListIntegrityError naming `where`, never a shorter or other list (as `pick` does
    for a missing item). With `available` (how many items of each version the read
    holds), a segment naming more items of a version than that is refused before any
    is located: a count read from a row never sizes an allocation unchecked.
    """
    row = rows.get(version)
    if row is None:
        raise ListIntegrityError(f"{named(where)}: the list row of version {shown(version)} is missing")
    segments: list[Segment] = []
    for link in row.chain:
        linked = rows.get(link)
        if linked is None:
            raise ListIntegrityError(
                f"{named(where)}: version {shown(version)} appends to version {shown(link)}, "
                "whose row is missing (pruned or deleted elsewhere?)"
            )
        segments.extend(linked.segments)
    segments.extend(row.segments)
    if available is not None:
        for item_version, start, count in segments:
            if start + count > available.get(item_version, 0):
                raise ListIntegrityError(
                    f"{named(where)}: version {shown(version)} names items {start:,} to {start + count - 1:,} of version "
                    f"{shown(item_version)}; {available.get(item_version, 0):,} are stored"
                )
    return segments


def pick_segments(groups: Mapping[str, Mapping[int, T]], segments: Sequence[Segment], *, where: Where) -> list[T]:
    """The items of `segments` from their versions' groups (idx to item), in order; a
    missing one raises ListIntegrityError."""
    out: list[T] = []
    append, extend = out.append, out.extend
    none: Mapping[int, T] = {}
    for version, start, count in segments:
        group = groups.get(version, none)
        try:
            if count == 1:  # a chat's list: a segment per message (53 -> 11 us for W3's 175)
                append(group[start])
            else:
                extend(map(group.__getitem__, range(start, start + count)))
        except KeyError as missing:
            raise ListIntegrityError(f"{named(where)}: item {missing.args[0]} of version {shown(version)} is missing") from None
    return out


def _spans(groups: Mapping[str, RawItems], segments: Sequence[Segment], where: Where) -> list[tuple[str, bytes, int]] | None:
    """The items of `segments` as (type, bytes, count) pieces: whole runs' bytes where a
    cold read fetched whole runs (see ItemGroup.spans), an item a piece elsewhere. None
    when whole runs hold under half the items (a chat's list, an item a version: the
    per-item path is faster then), or an item's bytes are not held (missing items raise
    ListIntegrityError, as `pick` does)."""
    if 2 * sum(len(group) for group in groups.values() if type(group) is ItemGroup) < sum(map(_COUNT, segments)):
        return None  # (decided before a look at each segment: a chat's list has hundreds)
    found = [
        group.spans(start, count) if isinstance(group := groups.get(version), ItemGroup) else None for version, start, count in segments
    ]
    if 2 * sum(n for runs in found if runs for _, _, n in runs) < sum(map(_COUNT, segments)):
        return None
    pieces: list[tuple[str, bytes, int]] = []
    loose: list[Segment] = []  # segments in a row not made of whole runs, picked together

    def picked() -> bool:
        items = pick_segments(groups, loose, where=where)
        pieces.extend(zip(map(_TYPE, items), map(_DATA, items), itertools.repeat(1)))
        loose.clear()
        return all(map(_DATA, items))

    for segment, runs in zip(segments, found):
        if runs is None:
            loose.append(segment)
            continue
        if loose and not picked():
            return None
        pieces.extend(runs)
    if loose and not picked():
        return None
    return pieces


class _Picked:
    """`pick_segments(groups, segments)`, made each time it is iterated: a list state keeps
    its items' bytes for the digests a put extending it needs, and most reads are never
    followed by one."""

    __slots__ = ("_groups", "_segments", "_where")

    def __init__(self, groups: Mapping[str, RawItems], segments: Sequence[Segment], where: Where) -> None:
        self._groups, self._segments, self._where = groups, segments, where

    def __iter__(self) -> Iterator[StoredItem]:
        return iter(pick_segments(self._groups, self._segments, where=self._where))


def pick(items: Mapping[Location, T], segments: Sequence[Segment], *, where: Where) -> list[T]:
    """The items of `segments` from `items` (by location), in order; a missing one raises
    ListIntegrityError."""
    out: list[T] = []
    append = out.append
    try:
        for version, start, count in segments:
            if count == 1:  # a chat's list: a segment per message (as in pick_segments)
                append(items[(version, start)])
            else:
                out.extend([items[(version, idx)] for idx in range(start, start + count)])
    except KeyError as missing:
        item_version, idx = missing.args[0]
        raise ListIntegrityError(f"{named(where)}: item {idx} of version {shown(item_version)} is missing") from None
    return out


def _prefix_of(assembled: Sequence[tuple[Sequence[Segment], list[T]]], segments: Sequence[Segment]) -> list[T] | None:
    """A list built before in this read whose segments start with `segments`, cut to them:
    in a history walk each older checkpoint's list is, as a rule, a prefix of the newer
    one's (its chain is the start of theirs), and a slice copies at C speed what a lookup
    per item would find again. None when no recent one does."""
    for earlier, value in reversed(assembled[-4:]):
        if len(earlier) >= len(segments) and earlier[: len(segments)] == segments:
            return value[: sum(count for _, _, count in segments)]
    return None


DEFAULT_MIN_BYTES = 4096


@dataclass(frozen=True)
class ListPolicy:
    """How a saver stores list channels: `snapshot_every` 1 keeps every list whole, and a
    list starts in the delta layout once it serializes to more than `min_bytes` (a short
    list costs less rewritten whole than as rows of items)."""

    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    min_bytes: int = DEFAULT_MIN_BYTES


class ListBases(Protocol):
    """What a put asks of the saver's memory (memory.ListMemory): the list version a
    parent checkpoint holds, the items its pending writes stored, and the channel
    versions it holds (a checkpoint seen committed)."""

    def base(self, thread_id: str, ns: str, parent_id: str | None, channel: str) -> ListState | None: ...

    def offered(self, thread_id: str, ns: str, checkpoint_id: str | None, channel: str) -> dict[bytes, Location]: ...

    def offered_objects(self, thread_id: str, ns: str, checkpoint_id: str | None, channel: str) -> Mapping[int, OfferedObject]: ...

    def bases_of(self, thread_id: str, ns: str, checkpoint_id: str | None, channels: Iterable[str]) -> dict[str, ListState]: ...

    def versions_of(self, thread_id: str, ns: str, checkpoint_id: str | None) -> Mapping[str, str] | None: ...


def restore(
    codec: Codec,
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
    out: dict[tuple[str, str], tuple[list[Any], ListState | None]] = {}
    if decoded is None:
        # Each list from its versions' groups, segment by segment: no per-item index of
        # every item read (a cold read of a long list holds 100,000 of them).
        groups_by_channel: dict[str, dict[str, RawItems]] = {}
        for (channel, version), items in raw_items.items():
            groups_by_channel.setdefault(channel, {})[version] = items
        for channel, version in wanted:
            groups = groups_by_channel.get(channel, {})
            rows_of = by_channel.get(channel, {})
            name = functools.partial(where, channel, version)
            segments = segments_of(version, rows_of, where=name, available={v: len(items) for v, items in groups.items()})
            pieces = _spans(groups, segments, name)
            value = codec.load_spans(pieces, where=name) if pieces is not None else None
            raw: Iterable[tuple[str, bytes]]
            if value is None:
                raw = pick_segments(groups, segments, where=name)
                value = codec.load_items(raw, where=name)
                weight = sum(map(len, filter(None, map(_DATA, raw))))
            else:  # whole runs: each item's bytes are cut out only if a put extends the list
                raw = _Picked(groups, segments, name)
                weight = sum(len(data) for _, data, _ in pieces or ())
            seen = Seen.of(value, weight)
            out[(channel, version)] = (value, ListState(version, rows_of[version].chain, None, SegmentLocations(segments), raw, seen))
        return out
    present_by_channel: dict[str, dict[Location, tuple[str, bytes]]] = {}
    for (channel, version), items in raw_items.items():
        present_of = present_by_channel.setdefault(channel, {})
        for idx, item in items.items():
            present_of[(version, idx)] = item
    counts: dict[str, dict[str, int]] = {}  # per channel: items held of each version
    assembled: dict[str, list[tuple[list[Segment], list[Any]]]] = {}  # per channel: the lists built so far
    for channel, version in wanted:
        present = present_by_channel.get(channel, {})
        rows_of = by_channel.get(channel, {})
        name = functools.partial(where, channel, version)
        if channel not in counts:
            held = set(present) | set(decoded.get(channel, {}))
            counts[channel] = dict(Counter(map(_VERSION, held)))
        segments = segments_of(version, rows_of, where=name, available=counts[channel])
        # In a walk every fetched item is decoded once into the walk's cache, used here or
        # not (its group is not fetched again), and lists are built from the cache.
        cache = decoded.setdefault(channel, {})
        fresh = [loc for loc in present if loc not in cache]
        if fresh:
            cache.update(zip(fresh, codec.load_items([present[loc] for loc in fresh], where=name)))
        built = assembled.setdefault(channel, [])
        prefix = _prefix_of(built, segments)
        value = prefix if prefix is not None else pick(cache, segments, where=name)
        built.append((segments, value))
        out[(channel, version)] = (value, None)
    return out


def holds_its_items(state: ListState) -> bool:
    """Whether `state` holds its list's items as immutable objects (see `rebuild`)."""
    seen = state.seen
    return seen is not None and seen.scalars and len(seen.objects) == len(state.locations)


def rebuild(
    codec: Codec,
    channel: str,
    state: ListState,
    raw_items: Mapping[tuple[str, str], RawItems],
    *,
    where: Where,
) -> tuple[list[Any], ListState]:
    """A list version from a state the saver holds and its items' stored bytes, by
    (channel, version) group, and that state holding the new list's objects; from the
    objects the state holds when they are immutable scalars, without decoding."""
    if holds_its_items(state):
        return list(state.seen.objects), state  # type: ignore[union-attr]
    try:
        found = [raw_items[(channel, version)][idx] for version, idx in state.locations]
    except KeyError:
        missing = next(loc for loc in state.locations if loc[1] not in raw_items.get((channel, loc[0]), {}))
        raise ListIntegrityError(f"{named(where)}: item {missing[1]} of version {shown(missing[0])} is missing") from None
    value = codec.load_items(found, where=where)
    return value, state.seeing(value, sum(len(data or b"") for _, data in found))


def decode_into(codec: Codec, cache: dict[Location, Any], groups: Mapping[str, RawItems], *, where: Where) -> dict[Location, Any]:
    """`cache` (decoded items of one channel) with every item of `groups` (by version) in it."""
    fresh = [(version, idx) for version, group in groups.items() for idx in group if (version, idx) not in cache]
    if fresh:
        cache.update(zip(fresh, codec.load_items([groups[v][i] for v, i in fresh], where=where)))
    return cache


def read_lists(
    codec: Codec,
    *,
    wanted: Sequence[tuple[str, str]],
    rows: Mapping[tuple[str, str], StoredList],
    raw_items: Mapping[tuple[str, str], RawItems],
    known: Mapping[tuple[str, str], ListState] | None = None,
    where: Any,
) -> dict[tuple[str, str], tuple[list[Any], ListState | None]]:
    """The list side of a get_tuple: each wanted (channel, version), rebuilt from a state the
    saver holds (`known`: the statement sent no rows for it) or from its fetched rows."""
    out: dict[tuple[str, str], tuple[list[Any], ListState | None]] = {}
    rest = []
    for channel, version in wanted:
        state = known.get((channel, version)) if known else None
        if state is None:
            rest.append((channel, version))
        else:
            out[(channel, version)] = rebuild(codec, channel, state, raw_items, where=functools.partial(where, channel, version))
    if rest:
        out.update(restore(codec, wanted=rest, rows=rows, raw_items=raw_items, where=where))
    return out
