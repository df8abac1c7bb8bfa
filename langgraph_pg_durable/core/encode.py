"""Statement parameters from what LangGraph hands a saver: a put's checkpoint, a task's
pending writes, a get_tuple's key. Values are placed here (inline, list items, object
references); nothing is sent.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, CheckpointMetadata

from ..errors import ConfigError, SerializationError, Where, caused, named, shown
from . import lists as list_layout
from .arrays import ByteaArray, Int4Array, Int8Array, TextArray
from .codec import Codec, dump_json
from .keys import CheckpointKey, id_text, is_mapping, parse_config, require_text, version_text
from .lists import ItemRow, ListBases, ListPolicy, ListState
from .metadata import dump_metadata, merge_metadata
from .offload import ObjectRef, Placement, Upload
from .runs import has_next_tasks
from .actions import NULL_TASK_ID, SPECIAL_WRITE_IDX, TaskWrites, describe, run_status


PACKED_WRITES_TYPE: Final = "langgraph-pg-durable/writes-v1"  # one row holding several writes of a task


def packable(task_id: str, writes: int, special: int, offloaded: int, item_writes: int) -> bool:
    """Whether a task's writes go in one row: a row per write costs ~330 bytes with its
    index entry, more than a step counter or a routing flag it holds, and the row holds the
    task's action (sql.action_row.FOLDED): one write is packed too. Not for special
    channels (replaced one by one), offloaded values or writes stored as items of more
    than one list (their row names one object, one write key), nor for the null task,
    whose writes LangGraph sends again with more appended (each time a task has writes
    stored already, a packed row costs a second statement: see `sql.writes.put_packed_writes`).
    The counts are of the task's `writes`: to special channels, offloaded, stored as items."""
    return writes > 0 and task_id != NULL_TASK_ID and not special and not offloaded and item_writes <= 1


@dataclass(slots=True)  # made on every put or put_writes: not frozen (see core.plan.Query)
class PutParams:
    """What `put` sends (`params` of `sql.writes.put`), the config it returns, the objects to
    store first, the list versions it stores (for the writer's memory) and the items it
    stores inline by (channel, version) (for the item cache)."""

    params: dict[str, Any]
    config: RunnableConfig
    uploads: list[Upload]
    states: list[tuple[str, ListState]]
    item_groups: dict[tuple[str, str], list_layout.RawItems]

    @property
    def plain(self) -> bool:
        """No list in the delta layout, nothing offloaded: `sql.writes.put_plain` stores it,
        and `params` leaves out the list and object parameters only `put` reads."""
        return not self.states and not self.uploads


# What a value being stored is, for an error message: built only when one is raised (`partial` of these).
def _checkpoint_named(thread_id: str, checkpoint_id: str) -> str:
    return f"thread {shown(thread_id)}, checkpoint {shown(checkpoint_id)}"


def _channel_named(where: Where, channel: str) -> str:
    return f"{named(where)}, channel {shown(channel)}"


def task_named(thread_id: str, checkpoint_id: str | None, task_id: str) -> str:
    """A task's writes at a checkpoint (history's reads name them alike)."""
    return f"thread {shown(thread_id)}, checkpoint {shown(checkpoint_id)}, task {shown(task_id)}"


def _write_named(where: Where, channel: str) -> str:
    return f"{named(where)}, write to channel {shown(channel)}"


def _value_named(what: Where) -> str:
    return f"the value of {named(what)}"


def _written_value_named(where: Where, channel: str) -> str:
    return _value_named(functools.partial(_write_named, where, channel))


