"""Sans-I/O core: configs in, statement parameters out; fetched rows in, CheckpointTuples out.

Nothing here touches a connection, so the sync and async savers share all of it.
"""

from __future__ import annotations

import base64
import json
import math
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    EXCLUDED_METADATA_KEYS,
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .arrays import ByteaArray, Int4Array, Int8Array, TextArray
from .errors import CheckpointIntegrityError, ConfigError, DeserializationError, SerializationError, shown
from . import lists as list_layout
from .lists import ItemRow, ListPolicy, ListState
from .offload import ObjectRef, Placement, Upload, references
from .safe_serde import BlockedTypeError, PlaintextRefusedError, checked_loads

# Our marker for a metadata value kept in `metadata_exact`: "<serde type>:<payload>".
_EXACT_SEPARATOR = b":"


def dump_json(document: Any) -> str:
    """JSON text for a jsonb parameter; orjson where it can, json for what it refuses (huge ints)."""
    try:
        return orjson.dumps(document).decode()
    except TypeError:
        return json.dumps(document, separators=(",", ":"))


def load_json(text: str | None) -> Any:
    """A jsonb column fetched as text (see `sql.CHECKPOINT_COLUMNS`)."""
    return None if text is None else orjson.loads(text)


@dataclass(frozen=True)
class CheckpointKey:
    """Where a checkpoint lives; `checkpoint_id` None means the thread's latest."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None

    def config(self, checkpoint_id: str | None = None) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": self.checkpoint_ns,
                "checkpoint_id": checkpoint_id or self.checkpoint_id,
            }
        }


def require_text(value: Any, what: str) -> str:
    """A value that must go in a text column: a str PostgreSQL can store (no NUL, no lone
    surrogate, which UTF-8 cannot encode)."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {type(value).__name__} {shown(value)}")
    if "\x00" in value:
        raise ConfigError(f"{what} {shown(value)} contains a NUL character, which PostgreSQL text cannot store")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{what} {shown(value)} contains a lone surrogate, which UTF-8 cannot encode") from None
    return value


def id_text(value: Any, what: str) -> str:
    """An id a caller may give as a str, an int or a UUID (LangGraph passes them through);
    any other type is refused rather than turned into its str()."""
    if isinstance(value, uuid.UUID) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return require_text(value, what)


def version_text(version: Any, channel: str) -> str:
    """A channel version as stored: LangGraph's are str, int or float (get_next_version's)."""
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        return str(version)
    return require_text(version, f"version of channel {shown(channel)}")


def parse_config(config: RunnableConfig | None, *, need_checkpoint_id: bool = False) -> CheckpointKey:
    """The checkpoint a config points at; names any missing or unusable key."""
    configurable = (config or {}).get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(configurable, Mapping):
        raise ConfigError("config['configurable'] is missing: pass {'configurable': {'thread_id': ...}}")
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ConfigError(
            "config['configurable']['thread_id'] is missing: every checkpoint belongs to a thread"
        )
    checkpoint_id = configurable.get("checkpoint_id")
    if need_checkpoint_id and not checkpoint_id:
        raise ConfigError(
            "config['configurable']['checkpoint_id'] is missing: pass the config returned by put()"
        )
    return CheckpointKey(
        thread_id=id_text(thread_id, "config['configurable']['thread_id']"),
        checkpoint_ns=require_text(configurable.get("checkpoint_ns") or "", "config['configurable']['checkpoint_ns']"),
        checkpoint_id=id_text(checkpoint_id, "config['configurable']['checkpoint_id']") if checkpoint_id else None,
    )


