"""Safe deserialization: the default serializer and the check every decode goes through.

LangGraph's `JsonPlusSerializer` imports and calls whatever a stored msgpack ext names
unless it is given an allowlist; with one, a blocked type is returned as its raw data,
silently. The saver's default, `DurableSerializer`, rebuilds only what `type_policy.py`
allows (LangGraph's and LangChain's types, the caller's `allowed_types`, data types of
imported modules), refuses on write a value it would not read back, and every decode of
a stored value refuses a blocked type outright, so a planted row runs nothing and reads
back as an error instead of as other data.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ormsgpack

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer, _create_msgpack_ext_hook
from langgraph.checkpoint.serde import _msgpack as lg_msgpack

from ..errors import ConfigError
from . import msgpack_bounds
from .type_policy import TypeKey, TypePolicy, refused_names, type_keys

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


# Whether a serializer's class is an EncryptedSerializer, by class: isinstance against it
# goes through typing's Protocol machinery (~0.5 us), and a history page asks per value.
_ENCRYPTING: dict[type, bool] = {}


def _encrypts(serde: Any) -> bool:
    kind = type(serde)
    known = _ENCRYPTING.get(kind)
    if known is None:
        known = _ENCRYPTING[kind] = issubclass(kind, EncryptedSerializer)
    return known


def checked_loads(serde: SerializerProtocol, typed: tuple[str, bytes]) -> Any:
    """`serde.loads_typed(typed)`, raising BlockedTypeError where the serializer would have
    returned a blocked type's raw data in its place."""
    if _encrypts(serde) and "+" not in typed[0] and serde not in _PLAINTEXT_ACCEPTED:
        raise PlaintextRefusedError(
            f"it is not encrypted (type {typed[0]!r}) though the saver's serializer encrypts; a row written "
            "before encryption was turned on reads with accept_plaintext=True"
        )
    if msgpack_bounds.NEEDED and typed[0] == "msgpack":
        msgpack_bounds.check_lengths(typed[1] or b"")
    return _refusing_blocked(serde.loads_typed, typed, serde)


