"""Checkpoint metadata: what is stored (LangGraph's keys plus the config's scalars), its jsonb
projection for filters and psql, the exact form kept where jsonb is lossy, and filters."""

from __future__ import annotations

import json
import math
import re
from collections import ChainMap
from collections.abc import Mapping
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import EXCLUDED_METADATA_KEYS, CheckpointMetadata

from ..errors import ConfigError, shown
from .codec import Codec, dump_json, load_json

# Our marker for a metadata value kept in `metadata_exact`: "<serde type>:<payload>".
_EXACT_SEPARATOR: Final = b":"


def unchained(mapping: Any) -> Any:
    """The dict a ChainMap of one dict stands for (LangGraph hands a config's metadata so),
    else `mapping` itself: a ChainMap's truth, iteration and lookups run in Python (a put's
    metadata merge took 2.3 us, most of it there, and each lookup ~0.3 us)."""
    if type(mapping) is ChainMap and len(mapping.maps) == 1:
        return mapping.maps[0]
    return mapping


def merge_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata to store: the checkpoint's, plus the config's plain scalar entries.

    Same keys as LangGraph's own `get_checkpoint_metadata`, except that NUL characters
    are kept: we store them exactly instead of stripping them.
    """
    merged: dict[str, Any] = {k: v for k, v in metadata.items() if k != "writes"}
    for section in ("metadata", "configurable"):
        entries = unchained(config.get(section))
        if not entries:
            continue
        for key, value in entries.items():
            if not isinstance(key, str):
                raise ConfigError(f"config[{section!r}] has a key that is not a string: {shown(key)}")
            if key in merged or key in EXCLUDED_METADATA_KEYS or key.startswith("__"):
                continue
            if isinstance(value, (str, int, bool, float)):
                merged[key] = value
    merged.pop("writes", None)  # as LangGraph does after merging: a config's "writes" is not stored either
    return merged


MAX_METADATA_DEPTH: Final = 64  # levels of nesting in metadata and filters


class _TooDeep(Exception):
    pass


class _LoneSurrogate(Exception):
    pass


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON projection jsonb accepts: NUL escaped, non-JSON values as strings; refuses
    nesting past MAX_METADATA_DEPTH and lone surrogates (neither jsonb nor the
    serializer could keep them exactly)."""
    if isinstance(value, str):
        if not value.isascii() and not _encodable(value):
            raise _LoneSurrogate(value)
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


def dump_metadata(codec: Codec, metadata: Mapping[str, Any]) -> tuple[str, bytes | None]:
    """The jsonb text (for filters and psql) and, when jsonb is lossy, the exact form."""
    if _plain(metadata):  # as LangGraph's own metadata is: jsonb holds it as it is
        return dump_json(metadata), None
    projected = project(metadata, "checkpoint metadata")
    exact = None
    if _lossy(metadata):
        type_, data = codec.dump(dict(metadata), channel="<metadata>", where="checkpoint metadata")
        exact = type_.encode() + _EXACT_SEPARATOR + data
    return dump_json(projected), exact


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether `value` is JSON that jsonb keeps exactly, within MAX_METADATA_DEPTH: str keys,
    strings without NUL or lone surrogates, finite floats, ints, dicts, lists and tuples. Such a
    value is its own projection (`_jsonable`) and is not lossy (`_lossy`), so one walk
    stands for both."""
    kind = type(value)  # the exact types first: what LangGraph's metadata is made of
    if kind is dict:
        return depth < MAX_METADATA_DEPTH and _plain_dict(value, depth)
    if kind is str:
        return _plain_text(value)
    if isinstance(value, str):
        return _plain_text(value)
    if value is None or isinstance(value, int):  # bool is an int
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= MAX_METADATA_DEPTH:
        return False
    if isinstance(value, dict):  # orjson writes dicts, not every Mapping
        return _plain_dict(value, depth)
    if isinstance(value, (list, tuple)):
        return _plain_items(value, depth)
    return False


def _plain_items(value: list[Any] | tuple[Any, ...], depth: int) -> bool:
    """`_plain` of a list's or tuple's items, the scalars checked here (see `_plain_dict`):
    DeltaChannel's metadata holds a (count, count) pair per channel at every put."""
    for item in value:
        kind = type(item)
        if kind is int or kind is bool or item is None:
            continue
        if kind is str:
            if "\x00" in item or not (item.isascii() or _encodable(item)):
                return False
        elif not _plain(item, depth + 1):
            return False
    return True