def checkpoint_id_of(config: RunnableConfig, what: str) -> str | None:
    """The checkpoint id a config names, or None; nothing else of it is required."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if configurable is None:
        return None
    if not isinstance(configurable, Mapping):
        raise ConfigError(f"{what}['configurable'] must be a mapping, got {type(configurable).__name__}")
    checkpoint_id = configurable.get("checkpoint_id")
    return id_text(checkpoint_id, f"{what}['configurable']['checkpoint_id']") if checkpoint_id else None


LEGACY_VERSION_DIGITS = 20  # versions before 0.2: 20 decimal digits, a dot, 16 hex digits
VERSION_DIGITS = 8  # hex digits of the version number: 4 billion versions of a channel


def next_version(current: str | int | float | None) -> str:
    """A version that sorts after `current` as text; the random tail keeps forks apart.

    Two forks of one parent both reach version n+1 of a channel; values are stored
    once per (thread, namespace, channel, version), so equal versions must not name
    different values: the tail is 64 random bits. A thread begun with the longer,
    pre-0.2 versions keeps their width, so its versions still sort.
    """
    if isinstance(current, str):
        head = current.split(".", 1)[0]
        if len(head) == LEGACY_VERSION_DIGITS:
            return f"{int(head) + 1:020d}.{random.getrandbits(64):016x}"
        number = int(head, 16)
    else:
        number = 0 if current is None else int(current)
    if number + 1 >= 16**VERSION_DIGITS:
        raise ValueError(f"version {shown(current)} is the last one a channel can have")
    tail = base64.urlsafe_b64encode(random.getrandbits(64).to_bytes(8, "big")).rstrip(b"=").decode()
    return f"{number + 1:0{VERSION_DIGITS}x}.{tail}"


# -- serialization ----------------------------------------------------------------


INLINE_MAX_CHARS = 256  # a str value up to this long is kept in the checkpoint row


def is_inline(value: Any) -> bool:
    """Whether a channel value lives in its checkpoint's row rather than a channel_values row.

    Only scalars (None, bool, int, float, short str), by type alone: a put keeps an
    unchanged channel's value where an earlier put stored it, so the choice must not
    depend on anything but the value (not on a saver's settings).
    """
    return value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= INLINE_MAX_CHARS)


def dump_inline(serde: SerializerProtocol, values: Mapping[str, Any], *, where: str) -> dict[str, list[str]]:
    """The scalar channel values a checkpoint row keeps: channel -> [type, base64 of the bytes].

    A row per small value (a step counter, a routing flag) cost more than the value;
    the serializer still makes the bytes, so an EncryptedSerializer covers them.
    """
    out = {}
    for channel, value in values.items():
        if is_inline(value):
            type_, data = dump_value(serde, value, channel=channel, where=where)
            out[require_text(channel, "channel")] = [type_, base64.b64encode(data).decode("ascii")]
    return out


def load_inline(serde: SerializerProtocol, stored: Any, *, where: str) -> dict[str, Any]:
    """The values `dump_inline` kept."""
    if not stored:
        return {}
    try:
        pairs = [(ch, type_, base64.b64decode(data, validate=True)) for ch, (type_, data) in stored.items()]
    except Exception as exc:
        raise DeserializationError(f"{where}: the scalar channel values in its row are malformed "
                                   f"({type(exc).__name__})") from exc
    return {ch: load_value(serde, type_, data, where=f"{where}, channel {shown(ch)}") for ch, type_, data in pairs}


def dump_value(serde: SerializerProtocol, value: Any, *, channel: str, where: str) -> tuple[str, bytes]:
    """Serialize one value, naming the channel when the serializer refuses it."""
    try:
        return serde.dumps_typed(value)
    except Exception as exc:
        raise SerializationError(
            f"cannot serialize the value of channel {shown(channel)} ({where}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc


Where = str | Callable[[], str]  # names a stored thing in an error; a callable is called only then


def named(where: Where) -> str:
    return where() if callable(where) else where


def load_value(serde: SerializerProtocol, type_: str, data: bytes | None, *, where: Where | None = None) -> Any:
    """Deserialize one stored value; any failure (a wrong key, foreign or corrupt bytes, a
    type the serializer refuses) is a DeserializationError naming `where`. Without
    `where` the caller wraps the error (see lists.decode_all)."""
    try:
        return checked_loads(serde, (type_, data if data is not None else b""))
    except Exception as exc:
        if where is None:
            raise
        raise DeserializationError(f"{named(where)}: {decode_failure(type_, exc)}") from exc


def decode_failure(type_: Any, exc: BaseException) -> str:
    """What went wrong decoding a stored value of `type_`, in a line (not the bytes)."""
    if isinstance(exc, (BlockedTypeError, PlaintextRefusedError)):
        return f"the stored value {exc}"
    lines = str(exc).strip().splitlines()
    detail = lines[0][:200] if lines else ""
    return f"the stored value (type {shown(type_, 60)}) cannot be decoded: {type(exc).__name__}: {detail}".rstrip(": ")


# -- metadata -----------------------------------------------------------------------


def merge_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata to store: the checkpoint's, plus the config's plain scalar entries.

    Same keys as LangGraph's own `get_checkpoint_metadata`, except that NUL characters
    are kept: we store them exactly instead of stripping them.
    """
    merged: dict[str, Any] = {k: v for k, v in metadata.items() if k != "writes"}
    for section in ("metadata", "configurable"):
        for key, value in (config.get(section) or {}).items():
            if not isinstance(key, str):
                raise ConfigError(f"config[{section!r}] has a key that is not a string: {shown(key)}")
            if key in merged or key in EXCLUDED_METADATA_KEYS or key.startswith("__"):
                continue
            if isinstance(value, (str, int, bool, float)):
                merged[key] = value
    return merged


MAX_METADATA_DEPTH = 64  # levels of nesting in metadata and filters


class _TooDeep(Exception):
    pass


class _LoneSurrogate(Exception):
    pass


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON projection jsonb accepts: NUL escaped, non-JSON values as strings; refuses
    nesting past MAX_METADATA_DEPTH and lone surrogates (neither jsonb nor the
    serializer could keep them exactly)."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _LoneSurrogate(value) from None
        return value.replace("\x00", "\\u0000")
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (Mapping, list, tuple)) and depth >= MAX_METADATA_DEPTH:
        raise _TooDeep
    if isinstance(value, Mapping):
        return {_jsonable(str(k)): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    return str(value)


def project(document: Mapping[str, Any], what: str) -> Any:
    """`document` (metadata or a filter) as jsonb can hold it, or ConfigError naming `what`."""
    try:
        return _jsonable(document)
    except _TooDeep:
        raise ConfigError(f"{what} nests deeper than {MAX_METADATA_DEPTH} levels") from None
    except _LoneSurrogate as bad:
        raise ConfigError(f"{what} holds {shown(bad.args[0])}, with a lone surrogate, which UTF-8 cannot encode") from None


def dump_metadata(serde: SerializerProtocol, metadata: Mapping[str, Any]) -> tuple[str, bytes | None]:
    """The jsonb text (for filters and psql) and, when jsonb is lossy, the exact form."""
    projected = project(metadata, "checkpoint metadata")
    exact = None
    if projected != metadata or _has_tuple(metadata):
        type_, data = dump_value(serde, dict(metadata), channel="<metadata>", where="checkpoint metadata")
        exact = type_.encode() + _EXACT_SEPARATOR + data
    return dump_json(projected), exact


def _has_tuple(value: Any) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, Mapping):
        return any(_has_tuple(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_tuple(v) for v in value)
    return False


def load_metadata(serde: SerializerProtocol, projected: Any, exact: bytes | None, *, where: str = "metadata") -> dict[str, Any]:
    if exact is None:
        return projected
    type_, _, data = bytes(exact).partition(_EXACT_SEPARATOR)
    return load_value(serde, type_.decode("utf-8", "replace"), data, where=f"{where}, its exact metadata")


def filter_for_sql(filter: Mapping[str, Any] | None) -> str | None:
    """The filter as jsonb text for `metadata @> ...`, projected like stored metadata."""
    if not filter:
        return None
    return json.dumps(project(dict(filter), "list() filter"), separators=(",", ":"))


def filter_needs_recheck(filter: Mapping[str, Any] | None) -> bool:
    """Whether SQL containment on the projection may admit rows the exact filter rejects."""
    return bool(filter) and project(dict(filter), "list() filter") != filter


def metadata_contains(document: Any, pattern: Any) -> bool:
    """jsonb `@>` semantics on Python values: used to recheck rows whose jsonb is lossy."""
    if isinstance(pattern, Mapping):
        return isinstance(document, Mapping) and all(
            key in document and metadata_contains(document[key], value)
            for key, value in pattern.items()
        )
    if isinstance(pattern, (list, tuple)):
        if not isinstance(document, (list, tuple)):
            return False
        return all(any(metadata_contains(d, p) for d in document) for p in pattern)
    if isinstance(pattern, bool) or isinstance(document, bool):
        return type(pattern) is type(document) and pattern == document
    return pattern == document


# -- put ------------------------------------------------------------------------------


def put_params(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    placement: Placement,
    lists: ListPolicy,
    use_memory: bool = True,
    use_offers: bool = True,
) -> tuple[dict[str, Any], RunnableConfig, list[Upload], list[tuple[str, ListState]]]:
    """Parameters of `Statements.put`, the config that `put` returns, the objects to store
    first, and the list versions it stores (for the writer's memory)."""
    key = parse_config(config)
    for field, kind in (("id", str), ("channel_values", Mapping), ("channel_versions", Mapping)):
        if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get(field), kind):
            raise ConfigError(
                f"put on thread {shown(key.thread_id)}: the checkpoint has no {field!r} "
                f"({'a string' if kind is str else 'a mapping'}); pass the checkpoint LangGraph built"
            )
    checkpoint_id = require_text(checkpoint["id"], "checkpoint id")
    where = f"thread {shown(key.thread_id)}, checkpoint {shown(checkpoint_id)}"
    values = checkpoint["channel_values"]

    channels, versions, types, blobs = [], [], [], []
    refs: list[ObjectRef | None] = []
    chains: list[str | None] = []
    item_versions: list[str | None] = []
    items: list[ItemRow] = []
    uploads: list[Upload] = []
    states: list[tuple[str, ListState]] = []
    needed: list[tuple[str, str]] = []
    needed_items: list[tuple[str, str]] = []
    inline_values = dump_inline(serde, values, where=where)
    for channel, version in new_versions.items():
        if channel not in values or channel in inline_values:
            continue
        channel = require_text(channel, "channel")
        version = version_text(version, channel)
        what = f"{where}, channel {shown(channel)}"
        value = values[channel]
        layout = list_layout.usable(value, version, lists.snapshot_every)
        base = (
            lists.memory.base(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channel)
            if layout and use_memory else None
        )
        whole = None
        if layout and base is None and lists.min_bytes > 0:
            # Not extending a list already in the delta layout: a short one stays whole.
            whole = dump_value(serde, value, channel=channel, where=where)
            layout = len(whole[1]) > lists.min_bytes
        if layout:
            offered = lists.memory.offered(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channel) if use_offers else {}
            row = list_layout.plan(
                serde, channel=channel, version=version, value=value, base=base,
                snapshot_every=lists.snapshot_every, placement=placement, where=what, dump=dump_value,
                offered=offered,
            )
            type_, inline, ref = list_layout.LIST_TYPE, row.value, None
            chains.append(list_layout.CHAIN_SEPARATOR.join(row.chain))
            item_versions.append(list_layout.CHAIN_SEPARATOR.join(row.item_versions))
            items.extend(row.items)
            uploads.extend(row.uploads)
            states.append((channel, row.state))
            needed.extend((channel, v) for v in row.needs)
            needed_items.extend((channel, v) for v in row.item_needs)
        else:
            type_, data = whole or dump_value(serde, value, channel=channel, where=where)
            inline, ref = placement.place(data, where=f"the value of {what}")
            chains.append(None)
            item_versions.append(None)
            if ref is not None:
                uploads.append(Upload(ref, data, f"put of {what}"))
        channels.append(channel)
        versions.append(version)
        types.append(type_)
        blobs.append(inline)
        refs.append(ref)

    held = [(ch, checkpoint["channel_versions"].get(ch)) for ch in values]
    missing = [ch for ch, version in held if version is None]
    if missing:
        raise ConfigError(
            f"channel {shown(missing[0])} has a value but no entry in channel_versions ({where})"
        )
    # The id is the row's checkpoint_id column; build_tuple puts it back.
    body = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    if inline_values:
        body["channel_values"] = inline_values
    held = [(ch, version_text(version, ch)) for ch, version in held if ch not in inline_values]
    # The values it holds but does not write now must still be stored when it commits (a
    # delete_thread or a prune may have taken them): else it writes nothing, and the
    # saver sends it again writing every value it holds (see SaverCore._put_plan).
    written = set(zip(channels, versions))
    needed.extend(pair for pair in held if pair not in written)
    try:
        body_json = dump_json(body)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"checkpoint {shown(checkpoint_id)} of thread {shown(key.thread_id)} is not JSON: {exc}") from exc

    stored_metadata = merge_metadata(config, metadata)
    metadata_json, metadata_exact = dump_metadata(serde, stored_metadata)
    step = stored_metadata.get("step")
    run_id = stored_metadata.get("run_id")
    source = stored_metadata.get("source")
    params = {
        "thread_id": key.thread_id,
        "checkpoint_ns": key.checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": key.checkpoint_id,
        "run_id": id_text(run_id, "metadata['run_id']") if run_id is not None else None,
        "step": step if isinstance(step, int) and not isinstance(step, bool) and -(2**31) <= step < 2**31 else None,
        "source": source.replace("\x00", "") if isinstance(source, str) else None,
        "checkpoint": body_json,
        "value_channels": TextArray(require_text(ch, "channel") for ch, _ in held),
        "value_versions": TextArray(version for _, version in held),
        "metadata": metadata_json,
        "metadata_exact": metadata_exact,
        "channels": TextArray(channels),
        "versions": TextArray(versions),
        "types": TextArray(types),
        "values": ByteaArray(blobs),
        **_ref_params(refs),
        "base_channels": TextArray(c for c, _ in needed),
        "base_versions": TextArray(v for _, v in needed),
        "base_item_channels": TextArray(c for c, _ in needed_items),
        "base_item_versions": TextArray(v for _, v in needed_items),
        "list_chains": TextArray(chains),
        "item_versions": TextArray(item_versions),
        **_item_params(items),
    }
    return params, key.config(checkpoint_id), uploads, states