def put_params(
    codec: Codec,
    config: RunnableConfig,
    checkpoint: Any,  # a Checkpoint, as a rule: anything else is named (ConfigError), below
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    placement: Placement,
    lists: ListPolicy,
    bases: ListBases | None,
    *,
    use_offers: bool = True,
    run_id: str | None = None,
    key: CheckpointKey | None = None,
) -> PutParams:
    """The parameters of a put. `bases` (the saver's memory) names the list versions the
    parent checkpoint holds, which a delta extends; without it every list is a snapshot.
    With `use_offers`, items the parent's pending writes stored are used, not stored again.
    `run_id` is the run the saver assigned; a `run_id` in the metadata wins over it.
    `key`: the config's, when the caller parsed it already."""
    key = parse_config(config) if key is None else key
    readable = is_mapping(checkpoint)
    for field in ("id", "channel_values", "channel_versions"):
        value = checkpoint.get(field) if readable else None
        if not (isinstance(value, str) if field == "id" else is_mapping(value)):
            raise ConfigError(
                f"put on thread {shown(key.thread_id)}: the checkpoint has no {field!r} "
                f"({'a string' if field == 'id' else 'a mapping'}); pass the checkpoint LangGraph built"
            )
    checkpoint_id = require_text(checkpoint["id"], "checkpoint id")
    where = functools.partial(_checkpoint_named, key.thread_id, checkpoint_id)
    values = checkpoint["channel_values"]

    # Built as the arrays they are sent as (not copied into them at the end).
    channels, versions, types, blobs = TextArray(), TextArray(), TextArray(), ByteaArray()
    refs: list[ObjectRef | None] = []
    chains: list[str | None] = []
    item_versions: list[str | None] = []
    items: list[ItemRow] = []
    uploads: list[Upload] = []
    states: list[tuple[str, ListState]] = []
    needed: list[tuple[str, str]] = []
    needed_items: list[tuple[str, str]] = []
    inline_values = codec.dump_inline(values, where=where)
    # A parent seen committed stands for what it holds, its lists' chains included (see
    # sql.writes._missing_bases): what the put carries over from it is not checked one by one.
    parent_versions = bases.versions_of(key.thread_id, key.checkpoint_ns, key.checkpoint_id) if bases is not None else None
    for channel, version in new_versions.items():
        if channel not in values or channel in inline_values:
            continue
        channel = require_text(channel, "channel")
        version = version_text(version, channel)
        what = functools.partial(_channel_named, where, channel)
        value = values[channel]
        layout = list_layout.usable(value, version, lists.snapshot_every)
        base = bases.base(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channel) if layout and bases is not None else None
        whole = None
        if layout and base is None and lists.min_bytes > 0:
            # Not extending a list already in the delta layout: a short one stays whole.
            whole = codec.dump(value, channel=channel, where=where)
            layout = len(whole[1]) > lists.min_bytes
        if layout:
            offered = (
                bases.offered(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channel) if use_offers and bases is not None else {}
            )
            objects = bases.offered_objects(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channel) if offered and bases else None
            row = list_layout.plan(
                codec,
                channel=channel,
                version=version,
                value=value,
                base=base,
                snapshot_every=lists.snapshot_every,
                placement=placement,
                where=what,
                offered=offered,
                offered_objects=objects,
            )
            type_, ref = list_layout.LIST_TYPE, None
            inline: bytes | None = row.value
            chains.append(list_layout.CHAIN_SEPARATOR.join(row.chain))
            item_versions.append(list_layout.CHAIN_SEPARATOR.join(row.item_versions))
            items.extend(row.items)
            uploads.extend(row.uploads)
            states.append((channel, row.state))
            if base is None or parent_versions is None or parent_versions.get(channel) != base.version:
                needed.extend((channel, v) for v in row.needs)
            needed_items.extend((channel, v) for v in row.item_needs)
        else:
            type_, data = whole or codec.dump(value, channel=channel, where=where)
            inline, ref = placement.place_named(data, _value_named, what)
            chains.append(None)
            item_versions.append(None)
            if ref is not None:
                uploads.append(Upload(ref, data, f"put of {named(what)}"))
        channels.append(channel)
        versions.append(version)
        types.append(type_)
        blobs.append(inline)
        refs.append(ref)

    all_versions = checkpoint["channel_versions"]
    for ch in values:
        if all_versions.get(ch) is None:
            raise ConfigError(f"channel {shown(ch)} has a value but no entry in channel_versions ({named(where)})")
    # The id is the row's checkpoint_id column; build_tuple puts it back.
    body = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    if inline_values:
        body["channel_values"] = inline_values
    if parent_versions is not None and needed:
        needed = [(channel, version) for channel, version in needed if parent_versions.get(channel) != version]
    # The values it holds but does not write now must still be stored when it commits (a
    # delete_thread or a prune may have taken them): else it writes nothing, and the
    # saver sends it again writing every value it holds (see SaverCore._put_plan). Those
    # its parent, seen committed, holds at the same version are not checked one by one.
    written = dict(zip(channels, versions)) if channels else {}
    value_channels, value_versions = TextArray(), TextArray()
    for ch in values:
        if ch in inline_values:
            continue
        version = version_text(all_versions[ch], ch)
        value_channels.append(require_text(ch, "channel"))
        value_versions.append(version)
        if written.get(ch) != version and (parent_versions is None or parent_versions.get(ch) != version):
            needed.append((ch, version))
    try:
        body_json = dump_json(body)
    except (TypeError, ValueError) as exc:
        not_json = SerializationError(f"checkpoint {shown(checkpoint_id)} of thread {shown(key.thread_id)} is not JSON: {exc}")
        raise caused(not_json, exc) from exc

    stored_metadata = merge_metadata(config, metadata)
    metadata_json, metadata_exact = dump_metadata(codec, stored_metadata)
    step = stored_metadata.get("step")
    given_run_id = stored_metadata.get("run_id")
    if given_run_id is not None:
        run_id = id_text(given_run_id, "metadata['run_id']")
    source = stored_metadata.get("source")
    step_value = step if isinstance(step, int) and not isinstance(step, bool) and -(2**31) <= step < 2**31 else None
    root = key.checkpoint_ns == ""
    params: dict[str, Any] = {
        "thread_id": key.thread_id,
        "checkpoint_ns": key.checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": key.checkpoint_id,
        "run_id": run_id,
        "step": step_value,
        # The run's row (run_log): a root checkpoint moves its last step and sets its status.
        "run_step": step_value if root else None,
        "run_status": ("running" if has_next_tasks(checkpoint) else "done") if root else "running",
        "source": source.replace("\x00", "") if isinstance(source, str) else None,
        "checkpoint": body_json,
        "value_channels": value_channels,
        "value_versions": value_versions,
        "metadata": metadata_json,
        "metadata_exact": metadata_exact,
        "channels": channels,
        "versions": versions,
        "types": types,
        "values": blobs,
        "check_parent": key.checkpoint_id if parent_versions is not None else None,
        "base_channels": TextArray([c for c, _ in needed]),
        "base_versions": TextArray([v for _, v in needed]),
    }
    built = PutParams(params, key.config(checkpoint_id), uploads, states, {})
    if not built.plain:  # (a plain put has no list items, no item needs, no references)
        params.update(_ref_params(refs))
        params["base_item_channels"] = TextArray(c for c, _ in needed_items)
        params["base_item_versions"] = TextArray(v for _, v in needed_items)
        params["list_chains"] = TextArray(chains)
        params["item_versions"] = TextArray(item_versions)
        params.update(_item_params(items))
        built.item_groups = inline_item_groups(items)
    return built


