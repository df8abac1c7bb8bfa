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

Which base a new version appends to is decided from an in-process memory of recent
versions (`ListMemory`); when it has nothing, a snapshot is written. Correctness never
depends on it: the rows alone describe every value.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from .errors import DurableCheckpointError
from .offload import ObjectRef, Placement, Upload

LIST_TYPE = "langgraph-pg-durable/list-v1"
CHAIN_SEPARATOR = "\x1f"  # joins a chain's versions into one text parameter
DEFAULT_SNAPSHOT_EVERY = 16

Segment = tuple[str, int, int]  # version whose items these are, first idx, count
Location = tuple[str, int]  # version, idx


class ListIntegrityError(DurableCheckpointError):
    """A stored list cannot be rebuilt: a row of its chain or one of its items is missing."""


@dataclass(frozen=True)
class ListState:
    """What a writer needs to know of a stored list version to append to it."""

    version: str
    chain: tuple[str, ...]  # the rows before this one, snapshot first; () for a snapshot
    digests: tuple[bytes, ...]  # of each item's serialized form, in list order
    locations: tuple[Location, ...]  # where each item is stored


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

    value: bytes  # orjson of {"s": segments}
    chain: tuple[str, ...]
    item_versions: tuple[str, ...]
    items: list[ItemRow]
    uploads: list[Upload]
    state: ListState


def digest(type_: str, data: bytes) -> bytes:
    return hashlib.blake2b(type_.encode() + b"\x00" + data, digest_size=16).digest()


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
) -> ListRow:
    """The rows that store `value` as version `version`: a delta on `base` when it is a pure
    append within the chain limit, else a snapshot reusing `base`'s stored items."""
    # Digests come from a deterministic serialization: under EncryptedSerializer the
    # inner serializer's, since ciphertext differs on every call.
    plain_serde = getattr(serde, "serde", serde) if isinstance(serde, EncryptedSerializer) else serde
    plain = [dump(plain_serde, item, channel=channel, where=where) for item in value]
    digests = tuple(digest(t, d) for t, d in plain)
    appended_from = None
    if base is not None and len(digests) >= len(base.digests) and digests[: len(base.digests)] == base.digests:
        appended_from = len(base.digests)

    items: list[ItemRow] = []
    uploads: list[Upload] = []

    def store(item_index: int) -> Location:
        type_, data = plain[item_index] if plain_serde is serde else dump(serde, value[item_index], channel=channel, where=where)
        idx = len(items)
        inline, ref = placement.place(data, where=f"item {item_index} of {where}")
        items.append(ItemRow(channel, version, idx, type_, inline, ref))
        if ref is not None:
            uploads.append(Upload(ref, data, f"put of {where}, item {item_index}"))
        return version, idx

    if appended_from is not None and base is not None and len(base.chain) + 1 < snapshot_every:
        chain = (*base.chain, base.version)
        own = [store(i) for i in range(appended_from, len(plain))]
        locations = base.locations + tuple(own)
        segments = _segments(own)
    else:
        chain = ()
        known = {} if base is None else dict(zip(base.digests, base.locations))
        placed = []
        for i, d in enumerate(digests):
            if d not in known:
                known[d] = store(i)  # an item twice in the list is stored once
            placed.append(known[d])
        locations = tuple(placed)
        segments = _segments(locations)
    item_versions = tuple(dict.fromkeys(s[0] for s in segments))
    state = ListState(version, chain, digests, locations)
    body = orjson.dumps({"s": segments})
    return ListRow(body, chain, item_versions, items, uploads, state)


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


def stored(chain: Sequence[str] | None, body: bytes) -> StoredList:
    return StoredList(tuple(chain or ()), tuple((v, s, c) for v, s, c in orjson.loads(body)["s"]))