def inline_item_groups(params: Mapping[str, Any]) -> dict[tuple[str, str], list_layout.RawItems]:
    """The list items a put stores inline, grouped by (channel, version), for the item cache."""
    groups: dict[tuple[str, str], list_layout.RawItems] = {}
    offloaded = set()
    for channel, version, idx, type_, data in zip(
        params["item_channels"], params["item_of"], params["item_idx"], params["item_types"], params["item_values"]
    ):
        if data is None:
            offloaded.add((channel, version))
        groups.setdefault((channel, version), {})[idx] = (type_, data)
    return {k: v for k, v in groups.items() if k not in offloaded}


def _item_params(items: Sequence[ItemRow]) -> dict[str, Any]:
    """The channel_items rows a put introduces, as aligned arrays."""
    return {
        "item_channels": TextArray(i.channel for i in items),
        "item_of": TextArray(i.version for i in items),
        "item_idx": Int4Array(i.idx for i in items),
        "item_types": TextArray(i.type for i in items),
        "item_values": ByteaArray(i.data for i in items),
        "item_object_keys": TextArray(i.ref.key if i.ref else None for i in items),
        "item_object_shas": TextArray(i.ref.sha256 if i.ref else None for i in items),
        "item_object_sizes": Int8Array(i.ref.size if i.ref else None for i in items),
    }