def inline_item_groups(items: Sequence[ItemRow]) -> dict[tuple[str, str], list_layout.RawItems]:
    """The list items a write stores inline, grouped by (channel, version), for the item
    cache: as serialized, not as stored (the cache holds items decompressed). A group with an
    offloaded item is left out."""
    groups: dict[tuple[str, str], list_layout.RawItems] = {}
    offloaded = set()
    for item in items:
        if item.data is None:
            offloaded.add((item.channel, item.version))
        groups.setdefault((item.channel, item.version), {})[item.idx] = item.unpacked
    return {k: v for k, v in groups.items() if k not in offloaded}


def _item_params(items: Sequence[ItemRow]) -> dict[str, Any]:
    """The channel_items rows a put introduces, as aligned arrays (the references as in `_ref_params`)."""
    return {
        "item_channels": TextArray(i.channel for i in items),
        "item_of": TextArray(i.version for i in items),
        "item_idx": Int4Array(i.idx for i in items),
        "item_types": TextArray(i.type for i in items),
        "item_values": ByteaArray(i.data for i in items),
        **{f"item_{name}": value for name, value in _ref_params([i.ref for i in items]).items()},
    }


@dataclass(slots=True)  # made on every put or put_writes: not frozen (see core.plan.Query)
class WritesParams:
    """What `put_writes` sends: the parameters every form shares (`params`), each write in its
    own row (`rows()`), and, for a task whose writes can share one row, that row (`packed`,
    tried first: see `sql.writes.put_packed_writes`).

    `replace`: every write is to a special channel, whose rows a retry overwrites;
    `uploads`: objects to store first; `offers`: the items stored per channel, and their
    objects (for the child's delta); `item_groups`: the items stored inline, decompressed (for the item cache).
    """

    params: dict[str, Any]
    packed: dict[str, Any] | None
    replace: bool
    uploads: list[Upload]
    offers: list[tuple[str, list[tuple[bytes, list_layout.Location]], list[list_layout.OfferedObject]]]
    item_groups: dict[tuple[str, str], list_layout.RawItems]
    # (indexes, channels, types, values, references, item keys) of the writes, one each.
    writes: tuple[list[int], list[str], list[str], list[bytes | None], list[ObjectRef | None], list[str | None]]

    def rows(self) -> dict[str, Any]:
        """The parameters of `put_writes` and `put_writes_items`: each write in its own row.
        Made only when they are sent (no packed row, or a task's re-run): most tasks' writes
        go in their packed row alone."""
        idx, channels, types, blobs, refs, item_keys = self.writes
        rows = {
            **self.params,
            "idx": Int4Array(idx),
            "channels": TextArray(channels),
            "types": TextArray(types),
            "values": ByteaArray(blobs),
            **_ref_params(refs),
        }
        if self.has_items:
            rows["write_item_versions"] = TextArray(item_keys)
        return rows

    @property
    def has_items(self) -> bool:
        return "item_channels" in self.params


