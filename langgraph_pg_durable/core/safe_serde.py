"""Safe deserialization: the default serializer and the check every decode goes through.

LangGraph's `JsonPlusSerializer` imports and calls whatever a stored msgpack ext names
unless it is given an allowlist; with one, a blocked type is returned as its raw data,
silently. The saver's default is that strict allowlist (the types LangGraph and
LangChain need, plus the caller's `allowed_types`), and every decode of a stored value
refuses a blocked type outright, so a planted row runs nothing and reads back as an
error instead of as other data.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import ormsgpack

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..errors import ConfigError

AllowedType = type | tuple[str, ...]
BLOCKED_EVENTS = frozenset({"msgpack_blocked", "msgpack_method_blocked"})


class BlockedTypeError(Exception):
    """A stored value names a type (or method) the serializer's allowlist does not hold."""


class PlaintextRefusedError(Exception):
    """An encrypting serializer was handed a stored value that is not encrypted."""


# Encrypting serializers whose saver reads unencrypted rows (accept_plaintext=True): the
# rows of threads written before encryption was turned on. Any other refuses them, so a
# row forged without the cipher suffix is not taken as plaintext.
_PLAINTEXT_ACCEPTED: weakref.WeakSet[Any] = weakref.WeakSet()


def accept_plaintext(serde: Any) -> None:
    """Let this encrypting serializer's saver read rows that are not encrypted."""
    if isinstance(serde, EncryptedSerializer):
        _PLAINTEXT_ACCEPTED.add(serde)


_decoding = threading.local()  # the blocked events seen by the decode running on this thread


def _record(event: SerdeEvent) -> None:
    blocked = getattr(_decoding, "blocked", None)
    if blocked is not None and event.get("kind") in BLOCKED_EVENTS:
        blocked.append(event)


register_serde_event_listener(_record)  # called in the decoding thread, synchronously


def checked_loads(serde: SerializerProtocol, typed: tuple[str, bytes]) -> Any:
    """`serde.loads_typed(typed)`, raising BlockedTypeError where the serializer would have
    returned a blocked type's raw data in its place."""
    if isinstance(serde, EncryptedSerializer) and "+" not in typed[0] and serde not in _PLAINTEXT_ACCEPTED:
        raise PlaintextRefusedError(
            f"it is not encrypted (type {typed[0]!r}) though the saver's serializer encrypts; a row written "
            "before encryption was turned on reads with accept_plaintext=True"
        )
    return _refusing_blocked(serde.loads_typed, typed)


def msgpack_loader(serde: SerializerProtocol) -> Callable[[bytes], Any] | None:
    """What `JsonPlusSerializer.loads_typed` does with a "msgpack" value, as one C call
    (ormsgpack with the serializer's ext hook, so its allowlist), for `checked_msgpack_loads`.
    None for any other serializer, or one without that hook."""
    hook = getattr(serde, "_unpack_ext_hook", None) if type(serde) is JsonPlusSerializer else None
    if hook is None:
        return None
    return functools.partial(ormsgpack.unpackb, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


def checked_msgpack_loads(load: Callable[[bytes], Any], data: bytes) -> Any:
    """`load(data)` with a `msgpack_loader` (one batch of items, framed as an array); a
    blocked type raises BlockedTypeError, as in `checked_loads`."""
    return _refusing_blocked(load, data)


def _refusing_blocked(decode: Callable[[Any], Any], data: Any) -> Any:
    outer = getattr(_decoding, "blocked", None)
    seen: list[SerdeEvent] = []
    _decoding.blocked = seen
    try:
        value = decode(data)
    finally:
        _decoding.blocked = outer
    if seen:
        event = seen[0]
        name = ".".join(filter(None, (event.get("module"), event.get("name"), event.get("method"))))
        raise BlockedTypeError(
            f"it names {name}, which the serializer's allowlist does not hold, and was not decoded "
            "(a type of your own: pass allowed_types=[...] to the saver)"
        )
    return value


def default_serializer(allowed_types: Iterable[AllowedType] = ()) -> JsonPlusSerializer:
    """LangGraph's serializer with its strict msgpack allowlist, plus `allowed_types`."""
    serde: JsonPlusSerializer = with_allowed_types(JsonPlusSerializer(allowed_msgpack_modules=None), allowed_types)
    return serde


def with_allowed_types(serde: Any, allowed_types: Iterable[AllowedType]) -> Any:
    """`serde` with `allowed_types` added to its msgpack allowlist (a JsonPlusSerializer,
    or an EncryptedSerializer around one)."""
    extra = list(allowed_types)
    if not extra:
        return serde
    for entry in extra:
        if not isinstance(entry, type) and not (
            isinstance(entry, tuple) and len(entry) >= 2 and all(isinstance(part, str) for part in entry)
        ):
            raise ConfigError(f"allowed_types takes classes or (module, name) tuples, got {entry!r}")
    if isinstance(serde, JsonPlusSerializer):
        return serde.with_msgpack_allowlist(extra)
    if isinstance(serde, EncryptedSerializer) and isinstance(serde.serde, JsonPlusSerializer):
        return EncryptedSerializer(serde.cipher, serde.serde.with_msgpack_allowlist(extra))
    raise ConfigError(
        f"allowed_types needs a JsonPlusSerializer (or an EncryptedSerializer around one); the serde given is a {type(serde).__name__}"
    )