@dataclass(frozen=True)
class WritesParams:
    """What `put_writes` sends: each write in its own row (`params`), and, for a task whose
    writes can share one row, that row (`packed`, tried first: see `Statements.put_packed_writes`).

    `replace`: every write is to a special channel, whose rows a retry overwrites;
    `uploads`: objects to store first; `offers`: the items stored per channel (for the
    child's delta).
    """

    params: dict[str, Any]
    packed: dict[str, Any] | None
    replace: bool
    uploads: list[Upload]
    offers: list[tuple[str, list[tuple[bytes, list_layout.Location]]]]

    @property
    def has_items(self) -> bool:
        return "item_channels" in self.params


def put_writes_params(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    placement: Placement,
    lists: ListPolicy | None = None,
) -> WritesParams:
    """Parameters of `Statements.put_writes` (and of `put_packed_writes` when packable).

    A write to a channel whose version in this checkpoint is a list in the delta layout
    (the writer's memory knows it) stores its items in channel_items: the next version's
    delta uses them rather than storing them again.
    """
    key = parse_config(config, need_checkpoint_id=True)
    where = f"thread {shown(key.thread_id)}, checkpoint {shown(key.checkpoint_id)}, task {shown(task_id)}"
    idx, channels, types, blobs, item_keys = [], [], [], [], []
    refs: list[ObjectRef | None] = []
    uploads: list[Upload] = []
    items: list[ItemRow] = []
    offers: list[tuple[str, list[tuple[bytes, list_layout.Location]]]] = []
    for i, (channel, value) in enumerate(writes):
        what = f"{where}, write to channel {shown(channel)}"
        idx.append(WRITES_IDX_MAP.get(channel, i))
        channels.append(require_text(channel, "channel"))
        if (
            lists is not None and lists.snapshot_every > 1 and channel not in WRITES_IDX_MAP
            and lists.memory.base(key.thread_id, key.checkpoint_ns, key.checkpoint_id, channel) is not None
        ):
            stored = list_layout.write_items(
                serde, channel=channel, value=value, identity=f"{key.checkpoint_id}\x00{task_id}\x00{i}",
                placement=placement, where=what, dump=dump_value,
            )
            types.append(list_layout.WRITE_ITEMS_TYPE)
            blobs.append(stored.body)
            refs.append(None)
            item_keys.append(stored.key)
            items.extend(stored.items)
            uploads.extend(stored.uploads)
            offers.append((channel, stored.offered))
            continue
        type_, data = dump_value(serde, value, channel=channel, where=where)
        inline, ref = placement.place(data, where=f"the value of {what}")
        types.append(type_)
        blobs.append(inline)
        refs.append(ref)
        item_keys.append(None)
        if ref is not None:
            uploads.append(Upload(ref, data, f"put_writes of {what}"))
    params = {
        "thread_id": key.thread_id,
        "checkpoint_ns": key.checkpoint_ns,
        "checkpoint_id": key.checkpoint_id,
        "task_id": require_text(task_id, "task_id"),
        "task_path": require_text(task_path or "", "task_path"),
        "packed_type": PACKED_WRITES_TYPE,
    }
    packed = None
    if packable(task_id, channels, refs, item_keys):
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
    params.update({
        "idx": Int4Array(idx),
        "channels": TextArray(channels),
        "types": TextArray(types),
        "values": ByteaArray(blobs),
        **_ref_params(refs),
    })
    if items:
        params["write_item_versions"] = TextArray(item_keys)
        params.update(_item_params(items))
        if packed is not None:
            packed.update(_item_params(items))
    replace = bool(writes) and all(channel in WRITES_IDX_MAP for channel, _ in writes)
    return WritesParams(params, packed, replace, uploads, offers)


