"""Fetched rows to CheckpointTuples: the `sql.reads` row formats decoded by column name.

`decode_tuple` reads one `get_tuple` result, `gather_details` one `page_details` result
(core/history.py builds the page's tuples from it); both hand their list side to
core/lists.py, and `build_tuple` assembles a tuple from a checkpoint row and its parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
import struct
from functools import partial
from itertools import accumulate
from typing import Any, Final

import ormsgpack
from langgraph.checkpoint.base import CheckpointTuple, PendingWrite, writes_sort_key

from ..errors import CheckpointIntegrityError, DeserializationError, Where, caused, named, shown
from ..sql.reads import CHECKPOINT_IN_DETAIL, CheckpointColumn, Detail, Part
from . import lists as list_layout
from . import msgpack_bounds
from .codec import Codec, is_compressed, load_json, unpacked_item
from .encode import PACKED_WRITES_TYPE
from .keys import CheckpointKey
from .item_group import ItemGroup
from .lists import ListState, RawItems
from .metadata import load_metadata, load_metadata_json
from .offload import ObjectRef, RefColumns, references

# Where Detail rows keep an offloaded value and its reference.
DETAIL_REFS: Final = RefColumns(Detail.VALUE, Detail.OBJECT_KEY, Detail.OBJECT_SHA256, Detail.OBJECT_SIZE)

_C = CheckpointColumn


# What a stored thing is, for an error message: built only when one is raised (`partial` of these).
def _write_named(where: str, task_id: str, channel: str) -> str:
    return f"{where}, pending write of task {shown(task_id)} to channel {shown(channel)}"


def _item_named(thread_id: str, channel: str, version: str, idx: int) -> str:
    return f"thread {shown(thread_id)}, channel {shown(channel)}, version {shown(version)}, item {idx}"


def value_named(thread_id: str, channel: str, version: str, at: CheckpointRow | None = None) -> str:
    checkpoint = f", checkpoint {shown(at.checkpoint_id)}" if at is not None else ""
    return f"thread {shown(thread_id)}{checkpoint}, channel {shown(channel)} (version {shown(version)})"


@dataclass
class CheckpointRow:
    """A checkpoint row as fetched (`sql.reads.CheckpointColumn`), before its values are attached."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    body: dict[str, Any]
    metadata: Any
    metadata_exact: bytes | None
    value_channels: list[str]
    value_versions: list[str]

    @classmethod
    def from_row(cls, row: Sequence[Any], start: int = 0) -> CheckpointRow:
        """The row's CheckpointColumn columns, from `start` on (a Detail row has them at 1)."""
        return cls(
            row[start + _C.THREAD_ID],
            row[start + _C.CHECKPOINT_NS],
            row[start + _C.CHECKPOINT_ID],
            row[start + _C.PARENT_CHECKPOINT_ID],
            load_json(row[start + _C.CHECKPOINT]),
            load_metadata_json(row[start + _C.METADATA]),
            row[start + _C.METADATA_EXACT],
            row[start + _C.VALUE_CHANNELS],
            row[start + _C.VALUE_VERSIONS],
        )

    def holds(self, channel: str) -> bool:
        """Whether the checkpoint has a value for `channel` (in its row or a values row)."""
        return channel in self.value_channels or channel in (self.body.get("channel_values") or ())

    @property
    def value_keys(self) -> Iterable[tuple[str, str, str, str]]:
        """(thread, namespace, channel, version) of each value in a channel_values row."""
        for channel, version in zip(self.value_channels, self.value_versions):
            yield self.thread_id, self.checkpoint_ns, channel, version

    @property
    def where(self) -> str:
        return f"thread {shown(self.thread_id)}, checkpoint {shown(self.checkpoint_id)}"


def _run_cuts(row: Sequence[Any], thread_id: str) -> tuple[str, bytes, tuple[int, ...], tuple[int, ...]]:
    """A Detail row of part 'r' as (type, bytes, each item's idx, each one's length).
    Raises DeserializationError (naming the run's version) when the cuts do not cover the
    bytes exactly."""
    type_, data, cuts = row[Detail.TYPE], row[Detail.VALUE] or b"", row[Detail.ITEM_CUTS] or b""
    count, odd = divmod(len(cuts), 8)
    pairs = struct.unpack(f">{'iI' * count}", cuts) if not odd else ()
    sizes = pairs[1::2]
    if not sizes or sum(sizes) != len(data):
        raise DeserializationError(
            f"thread {shown(thread_id)}, channel {shown(row[Detail.CHANNEL])}, version {shown(row[Detail.VERSION])}: "
            "a run of stored items whose lengths do not cut its bytes exactly"
        )
    return type_, data, pairs[::2], sizes