def _plain_text(value: str) -> bool:
    return "\x00" not in value and (value.isascii() or _encodable(value))


def _plain_dict(value: dict[Any, Any], depth: int) -> bool:
    """`_plain` of a dict's entries: a str, an int, a bool or None (what LangGraph's metadata
    mostly holds) is checked here, without a call of `_plain` per entry (a put's metadata has
    a dozen: the walk took 3 % of a step's instructions)."""
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, str) or not _plain_text(key):
                return False
        elif "\x00" in key or not (key.isascii() or _encodable(key)):
            return False
        kind = type(item)
        if kind is str:
            if "\x00" in item or not (item.isascii() or _encodable(item)):
                return False
        elif kind is int or kind is bool or item is None:
            continue
        elif not _plain(item, depth + 1):
            return False
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lossy(value: Any) -> bool:
    """Whether the jsonb projection reads back as something else: a NUL (escaped), a
    non-finite float, a key that is not a str, a value JSON lacks. (An int past 64 bits is
    kept exactly by jsonb and read back exactly by `load_metadata_json`.)
    Tuples are not: they read back as lists, from jsonb or the exact form alike (the
    serializer has no tuple), as they do from the official saver."""
    if isinstance(value, str):
        return "\x00" in value
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, int):
        return False
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(not isinstance(k, str) or "\x00" in k or _lossy(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_lossy(v) for v in value)
    return True


# An integer literal orjson would read as a float (past 64 bits); a digit run inside a string
# matches too, which only costs the slower exact parse.
_LONG_INTEGER: Final = re.compile(r"\d{20,}")


def load_metadata_json(text: str | None) -> Any:
    """The metadata column as fetched (jsonb text): orjson, or json where an integer is too
    long for orjson to keep exactly (jsonb keeps any integer exactly)."""
    if text is not None and _LONG_INTEGER.search(text):
        return json.loads(text)
    return load_json(text)


def load_metadata(codec: Codec, projected: Any, exact: bytes | None, *, where: str = "metadata") -> dict[str, Any]:
    """The stored metadata: the exact form when the row has one, else the jsonb projection."""
    if exact is None:
        return projected  # type: ignore[no-any-return]
    type_, _, data = bytes(exact).partition(_EXACT_SEPARATOR)
    return codec.load(type_.decode("utf-8", "replace"), data, where=f"{where}, its exact metadata")  # type: ignore[no-any-return]


def filter_for_sql(filter: Mapping[str, Any] | None) -> str | None:
    """The filter as jsonb text for `metadata @> ...`, projected like stored metadata."""
    if not filter:
        return None
    return json.dumps(project(dict(filter), "list() filter"), separators=(",", ":"))


def filter_needs_recheck(filter: Mapping[str, Any] | None) -> bool:
    """Whether SQL containment on the projection may admit rows the exact filter rejects."""
    return filter is not None and bool(filter) and project(dict(filter), "list() filter") != filter


def metadata_contains(document: Any, pattern: Any) -> bool:
    """jsonb `@>` semantics on Python values: used to recheck rows whose jsonb is lossy."""
    if isinstance(pattern, Mapping):
        return isinstance(document, Mapping) and all(
            key in document and metadata_contains(document[key], value) for key, value in pattern.items()
        )
    if isinstance(pattern, (list, tuple)):
        if not isinstance(document, (list, tuple)):
            return False
        return all(any(metadata_contains(d, p) for d in document) for p in pattern)
    if isinstance(pattern, bool) or isinstance(document, bool):
        return type(pattern) is type(document) and bool(pattern == document)
    return bool(pattern == document)