def _ref_params(refs: Sequence[ObjectRef | None]) -> dict[str, Any]:
    """The object-reference columns, aligned with the values (NULL where a value is inline)."""
    return {
        "object_keys": TextArray(r.key if r else None for r in refs),
        "object_shas": TextArray(r.sha256 if r else None for r in refs),
        "object_sizes": Int8Array(r.size if r else None for r in refs),
    }


# -- reads ----------------------------------------------------------------------------


@dataclass
class CheckpointRow:
    """A checkpoint row as fetched, before its values are attached."""

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
    def from_row(cls, row: Sequence[Any]) -> CheckpointRow:
        thread_id, ns, checkpoint_id, parent_id, body, metadata, exact, channels, versions = row
        return cls(thread_id, ns, checkpoint_id, parent_id, load_json(body), load_json(metadata),
                   exact, channels, versions)

    def holds(self, channel: str) -> bool:
        """Whether the checkpoint has a value for `channel` (in its row or a values row)."""
        return channel in self.value_channels or channel in (self.body.get("channel_values") or ())

    @property
    def value_keys(self) -> Iterable[tuple[str, str, str, str]]:
        for channel, version in zip(self.value_channels, self.value_versions):
            yield self.thread_id, self.checkpoint_ns, channel, version


PACKED_WRITES_TYPE = "langgraph-pg-durable/writes-v1"  # one row holding several writes of a task
# LangGraph re-sends the writes of this task with more appended, each keyed by its position.
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"