def msgpack_loader(serde: SerializerProtocol) -> Callable[[bytes], Any] | None:
    """What `JsonPlusSerializer.loads_typed` does with a "msgpack" value, as one C call
    (ormsgpack with the serializer's ext hook, so its allowlist), for `checked_msgpack_loads`.
    None for any other serializer, or one without that hook."""
    hook = getattr(serde, "_unpack_ext_hook", None) if type(serde) in (JsonPlusSerializer, DurableSerializer) else None
    if hook is None:
        return None
    return functools.partial(ormsgpack.unpackb, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


def checked_msgpack_loads(load: Callable[[bytes], Any], data: bytes, serde: SerializerProtocol | None = None) -> Any:
    """`load(data)` with a `msgpack_loader` of `serde` (one batch of items, framed as an
    array); a blocked type raises BlockedTypeError, as in `checked_loads`."""
    if msgpack_bounds.NEEDED:
        msgpack_bounds.check_lengths(data)
    return _refusing_blocked(load, data, serde)


@contextlib.contextmanager
def lenient_reads() -> Iterator[list[str]]:
    """Within it, on this thread, a stored value naming a type the policy refuses decodes
    as LangGraph's serializer leaves it (the type's raw fields, nothing imported or called)
    instead of raising; yields the list of the names so left, for the reader to say so.
    For the commands and the replay page, which show what they can; never a graph's reads."""
    outer = getattr(_decoding, "lenient", None)
    names: list[str] = []
    _decoding.lenient = names
    try:
        yield names
    finally:
        _decoding.lenient = outer


def _blocked_name(event: SerdeEvent) -> str:
    return ".".join(filter(None, (str(event.get("module")), str(event.get("name")), event.get("method"))))


def _refusing_blocked(decode: Callable[[Any], Any], data: Any, serde: Any = None) -> Any:
    outer = getattr(_decoding, "blocked", None)
    seen: list[SerdeEvent] = []
    _decoding.blocked = seen
    try:
        value = decode(data)
    finally:
        _decoding.blocked = outer
    lenient = getattr(_decoding, "lenient", None)
    if seen and lenient is not None:
        lenient.extend(name for name in map(_blocked_name, seen) if name not in lenient)
        return value
    if seen:
        event = seen[0]
        name = _blocked_name(event)
        policy = getattr(getattr(serde, "serde", serde), "policy", None)
        reason = None
        if isinstance(policy, TypePolicy) and not event.get("method"):
            reason = policy.refusal((str(event.get("module")), str(event.get("name"))))
        raise BlockedTypeError(
            f"it names {name}, which was not decoded: {reason or 'the serializer allowlist does not hold it'} "
            "(a type of your own: pass allowed_types=[...] to the saver; lgpd takes --allow-type module:Name)"
        )
    return value


class UnreadableTypeError(TypeError):
    """A value holds a class the serializer would refuse to rebuild on read: not stored."""


class DurableSerializer(JsonPlusSerializer):
    """LangGraph's serializer with the saver's type policy (see type_policy.py).

    Reads rebuild LangGraph's and LangChain's types, `allowed_types`, and (unless `strict`)
    any data type of an already-imported module; anything else a stored value names is
    blocked, and `checked_loads` turns that into an error. Writes refuse a value holding a
    class its read would block, so no thread is wedged by its own data. `strict` keeps the
    allowlist alone, as `LANGGRAPH_STRICT_MSGPACK=true` does for LangGraph's serializer, and
    checks reads only, as LangGraph's strict mode does.
    """

    def __init__(self, allowed_types: Iterable[AllowedType] = (), *, strict: bool | None = None) -> None:
        super().__init__(allowed_msgpack_modules=None)
        self.strict = lg_msgpack.STRICT_MSGPACK_ENABLED if strict is None else strict
        self.policy = TypePolicy(_keys(allowed_types), data_types=not self.strict)
        # LangGraph's own ext hook, asking the policy where it would ask its allowlist.
        self._unpack_ext_hook = _create_msgpack_ext_hook(self.policy)  # type: ignore[arg-type]

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> DurableSerializer:
        """This serializer with more types allowed (LangGraph's strict mode adds a graph's
        state types here)."""
        extra = set(_keys(extra_allowlist)) - self.policy.allowed
        if not extra:
            return self
        return DurableSerializer([*self.policy.allowed, *extra], strict=self.strict)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = super().dumps_typed(obj)
        # Strict mode's allowlist grows as LangGraph meets a graph's types (interrupt and
        # resume schemas after their values are written): its writes are not checked.
        if type_ == "msgpack" and not self.strict:
            refused = refused_names(data, self.policy)
            if refused:
                name, reason = refused[0]
                raise UnreadableTypeError(
                    f"it holds a {name}, which would not be read back ({reason}); "
                    f"pass allowed_types=[{name.rsplit('.', 1)[-1]}] (or ({name.rsplit('.', 1)[0]!r}, "
                    f"{name.rsplit('.', 1)[-1]!r})) to the saver to store it"
                )
        return type_, data


def _keys(entries: Iterable[Any]) -> list[TypeKey]:
    try:
        return type_keys(entries, lambda entry: f"allowed_types takes classes or (module, name) tuples, got {entry!r}")
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def default_serializer(allowed_types: Iterable[AllowedType] = (), *, strict: bool | None = None) -> DurableSerializer:
    """The saver's serializer when none is given: `DurableSerializer`."""
    return DurableSerializer(allowed_types, strict=strict)


def with_allowed_types(serde: Any, allowed_types: Iterable[AllowedType]) -> Any:
    """`serde` with `allowed_types` added to its msgpack allowlist (a JsonPlusSerializer,
    or an EncryptedSerializer around one)."""
    extra = list(allowed_types)
    if not extra:
        return serde
    _keys(extra)
    if isinstance(serde, JsonPlusSerializer):
        return serde.with_msgpack_allowlist(extra)
    if isinstance(serde, EncryptedSerializer) and isinstance(serde.serde, JsonPlusSerializer):
        return EncryptedSerializer(serde.cipher, serde.serde.with_msgpack_allowlist(extra))
    raise ConfigError(
        f"allowed_types needs a JsonPlusSerializer (or an EncryptedSerializer around one); the serde given is a {type(serde).__name__}"
    )