def add_run(group: ItemGroup, row: Sequence[Any], thread_id: str) -> None:
    """A Detail row of part 'r' into its version's `group`: whole (see core.item_group),
    unless its items are stored compressed (each is inflated once, as `item_run` does)."""
    type_, data, idxs, sizes = _run_cuts(row, thread_id)
    if not is_compressed(type_):
        group.add_run(type_, data, idxs, sizes)
    else:
        group.update(_cut(row, thread_id, type_, data, idxs, sizes))


def item_run(row: Sequence[Any], thread_id: str) -> RawItems:
    """The items of a Detail row of part 'r' by idx: its bytes cut as ITEM_CUTS says, each
    inflated once. Raises DeserializationError (naming the run's version) when the cuts
    do not cover the bytes exactly."""
    return _cut(row, thread_id, *_run_cuts(row, thread_id))


def _cut(row: Sequence[Any], thread_id: str, type_: str, data: bytes, idxs: Sequence[int], sizes: Sequence[int]) -> RawItems:
    channel, version = row[Detail.CHANNEL], row[Detail.VERSION]
    ends = list(accumulate(sizes))
    spans = zip(idxs, [0, *ends[:-1]], ends)
    if is_compressed(type_):
        return {
            idx: unpacked_item(type_, data[start:end], partial(_item_named, thread_id, channel, version, idx)) for idx, start, end in spans
        }
    return {idx: (type_, data[start:end]) for idx, start, end in spans}


# A pending write as fetched: (task_id, channel, task_path, idx, type, data); type None
# when data is already the value (a write stored as items, rebuilt by `resolve_writes`).
WriteRow = tuple[str, str, str, int, "str | None", Any]


def write_row(row: Sequence[Any]) -> WriteRow:
    """A Detail row of part 'w' as a WriteRow."""
    return (row[Detail.TASK_ID], row[Detail.CHANNEL], row[Detail.TASK_PATH], row[Detail.IDX], row[Detail.TYPE], row[Detail.VALUE])


def _unpacked_writes(data: bytes | None, where: Where) -> list[Any]:
    """The (idx, channel, type, bytes) of a packed writes row, checked entry by entry."""
    try:
        if msgpack_bounds.NEEDED:
            msgpack_bounds.check_lengths(data or b"")
        entries = ormsgpack.unpackb(data or b"")
    except Exception as exc:
        raise caused(DeserializationError(f"{named(where)}: its packed writes row cannot be decoded ({type(exc).__name__})"), exc) from exc
    if not isinstance(entries, list) or not all(
        isinstance(e, list)
        and len(e) == 4
        and type(e[0]) is int
        and isinstance(e[1], str)
        and isinstance(e[2], str)
        and (e[3] is None or isinstance(e[3], bytes))
        for e in entries
    ):
        raise DeserializationError(f"{named(where)}: its packed writes row is malformed (not [idx, channel, type, bytes] entries)")
    return entries


def unpack_writes(writes: Iterable[WriteRow], where: Callable[[str], str] = lambda task: f"task {shown(task)}") -> list[WriteRow]:
    """Rows as fetched, with each packed row turned back into its writes (`where(task_id)`
    names one for errors).

    A packed row is only written for a task with no writes at that checkpoint yet, so
    its writes came first: where a row of the same task has the same index (two re-runs
    that raced, or a row written before packed rows named the indexes they hold), the
    packed write is the one kept, as a first write is kept by the official saver.
    """
    packed_rows: list[WriteRow] = []
    plain: list[WriteRow] = []
    for write in writes:
        (packed_rows if write[4] == PACKED_WRITES_TYPE else plain).append(write)
    if not packed_rows:
        return plain
    packed: list[WriteRow] = []
    for task_id, _channel, path, _idx, _type, data in sorted(packed_rows, key=lambda w: w[3]):  # raced rows: a fixed order
        packed.extend((task_id, ch, path, i, t, d) for i, ch, t, d in _unpacked_writes(data, partial(where, task_id)))
    seen: set[tuple[str, int]] = set()
    out = []
    for write in packed + plain:
        if (write[0], write[3]) not in seen:
            seen.add((write[0], write[3]))
            out.append(write)
    return out