def packable(task_id: str, channels: Sequence[str], refs: Sequence[ObjectRef | None], item_keys: Sequence[str | None]) -> bool:
    """Whether a task's writes go in one row: a row per write costs ~330 bytes with its
    index entry, more than a step counter or a routing flag it holds. Not for special
    channels (replaced one by one), offloaded values or writes stored as items of more
    than one list (their row names one object, one write key), nor for the null task,
    whose writes LangGraph sends again with more appended (each time a task has writes
    stored already, a packed row costs a second statement: see `Statements.put_packed_writes`)."""
    return (
        len(channels) > 1 and task_id != NULL_TASK_ID
        and not any(channel in WRITES_IDX_MAP for channel in channels)
        and all(ref is None for ref in refs)
        and sum(key is not None for key in item_keys) <= 1
    )


def _unpacked_writes(data: bytes | None, where: str) -> list[tuple[int, str, str, bytes | None]]:
    """The (idx, channel, type, bytes) of a packed writes row, checked entry by entry."""
    try:
        entries = ormsgpack.unpackb(data or b"")
    except Exception as exc:
        raise DeserializationError(f"{where}: its packed writes row cannot be decoded ({type(exc).__name__})") from exc
    if not isinstance(entries, list) or not all(
        isinstance(e, list) and len(e) == 4 and type(e[0]) is int and isinstance(e[1], str)
        and isinstance(e[2], str) and (e[3] is None or isinstance(e[3], bytes))
        for e in entries
    ):
        raise DeserializationError(f"{where}: its packed writes row is malformed (not [idx, channel, type, bytes] entries)")
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
        packed.extend((task_id, ch, path, i, t, d) for i, ch, t, d in _unpacked_writes(data, where(task_id)))
    seen: set[tuple[str, int]] = set()
    out = []
    for write in packed + plain:
        if (write[0], write[3]) not in seen:
            seen.add((write[0], write[3]))
            out.append(write)
    return out