def rebuild(
    version: str,
    rows: Mapping[str, StoredList],
    items: Mapping[Location, Any],
    *,
    where: str,
) -> tuple[list[Any], tuple[Location, ...]]:
    """The list stored as `version` (decoded items) and where each item lives.

    `rows` holds the channel's list rows by version, `items` its decoded items; anything
    missing raises ListIntegrityError naming `where`, never a shorter or other list.
    """
    row = rows.get(version)
    if row is None:
        raise ListIntegrityError(f"{where}: the list row of version {version!r} is missing")
    segments: list[Segment] = []
    for link in row.chain:
        linked = rows.get(link)
        if linked is None:
            raise ListIntegrityError(
                f"{where}: version {version!r} appends to version {link!r}, whose row is missing "
                "(pruned or deleted elsewhere?)"
            )
        segments.extend(linked.segments)
    segments.extend(row.segments)
    values: list[Any] = []
    locations: list[Location] = []
    for item_version, start, count in segments:
        for idx in range(start, start + count):
            key = (item_version, idx)
            if key not in items:
                raise ListIntegrityError(f"{where}: item {idx} of version {item_version!r} is missing")
            values.append(items[key])
            locations.append(key)
    return values, tuple(locations)


@dataclass(frozen=True)
class ListPolicy:
    """How a saver stores list channels: `snapshot_every` 1 keeps every list whole."""

    snapshot_every: int
    memory: ListMemory


def restore(
    serde: SerializerProtocol,
    load: Any,
    *,
    wanted: Sequence[tuple[str, str]],
    rows: Mapping[tuple[str, str], StoredList],
    raw_items: Mapping[tuple[str, str, int], tuple[str, bytes | None]],
    where: Any,
    decoded: dict[tuple[str, str, int], Any] | None = None,
) -> dict[tuple[str, str], tuple[list[Any], ListState]]:
    """Each wanted (channel, version) rebuilt from fetched rows and items, with its state.

    `decoded` caches decoded items across calls (a history walk decodes each item once);
    `where(channel, version)` names a value for errors.
    """
    decoded = {} if decoded is None else decoded
    by_channel: dict[str, dict[str, StoredList]] = {}
    for (channel, version), row in rows.items():
        by_channel.setdefault(channel, {})[version] = row
    out = {}
    for channel, version in wanted:
        items: dict[Location, Any] = {}
        for (c, v, idx), (type_, data) in raw_items.items():
            if c != channel:
                continue
            key = (c, v, idx)
            if key not in decoded:
                decoded[key] = load(serde, type_, data)
            items[(v, idx)] = decoded[key]
        value, locations = rebuild(version, by_channel.get(channel, {}), items, where=where(channel, version))
        digests = tuple(digest(*_raw(raw_items, channel, loc)) for loc in locations)
        row = by_channel[channel][version]
        out[(channel, version)] = (value, ListState(version, row.chain, digests, locations))
    return out


def _raw(raw_items: Mapping[tuple[str, str, int], tuple[str, bytes | None]], channel: str,
         location: Location) -> tuple[str, bytes]:
    type_, data = raw_items[(channel, *location)]
    return type_, data or b""


# -- the writer's memory -----------------------------------------------------------------------


class ListMemory:
    """Recent list versions by (thread, namespace, channel, version), and which version each
    new version was made from (recorded by get_next_version). Bounded; only saves work."""

    def __init__(self, max_versions: int = 512, max_parents: int = 8192) -> None:
        self._states: OrderedDict[tuple[str, str, str, str], ListState] = OrderedDict()
        self._parents: OrderedDict[str, str] = OrderedDict()
        self._max_versions = max_versions
        self._max_parents = max_parents
        self._lock = threading.Lock()

    def made_from(self, new: str, current: Any) -> None:
        if current is None:
            return
        with self._lock:
            self._parents[new] = str(current)
            if len(self._parents) > self._max_parents:
                self._parents.popitem(last=False)

    def base(self, thread_id: str, ns: str, channel: str, version: str) -> ListState | None:
        with self._lock:
            parent = self._parents.get(version)
            if parent is None:
                return None
            state = self._states.get((thread_id, ns, channel, parent))
            if state is not None:
                self._states.move_to_end((thread_id, ns, channel, parent))
            return state

    def remember(self, thread_id: str, ns: str, channel: str, state: ListState) -> None:
        with self._lock:
            self._states[(thread_id, ns, channel, state.version)] = state
            self._states.move_to_end((thread_id, ns, channel, state.version))
            while len(self._states) > self._max_versions:
                self._states.popitem(last=False)