def resolve_writes(
    codec: Codec,
    writes: Sequence[WriteRow],
    items: Callable[[str], Mapping[list_layout.Location, Any]],
    *,
    decoded: bool,
    where: Callable[[WriteRow], str],
) -> list[WriteRow]:
    """The writes, with each one stored as items rebuilt from `items(channel)` (their raw
    bytes, or with `decoded` the items themselves)."""
    return [
        (*w[:4], None, list_layout.load_write(codec, w[5], items(w[1]), decoded, where=partial(where, w)))
        if w[4] == list_layout.WRITE_ITEMS_TYPE
        else w
        for w in writes
    ]


def build_tuple(
    codec: Codec,
    row: CheckpointRow,
    values: Mapping[tuple[str, str], Any],
    writes: Iterable[WriteRow],
    *,
    required: Iterable[str] | None = None,
    where: str | None = None,
) -> CheckpointTuple:
    """A CheckpointTuple from its row, its decoded values by (channel, version), its writes
    (`where`: the row's `where`, when the caller made it already).

    Every value the row holds must be among `values` (or, for a read that fetched only
    some, those of the `required` channels): a missing one is an integrity error.
    """
    where = row.where if where is None else where
    channel_values = codec.load_inline(row.body.get("channel_values"), where=where)
    needed = None if required is None else set(required)
    for channel, version in zip(row.value_channels, row.value_versions):
        try:
            channel_values[channel] = values[(channel, version)]
        except KeyError:
            if needed is not None and channel not in needed:
                continue
            raise CheckpointIntegrityError(
                f"{where}: channel {shown(channel)} "
                f"holds version {shown(version)}, whose value is not stored (its row was deleted, or the put "
                "that wrote this checkpoint raced a delete); the state would lack the channel"
            ) from None
    checkpoint = {**row.body, "id": row.checkpoint_id, "channel_values": channel_values}
    ordered = sorted(writes, key=lambda w: writes_sort_key(w[2], w[0], w[3]))
    # (task, channel, type, bytes) of each write to decode: one rebuilt from items has its value already
    stored = [(task_id, channel, type_, data) for task_id, channel, _path, _idx, type_, data in ordered if type_ is not None]
    loaded = iter(
        codec.load_each([(type_, data) for _, _, type_, data in stored], lambda i: partial(_write_named, where, stored[i][0], stored[i][1]))
    )
    pending: list[PendingWrite] = [
        (task_id, channel, data if type_ is None else next(loaded)) for task_id, channel, _path, _idx, type_, data in ordered
    ]
    key = CheckpointKey(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
    parent = key.config(row.parent_checkpoint_id) if row.parent_checkpoint_id else None
    return CheckpointTuple(
        config=key.config(),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=load_metadata(codec, row.metadata, row.metadata_exact, where=where),  # type: ignore[arg-type]
        parent_config=parent,
        pending_writes=pending,
    )


# -- get_tuple --------------------------------------------------------------------------------


def _part_named(row: Sequence[Any]) -> str:
    """What a Detail row holds, for an error about its object (not the checkpoint: the caller's)."""
    part = row[Detail.PART]
    if part == Part.WRITE:
        return f"pending write of task {shown(row[Detail.TASK_ID])} to channel {shown(row[Detail.CHANNEL])}"
    if part == Part.ITEM:
        return f"item {row[Detail.IDX]} of channel {shown(row[Detail.CHANNEL])} (version {shown(row[Detail.VERSION])})"
    return f"channel {shown(row[Detail.CHANNEL])} (version {shown(row[Detail.VERSION])})"


def get_tuple_references(key: CheckpointKey, rows: Sequence[Sequence[Any]]) -> list[tuple[ObjectRef, str]]:
    """The objects a `get_tuple` result references, each with what it is for errors."""
    checkpoint_id = next((row[Detail.CHECKPOINT_ID] for row in rows if row[Detail.PART] == Part.CHECKPOINT), key.checkpoint_id)
    return [
        (ref, f"thread {shown(key.thread_id)}, checkpoint {shown(checkpoint_id)}, {_part_named(rows[i])}")
        for i, ref in references(rows, DETAIL_REFS)
    ]


@dataclass
class TupleRead:
    """A decoded get_tuple: the tuple (None: no such checkpoint), the states of the lists it
    rebuilt (for the writer's memory) and the item groups it fetched (for the item cache)."""

    found: CheckpointTuple | None
    states: list[tuple[str, ListState]] = field(default_factory=list)
    fetched: dict[tuple[str, str], RawItems] = field(default_factory=dict)


def decode_tuple(
    codec: Codec,
    key: CheckpointKey,
    rows: Sequence[Sequence[Any]],
    held: Mapping[tuple[str, str], RawItems] | None = None,
    known: Mapping[tuple[str, str], ListState] | None = None,
) -> TupleRead:
    """Decode the `Detail` rows of `sql.reads.get_tuple`.

    `held` are item groups the saver has the bytes of, `known` list versions it has the
    states of (the statement sent neither their chains nor their items).
    """
    row: CheckpointRow | None = None
    values: dict[tuple[str, str], Any] = {}
    writes: list[WriteRow] = []
    list_rows: dict[tuple[str, str], list_layout.StoredList] = {}
    fetched: dict[tuple[str, str], RawItems] = {}
    wanted: list[tuple[str, str]] = []
    for r in rows:
        part = r[Detail.PART]
        if part == Part.ITEM:
            channel, version, idx, type_, data = r[Detail.CHANNEL], r[Detail.VERSION], r[Detail.IDX], r[Detail.TYPE], r[Detail.VALUE]
            items = fetched.get((channel, version))
            if items is None:
                items = fetched[(channel, version)] = {}
            # Inflated once, for the decode and the cache (most items are stored as they are:
            # a cold read of a chat takes hundreds, each a row).
            items[idx] = (
                (type_, data)
                if data is not None and not is_compressed(type_)
                else unpacked_item(type_, data, partial(_item_named, key.thread_id, channel, version, idx))
            )
        elif part == Part.ITEM_RUN:
            # A version with runs keeps them whole (a version written an item a step, most of
            # a chat's, stays a dict: an ItemGroup costs it more than it saves).
            group = fetched.get((r[Detail.CHANNEL], r[Detail.VERSION]))
            if not isinstance(group, ItemGroup):
                loose, group = group, ItemGroup()
                group.update(loose or {})
                fetched[(r[Detail.CHANNEL], r[Detail.VERSION])] = group
            add_run(group, r, key.thread_id)
        elif part == Part.CHECKPOINT:
            row = CheckpointRow.from_row(r, CHECKPOINT_IN_DETAIL)
        elif part == Part.WRITE:
            writes.append(write_row(r))
        elif r[Detail.TYPE] == list_layout.LIST_TYPE:  # a value or a link in the delta layout
            channel, version = r[Detail.CHANNEL], r[Detail.VERSION]
            list_rows[(channel, version)] = list_layout.stored(
                r[Detail.LIST_CHAIN],
                r[Detail.VALUE],
                r[Detail.ITEM_VERSIONS],
                where=partial(value_named, key.thread_id, channel, version),
            )
            if part == Part.VALUE:
                wanted.append((channel, version))
        elif part == Part.VALUE:
            channel, version = r[Detail.CHANNEL], r[Detail.VERSION]
            values[(channel, version)] = codec.load(
                r[Detail.TYPE], r[Detail.VALUE], where=partial(value_named, key.thread_id, channel, version, row)
            )
    if row is None:
        return TupleRead(None, [], fetched)
    where = row.where
    raw_items = {**(held or {}), **fetched}
    states = []
    if wanted:
        restored = list_layout.read_lists(
            codec,
            wanted=wanted,
            rows=list_rows,
            raw_items=raw_items,
            known=known,
            where=lambda ch, v: f"{where}, channel {shown(ch)}",
        )
        for (channel, version), (value, state) in restored.items():
            values[(channel, version)] = value
            if state is not None:
                states.append((channel, state))
    writes = unpack_writes(writes, lambda task: f"{where}, task {shown(task)}")
    if any(w[4] == list_layout.WRITE_ITEMS_TYPE for w in writes):
        by_channel: dict[str, dict[list_layout.Location, tuple[str, bytes]]] = {}
        for (channel, version), group in raw_items.items():
            by_channel.setdefault(channel, {}).update(((version, idx), raw) for idx, raw in group.items())
        writes = resolve_writes(
            codec,
            writes,
            lambda channel: by_channel.get(channel, {}),
            decoded=False,
            where=lambda w: f"{where}, write of task {shown(w[0])} to channel {shown(w[1])}",
        )
    return TupleRead(build_tuple(codec, row, values, writes, where=where), states, fetched)


# -- list() pages ---------------------------------------------------------------------------

Lane = tuple[str, str]  # thread_id, checkpoint_ns
ValueKey = tuple[str, str, str, str]  # thread, namespace, channel, version


@dataclass
class Details:
    """A `page_details` result, gathered by lane: plain values (decoded), list rows, the list
    versions the page's checkpoints hold, items (inflated), and writes by checkpoint."""

    values: dict[ValueKey, Any] = field(default_factory=dict)
    list_rows: dict[Lane, dict[tuple[str, str], list_layout.StoredList]] = field(default_factory=dict)
    wanted: dict[Lane, list[tuple[str, str]]] = field(default_factory=dict)
    raw_items: dict[Lane, dict[tuple[str, str], RawItems]] = field(default_factory=dict)
    writes: dict[tuple[str, str, str], list[WriteRow]] = field(default_factory=dict)


def gather_details(codec: Codec, rows: Sequence[Sequence[Any]]) -> Details:
    """Sort the `Detail` rows of `sql.reads.page_details` by lane and part, decoding plain values."""
    out = Details()
    for r in rows:
        part, thread_id, ns = r[Detail.PART], r[Detail.THREAD_ID], r[Detail.CHECKPOINT_NS]
        lane = (thread_id, ns)
        if part == Part.ITEM:
            channel, version, idx = r[Detail.CHANNEL], r[Detail.VERSION], r[Detail.IDX]
            out.raw_items.setdefault(lane, {}).setdefault((channel, version), {})[idx] = unpacked_item(  # inflated once
                r[Detail.TYPE], r[Detail.VALUE], partial(_item_named, thread_id, channel, version, idx)
            )
        elif part == Part.WRITE:
            out.writes.setdefault((thread_id, ns, r[Detail.CHECKPOINT_ID]), []).append(write_row(r))
        elif r[Detail.TYPE] == list_layout.LIST_TYPE:
            channel, version = r[Detail.CHANNEL], r[Detail.VERSION]
            out.list_rows.setdefault(lane, {})[(channel, version)] = list_layout.stored(
                r[Detail.LIST_CHAIN],
                r[Detail.VALUE],
                r[Detail.ITEM_VERSIONS],
                where=partial(value_named, thread_id, channel, version),
            )
            if part == Part.VALUE:
                out.wanted.setdefault(lane, []).append((channel, version))
        elif part == Part.VALUE:
            channel, version = r[Detail.CHANNEL], r[Detail.VERSION]
            out.values[(thread_id, ns, channel, version)] = codec.load(
                r[Detail.TYPE], r[Detail.VALUE], where=partial(value_named, thread_id, channel, version)
            )
    return out


def page_references(page: Sequence[CheckpointRow], rows: Sequence[Sequence[Any]]) -> list[tuple[ObjectRef, str]]:
    """The objects a page's details reference, each with what it is for errors."""
    found = references(rows, DETAIL_REFS)
    if not found:
        return []
    holder = {k: row.checkpoint_id for row in reversed(page) for k in row.value_keys}
    out = []
    for i, ref in found:
        r = rows[i]
        part, thread_id, ns = r[Detail.PART], r[Detail.THREAD_ID], r[Detail.CHECKPOINT_NS]
        if part == Part.VALUE:
            checkpoint_id = holder.get((thread_id, ns, r[Detail.CHANNEL], r[Detail.VERSION]))
        elif part == Part.WRITE:
            checkpoint_id = r[Detail.CHECKPOINT_ID]
        else:
            checkpoint_id = None  # a link or an item: shared by several checkpoints
        out.append((ref, f"thread {shown(thread_id)}, checkpoint {shown(checkpoint_id)}, {_part_named(r)}"))
    return out