# Pending writes as fetched: (task_id, channel, task_path, idx, type, data); type None
# when data is already the value (a write stored as items, rebuilt by `resolve_writes`).
WriteRow = tuple[str, str, str, int, str | None, Any]


def resolve_writes(
    serde: SerializerProtocol,
    writes: Sequence[WriteRow],
    items: Callable[[str], Mapping[list_layout.Location, Any]],
    *,
    decoded: bool,
    where: Callable[[WriteRow], str],
) -> list[WriteRow]:
    """The writes, with each one stored as items rebuilt from `items(channel)` (their raw
    bytes, or with `decoded` the items themselves)."""
    return [
        (*w[:4], None, list_layout.load_write(serde, load_value, w[5], items(w[1]), decoded, where=where(w)))
        if w[4] == list_layout.WRITE_ITEMS_TYPE else w
        for w in writes
    ]


def build_tuple(
    serde: SerializerProtocol,
    row: CheckpointRow,
    values: Mapping[tuple[str, str], Any],
    writes: Iterable[WriteRow],
    *,
    required: Iterable[str] | None = None,
) -> CheckpointTuple:
    """A CheckpointTuple from its row, its decoded values by (channel, version), its writes.

    Every value the row holds must be among `values` (or, for a read that fetched only
    some, those of the `required` channels): a missing one is an integrity error.
    """
    where = f"thread {shown(row.thread_id)}, checkpoint {shown(row.checkpoint_id)}"
    channel_values = load_inline(serde, row.body.get("channel_values"), where=where)
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
    pending: list[PendingWrite] = [
        (task_id, channel, data if type_ is None else load_value(
            serde, type_, data, where=lambda t=task_id, c=channel: f"{where}, pending write of task {shown(t)} to channel {shown(c)}"))
        for task_id, channel, _path, _idx, type_, data in ordered
    ]
    key = CheckpointKey(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
    parent = (
        key.config(row.parent_checkpoint_id) if row.parent_checkpoint_id else None
    )
    return CheckpointTuple(
        config=key.config(),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=load_metadata(serde, row.metadata, row.metadata_exact, where=where),  # type: ignore[arg-type]
        parent_config=parent,
        pending_writes=pending,
    )


def get_tuple_params(
    key: CheckpointKey, held: Iterable[tuple[str, str]] = (), known: Iterable[tuple[str, str]] = ()
) -> dict[str, Any]:
    """Parameters of `Statements.get_tuple`: `known` lists (channel, version) are not
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


def get_tuple_references(key: CheckpointKey, rows: Sequence[Sequence[Any]]) -> list[tuple[ObjectRef, str]]:
    """The objects a `Statements.get_tuple` result references, each with what it is for errors."""
    checkpoint_id = next((row[1] for row in rows if row[0] == "c"), key.checkpoint_id)
    out = []
    for i, ref in references(rows):
        part, a, b, _, n = rows[i][:5]
        if part == "w":
            what = f"pending write of task {shown(a)} to channel {shown(b)}"
        elif part == "i":
            what = f"item {n} of channel {shown(a)} (version {shown(b)})"
        else:
            what = f"channel {shown(a)} (version {shown(b)})"
        out.append((ref, f"thread {shown(key.thread_id)}, checkpoint {shown(checkpoint_id)}, {what}"))
    return out


def tuple_from_union(
    serde: SerializerProtocol,
    key: CheckpointKey,
    rows: Sequence[Sequence[Any]],
    held: Mapping[tuple[str, str], list_layout.RawItems] | None = None,
    known: Mapping[tuple[str, str], ListState] | None = None,
) -> tuple[CheckpointTuple | None, list[tuple[str, ListState]], dict[tuple[str, str], list_layout.RawItems]]:
    """Decode the rows of `Statements.get_tuple` (parts 'c', 'v', 'l', 'i', 'w').

    `held` are item groups the saver has the bytes of, `known` list versions it has the
    states of (the statement sent neither their chains nor their items). Also returns
    the states of the lists it rebuilt, for the writer's memory, and the item groups it
    fetched, for the saver's item cache.
    """
    row = None
    values: dict[tuple[str, str], Any] = {}
    writes: list[WriteRow] = []
    list_rows: dict[tuple[str, str], list_layout.StoredList] = {}
    fetched: dict[tuple[str, str], list_layout.RawItems] = {}
    wanted: list[tuple[str, str]] = []
    for part, a, b, c, n, doc, meta, chs, vers, type_, data, *_refs in rows:
        if part == "c":
            row = CheckpointRow(key.thread_id, key.checkpoint_ns, a, b, load_json(doc), load_json(meta), data, chs, vers)
        elif part in ("v", "l") and type_ == list_layout.LIST_TYPE:
            list_rows[(a, b)] = list_layout.stored(
                chs, data, vers, where=f"thread {shown(key.thread_id)}, channel {shown(a)} (version {shown(b)})")
            if part == "v":
                wanted.append((a, b))
        elif part == "v":
            values[(a, b)] = load_value(serde, type_, data, where=lambda a=a, b=b, row=row: (
                f"thread {shown(key.thread_id)}, checkpoint {shown(row.checkpoint_id if row else None)}, "
                f"channel {shown(a)} (version {shown(b)})"))
        elif part == "i":
            fetched.setdefault((a, b), {})[n] = list_layout.unpacked_item(  # inflated once, for the decode and the cache
                type_, data, lambda a=a, b=b, n=n: f"thread {shown(key.thread_id)}, channel {shown(a)}, version {shown(b)}, item {n}")
        elif part == "w":
            writes.append((a, b, c, n, type_, data))
    if row is None:
        return None, [], fetched

    def where(ch: str, v: str) -> str:
        return f"thread {shown(key.thread_id)}, checkpoint {shown(row.checkpoint_id)}, channel {shown(ch)}"

    raw_items = {**(held or {}), **fetched}
    for channel, version in [k for k in wanted if k in (known or {})]:
        wanted.remove((channel, version))
        state = known[(channel, version)]  # type: ignore[index]
        values[(channel, version)] = list_layout.rebuild(
            serde, load_value, channel, state, raw_items, where=where(channel, version))
    restored = list_layout.restore(
        serde, load_value, wanted=wanted, rows=list_rows, raw_items=raw_items, where=where,
    ) if wanted else {}
    states = []
    for (channel, version), (value, state) in restored.items():
        values[(channel, version)] = value
        if state is not None:
            states.append((channel, state))
    writes = unpack_writes(writes, lambda task: f"thread {shown(key.thread_id)}, checkpoint {shown(row.checkpoint_id)}, task {shown(task)}")
    if any(w[4] == list_layout.WRITE_ITEMS_TYPE for w in writes):
        by_channel: dict[str, dict[list_layout.Location, tuple[str, bytes]]] = {}
        for (channel, version), group in raw_items.items():
            by_channel.setdefault(channel, {}).update(((version, idx), raw) for idx, raw in group.items())
        writes = resolve_writes(
            serde, writes, lambda channel: by_channel.get(channel, {}), decoded=False,
            where=lambda w: (f"thread {shown(key.thread_id)}, checkpoint {shown(row.checkpoint_id)}, "
                             f"write of task {shown(w[0])} to channel {shown(w[1])}"),
        )
    return build_tuple(serde, row, values, writes), states, fetched