def put_writes_params(
    codec: Codec,
    config: RunnableConfig,
    writes: TaskWrites,
    task_id: str,
    task_path: str,
    placement: Placement,
    lists: ListPolicy,
    bases: ListBases | None = None,
    log: TaskLog | None = None,
    *,
    key: CheckpointKey | None = None,
    list_bases: Mapping[str, ListState] | None = None,
) -> WritesParams:
    """Parameters of `sql.writes.put_writes` (and of `put_packed_writes` when packable);
    with `log`, of the task's action row too.

    A write to a channel whose version in this checkpoint is a list in the delta layout
    (the writer's memory knows it) stores its items in channel_items: the next version's
    delta uses them rather than storing them again. `list_bases`: those versions by channel
    (`write_bases`), when the caller looked them up already.
    """
    key = parse_config(config, need_checkpoint_id=True) if key is None else key
    if list_bases is None:
        list_bases = write_bases(bases, lists, key, writes)
    where = functools.partial(task_named, key.thread_id, key.checkpoint_id, task_id)
    idx: list[int] = []
    channels: list[str] = []
    types: list[str] = []
    blobs: list[bytes | None] = []
    item_keys: list[str | None] = []
    refs: list[ObjectRef | None] = []
    uploads: list[Upload] = []
    items: list[ItemRow] = []
    offers: list[tuple[str, list[tuple[bytes, list_layout.Location]], list[list_layout.OfferedObject]]] = []
    special = 0  # writes to LangGraph's special channels (__error__, __interrupt__, ...)
    for i, (channel, value) in enumerate(writes):
        special_idx = SPECIAL_WRITE_IDX.get(channel)
        if special_idx is not None:
            special += 1
        idx.append(i if special_idx is None else special_idx)
        channels.append(require_text(channel, "channel"))
        if channel in list_bases:
            what = functools.partial(_write_named, where, channel)
            stored = list_layout.write_items(
                codec,
                channel=channel,
                value=value,
                identity=f"{key.checkpoint_id}\x00{task_id}\x00{i}",
                placement=placement,
                where=what,
            )
            types.append(list_layout.WRITE_ITEMS_TYPE)
            blobs.append(stored.body)
            refs.append(None)
            item_keys.append(stored.key)
            items.extend(stored.items)
            uploads.extend(stored.uploads)
            offers.append((channel, stored.offered, stored.objects))
            continue
        type_, data = codec.dump(value, channel=channel, where=where)
        inline, ref = placement.place_named(data, _written_value_named, where, channel)
        types.append(type_)
        blobs.append(inline)
        refs.append(ref)
        item_keys.append(None)
        if ref is not None:
            uploads.append(Upload(ref, data, f"put_writes of {_write_named(where, channel)}"))
    params: dict[str, Any] = {
        "thread_id": key.thread_id,
        "checkpoint_ns": key.checkpoint_ns,
        "checkpoint_id": key.checkpoint_id,
        "task_id": require_text(task_id, "task_id"),
        "task_path": require_text(task_path or "", "task_path"),
        "packed_type": PACKED_WRITES_TYPE,
        # A checkpoint seen committed must still be stored: else nothing is written (a
        # rewound history, see sql.writes.checkpoint_gone).
        "check_checkpoint": key.checkpoint_id
        if bases is not None and bases.versions_of(key.thread_id, key.checkpoint_ns, key.checkpoint_id) is not None
        else None,
    }
    packed: dict[str, Any] | None = None
    offloaded = len(refs) - refs.count(None)
    if packable(task_id, len(idx), special, offloaded, len(item_keys) - item_keys.count(None)):
        item_key = next((k for k in item_keys if k is not None), None)
        packed = {
            **params,
            # Stored at the index of the task's last write: the row holds indexes 0 to
            # packed_idx, which the statements of a later put_writes can see unopened.
            "packed_idx": idx[-1],
            "packed_channel": channels[item_keys.index(item_key)] if item_key is not None else channels[0],
            "packed_value": ormsgpack.packb([[i, ch, t, d] for i, ch, t, d in zip(idx, channels, types, blobs)]),
            "packed_item_version": item_key,
        }
    if items:
        item_params = _item_params(items)  # (arrays no one changes: both forms send the same)
        params.update(item_params)
        if packed is not None:
            packed.update(item_params)
    if log is not None:
        logged = _action_params(codec, key, writes, task_id, task_path, refs if offloaded else (), log)
        params.update(logged)
        if packed is not None:
            packed.update(logged)
    replace = bool(writes) and special == len(writes)
    return WritesParams(
        params, packed, replace, uploads, offers, inline_item_groups(items) if items else {}, (idx, channels, types, blobs, refs, item_keys)
    )


def write_bases(bases: ListBases | None, lists: ListPolicy, key: CheckpointKey, writes: TaskWrites) -> Mapping[str, ListState]:
    """The list versions in the delta layout that a task's writes to `key`'s checkpoint
    extend, by channel (their items are stored for the next put: see `put_writes_params`).
    Empty, as a rule (one lookup for the task's writes, not one a write)."""
    if bases is None or lists.snapshot_every <= 1 or not writes:
        return {}
    channels = [channel for channel, _ in writes if isinstance(channel, str) and channel not in SPECIAL_WRITE_IDX]
    return bases.bases_of(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channels) if channels else {}


@dataclass(slots=True)  # made on every put or put_writes: not frozen (see core.plan.Query)
class TaskLog:
    """What a task's action row needs besides its writes: its run (None: not known), the
    step it ran in (None: the statement reads it from the checkpoint), and the node of
    each pending Send of the checkpoint it ran from (None: not known), and which of the
    messages it wrote were already in the channel, and as what, and the name of the agent
    its subgraph is (see `actions.describe`)."""

    run_id: str | None
    step: int | None
    sends: Sequence[str] | None
    prior_messages: Mapping[str, Any] | None = None
    agent_label: str | None = None
    messages: Sequence[list[Any] | None] | None = None  # of each write (actions.messages_of)


def _action_params(
    codec: Codec,
    key: CheckpointKey,
    writes: TaskWrites,
    task_id: str,
    task_path: str,
    refs: Sequence[ObjectRef | None],
    log: TaskLog,
) -> dict[str, Any]:
    """The parameters of a task's action row and its run's row (see `sql.writes._task_log`)."""
    action = describe(
        writes,
        checkpoint_ns=key.checkpoint_ns,
        task_id=task_id,
        task_path=task_path or "",
        sends=log.sends,
        offloaded={i: (ref.key, ref.size) for i, ref in enumerate(refs) if ref is not None} if refs else None,
        encrypted=codec.encrypted,
        prior_messages=log.prior_messages,
        agent_label=log.agent_label,
        found=log.messages,
    )
    return {
        "run_id": log.run_id,
        "action_step": log.step,
        "action_idx": action.idx,
        "agent": action.agent,
        "action_type": action.action_type,
        "payload": action.payload,
        "run_status": run_status(action.action_type, key.checkpoint_ns),
    }


_NO_REFS: Final[Mapping[str, None]] = {"object_keys": None, "object_shas": None, "object_sizes": None}


def _ref_params(refs: Sequence[ObjectRef | None]) -> Mapping[str, Any]:
    """The object-reference columns, aligned with the values (NULL where a value is inline).
    Without any reference each is a NULL array: the statements' unnest() of several arrays
    pads a shorter one with NULLs, and a NULL costs nothing to send."""
    if not any(refs):
        return _NO_REFS
    return {
        "object_keys": TextArray(r.key if r else None for r in refs),
        "object_shas": TextArray(r.sha256 if r else None for r in refs),
        "object_sizes": Int8Array(r.size if r else None for r in refs),
    }


def get_tuple_params(key: CheckpointKey, held: Iterable[tuple[str, str]] = (), known: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """Parameters of `sql.reads.get_tuple`: `known` lists (channel, version) are not
    resolved (no chain rows, no items); else `held` item groups are not sent back.

    With known lists the held groups are not sent: the checkpoint most likely holds
    one of those lists, and a thousand keys cost more than fetching, now and then, the
    items of a list that turned out not to be known.
    """
    known = list(known)
    return {
        "thread_id": key.thread_id,
        "checkpoint_ns": key.checkpoint_ns,
        "checkpoint_id": key.checkpoint_id,
        "known": dump_json([] if known else list(held)),
        "known_lists": dump_json(known),
    }
