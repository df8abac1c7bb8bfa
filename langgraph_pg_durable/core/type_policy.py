"""Which classes a stored value may name: the default serializer's policy, on read and on write.

LangGraph's serializer stores an object as (module, name, fields) and rebuilds it on read by
calling `module.name(**fields)`. Whatever the stored row names is therefore called. The policy:

- **Rebuilt**: LangGraph's and LangChain's own types (its allowlist), the caller's
  `allowed_types`, and any *data type* (a dataclass, a pydantic model, an Enum, a NamedTuple:
  a class whose constructor takes its fields and nothing else) of a module this process has
  already imported. A graph's own state classes and those of the libraries above LangGraph
  (trustcall's extraction schemas, langmem's `RunningSummary`) read back with no option.
- **Refused** (`BlockedTypeError`, nothing imported or called): a module not imported here,
  a name that is not a class (`builtins.exec`, `os.system`), a class that is not a data type
  (`subprocess.Popen`), an exception class, a name a module would resolve lazily.
- **Its fields, as a dict** (as LangGraph does): a class that is not reachable by its name,
  which is what a class defined inside a function is; nothing is called.

The same test runs on **write**: a value holding a class the read side would refuse is not
stored (the write names the channel, the class and the fix), so the saver never accepts a
value it cannot read back.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack

TypeKey = tuple[str, ...]

# LangGraph's msgpack ext codes (langgraph.checkpoint.serde.jsonplus): the constructor codes
# store (module, name, payload[, method]); a method code calls `module.name.method(arg)`.
EXT_CONSTRUCTOR_SINGLE_ARG: Final = 0
EXT_CONSTRUCTOR_POS_ARGS: Final = 1
EXT_CONSTRUCTOR_KW_ARGS: Final = 2
EXT_METHOD_SINGLE_ARG: Final = 3
EXT_PYDANTIC_V1: Final = 4
EXT_PYDANTIC_V2: Final = 5
_CONSTRUCTORS: Final = frozenset(
    {EXT_CONSTRUCTOR_SINGLE_ARG, EXT_CONSTRUCTOR_POS_ARGS, EXT_CONSTRUCTOR_KW_ARGS, EXT_PYDANTIC_V1, EXT_PYDANTIC_V2}
)
# The bytes that start a msgpack ext (fixext 1-16, ext 8/16/32): a value without any of them
# names no class, and its write needs no scan. Not `head in data`: `bytes.__contains__` tries
# its argument as an int first, and formats and drops a TypeError (~2,000 instructions a
# test). A short value takes one regex pass; a long one memchr per byte (`find`), which
# the regex engine's pass is ~70x slower than, stopping at the first found: the heads of
# the extensions a message's payload takes (ext 16, ext 8) first, as a value naming a class
# most often starts with one (a write's list of one message, at its second byte).
_EXT_HEADS: Final = tuple(bytes([b]) for b in (0xC8, 0xC7, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8))
_EXT_HEAD: Final = re.compile(rb"[\xc7-\xc9\xd4-\xd8]")
_SHORT: Final = 256
# What a write's check uses at every extension it meets, held as constants of the module:
# compiled, a name imported from a module mypyc does not compile (or an attribute of one)
# is looked up in a dict at every use.
_SAFE_TYPES: Final[frozenset[tuple[str, ...]]] = lg_msgpack.SAFE_MSGPACK_TYPES
_SAFE_METHODS: Final[frozenset[tuple[str, str, str]]] = lg_msgpack.SAFE_MSGPACK_METHODS
_UNPACKB: Final = ormsgpack.unpackb
_NON_STR_KEYS: Final = ormsgpack.OPT_NON_STR_KEYS


def _names_no_class(data: bytes) -> bool:
    """Whether `data` holds no byte that starts a msgpack ext."""
    if len(data) <= _SHORT:
        return _EXT_HEAD.search(data) is None
    for head in _EXT_HEADS:
        if data.find(head) >= 0:
            return False
    return True


def is_data_type(cls: Any) -> bool:
    """A class whose constructor takes its fields: dataclass, pydantic model, Enum, NamedTuple."""
    if not isinstance(cls, type) or issubclass(cls, BaseException):
        return False
    if dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum):
        return True
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return True
    # pydantic v2's BaseModel and v1's (pydantic.v1), found by name: pydantic is not imported here.
    return any(base.__name__ == "BaseModel" and base.__module__.split(".", 1)[0] == "pydantic" for base in cls.__mro__)


def refusal(module: str, name: str) -> str | None:
    """Why a stored value naming `module.name` is not rebuilt, or None when it may be (a data
    type of an imported module, or a name the module does not hold: its fields are returned)."""
    if not isinstance(module, str) or not isinstance(name, str):
        return "a type name that is not text"
    loaded = sys.modules.get(module)
    if loaded is None:
        return f"module {module!r} is not imported in this process"
    namespace = getattr(loaded, "__dict__", {})
    if name not in namespace:
        # A class defined in a function is stored under its module but is not found there: its
        # fields are returned, as LangGraph's serializer does. A module that resolves names
        # lazily (PEP 562 __getattr__) would import on lookup: refused.
        return f"{module}.{name} would be resolved by the module's __getattr__" if "__getattr__" in namespace else None
    found = namespace[name]
    if not isinstance(found, type):
        return f"{module}.{name} is not a class"
    if not is_data_type(found):
        return f"{module}.{name} is not a data type (a dataclass, pydantic model, Enum or NamedTuple)"
    return None


class TypePolicy:
    """The set of (module, name) a stored value may name, as LangGraph's ext hook asks it
    (`key in policy`): LangGraph's allowlist, the `allowed` types, and with `data_types` any
    data type of an imported module (see the module docstring). Allowed keys are remembered;
    a refused one is asked again, since its module may be imported later."""

    __slots__ = ("allowed", "data_types", "_seen")

    def __init__(self, allowed: Iterable[TypeKey] = (), *, data_types: bool = True) -> None:
        self.allowed = frozenset(allowed)
        self.data_types = data_types
        self._seen: set[TypeKey] = set()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and self.refusal(key) is None

    def refusal(self, key: TypeKey) -> str | None:
        """Why a value naming `key` is not rebuilt, or None."""
        if key in self._seen or key in self.allowed or key in _SAFE_TYPES:
            return None
        if len(key) != 2:
            return f"{'.'.join(map(str, key))} is not a (module, name) pair"
        if not self.data_types:
            return f"{key[0]}.{key[1]} is not in the serializer's allowlist"
        reason = refusal(key[0], key[1])
        if reason is None:
            self._seen.add(key)
        return reason


def refused_names(data: bytes, policy: TypePolicy) -> list[tuple[str, str]]:
    """The classes (and methods) a msgpack value names that its read would refuse, each with
    the reason, in the order they appear; empty for a value that reads back whole."""
    if _names_no_class(data):
        return []
    named = class_names(data)
    return _refused(_names_by_unpacking(data) if named is None else named, policy)


def _refused_by_unpacking(data: bytes, policy: TypePolicy) -> list[tuple[str, str]]:
    """`refused_names` with the names read by ormsgpack alone (what `class_names` leaves to
    it, and what a test holds the walk to)."""
    return _refused(_names_by_unpacking(data), policy)


def _refused(named: list[tuple[int, Any, Any, Any]], policy: TypePolicy) -> list[tuple[str, str]]:
    """Of the extensions' names (as `class_names` gives them), those the read would refuse,
    each with the reason."""
    refused: list[tuple[str, str]] = []
    for code, module, name, method in named:
        if code == EXT_METHOD_SINGLE_ARG:
            if (module, name, method) not in _SAFE_METHODS:
                refused.append((f"{module}.{name}.{method}", "a method call outside LangGraph's allowlist"))
            continue
        reason = policy.refusal((module, name))
        if reason is not None:
            refused.append((f"{module}.{name}", reason))
    return refused


def _names_by_unpacking(data: bytes) -> list[tuple[int, Any, Any, Any]]:
    """`class_names` by ormsgpack: every extension unpacked, its fields made as Python
    objects, to read the names it holds (of any type), in the order its hook meets them."""
    named: list[tuple[int, Any, Any, Any]] = []

    def hook(code: int, payload: bytes) -> Any:
        inner = _UNPACKB(payload, ext_hook=hook, option=_NON_STR_KEYS)
        if code in _CONSTRUCTORS and isinstance(inner, (list, tuple)) and len(inner) >= 2:
            named.append((code, inner[0], inner[1], ""))
        elif code == EXT_METHOD_SINGLE_ARG and isinstance(inner, (list, tuple)) and len(inner) >= 4:
            named.append((code, inner[0], inner[1], inner[3]))
        return None

    _UNPACKB(data, ext_hook=hook, option=_NON_STR_KEYS)
    return named


# -- the class names a msgpack value holds, read without unpacking it ------------------------
#
# A write's check (above) needs only the names in the value's extensions, not the value: a
# chat message's check unpacked the whole message twice over (the value, then each
# extension's payload from the hook), making every field a Python object, ~20 k
# instructions a message, a thirtieth of a durable step. `class_names` walks the bytes
# instead, by the msgpack format's heads and lengths, and makes a str of the names alone.
# It reads LangGraph's extensions only (codes 0-7); anything else (another code, names that
# are not text, bytes it cannot walk, nesting past CLASS_NAMES_MAX_DEPTH) it leaves to
# `_names_by_unpacking`, which reads (or refuses) it as before.

# LangGraph's other extensions, walked for the extensions inside them: a numpy array's
# (dtype, shape, order, bytes), and a DeltaChannel snapshot's value.
EXT_NUMPY_ARRAY: Final = 6
EXT_DELTA_SNAPSHOT: Final = 7
CLASS_NAMES_MAX_DEPTH: Final = 64  # arrays, maps and extensions within one another


class _Unwalked(Exception):
    """Bytes `class_names` leaves to ormsgpack."""


def class_names(data: bytes) -> list[tuple[int, str, str, str]] | None:
    """The names each extension of a msgpack value holds, as (code, module, name, method;
    "" but for code 3), nested extensions before the one that holds them (the order
    ormsgpack's hook meets them in), for the extensions whose payload is an array of at
    least 2 items (4 for code 3); None for what it leaves to ormsgpack (see above)."""
    found: list[tuple[int, str, str, str]] = []
    try:
        if _walk(data, 0, len(data), found, 0) != len(data):
            return None
    except (_Unwalked, UnicodeDecodeError):
        return None
    return found


def _u16(data: bytes, at: int, end: int) -> int:
    if at + 2 > end:
        raise _Unwalked
    return (data[at] << 8) | data[at + 1]


def _u32(data: bytes, at: int, end: int) -> int:
    if at + 4 > end:
        raise _Unwalked
    return (data[at] << 24) | (data[at + 1] << 16) | (data[at + 2] << 8) | data[at + 3]


def _ends(at: int, end: int) -> int:
    """`at`, where a value ends, if that is within the bytes."""
    if at > end:
        raise _Unwalked
    return at


def _walk(data: bytes, at: int, end: int, found: list[tuple[int, str, str, str]], depth: int) -> int:
    """Where the msgpack value at `at` ends (at most `end`), the names of the extensions
    within it added to `found`."""
    if at >= end:
        raise _Unwalked
    head = data[at]
    if head <= 0x7F or head >= 0xE0 or head == 0xC0 or head == 0xC2 or head == 0xC3:  # ints, nil, bools
        return at + 1
    if head <= 0x8F:  # fixmap
        return _walk_items(data, at + 1, end, 2 * (head & 0x0F), found, depth)
    if head <= 0x9F:  # fixarray
        return _walk_items(data, at + 1, end, head & 0x0F, found, depth)
    if head <= 0xBF:  # fixstr
        return _ends(at + 1 + (head & 0x1F), end)
    if head == 0xC4 or head == 0xD9:  # bin 8, str 8
        if at + 2 > end:
            raise _Unwalked
        return _ends(at + 2 + data[at + 1], end)
    if head == 0xC5 or head == 0xDA:  # bin 16, str 16
        return _ends(at + 3 + _u16(data, at + 1, end), end)
    if head == 0xC6 or head == 0xDB:  # bin 32, str 32
        return _ends(at + 5 + _u32(data, at + 1, end), end)
    if head == 0xCC or head == 0xD0:  # uint 8, int 8
        return _ends(at + 2, end)
    if head == 0xCD or head == 0xD1:
        return _ends(at + 3, end)
    if head == 0xCA or head == 0xCE or head == 0xD2:  # float 32, uint 32, int 32
        return _ends(at + 5, end)
    if head == 0xCB or head == 0xCF or head == 0xD3:
        return _ends(at + 9, end)
    if head == 0xDC:  # array 16, array 32, map 16, map 32
        return _walk_items(data, at + 3, end, _u16(data, at + 1, end), found, depth)
    if head == 0xDD:
        return _walk_items(data, at + 5, end, _u32(data, at + 1, end), found, depth)
    if head == 0xDE:
        return _walk_items(data, at + 3, end, 2 * _u16(data, at + 1, end), found, depth)
    if head == 0xDF:
        return _walk_items(data, at + 5, end, 2 * _u32(data, at + 1, end), found, depth)
    if head == 0xC7:  # ext 8, ext 16, ext 32: length, code, payload
        if at + 3 > end:
            raise _Unwalked
        return _walk_ext(data, at + 3, data[at + 1], data[at + 2], end, found, depth)
    if head == 0xC8:
        if at + 4 > end:
            raise _Unwalked
        return _walk_ext(data, at + 4, _u16(data, at + 1, end), data[at + 3], end, found, depth)
    if head == 0xC9:
        if at + 6 > end:
            raise _Unwalked
        return _walk_ext(data, at + 6, _u32(data, at + 1, end), data[at + 5], end, found, depth)
    if 0xD4 <= head <= 0xD8:  # fixext 1, 2, 4, 8, 16: code, payload
        if at + 2 > end:
            raise _Unwalked
        return _walk_ext(data, at + 2, 1 << (head - 0xD4), data[at + 1], end, found, depth)
    raise _Unwalked  # 0xC1, never used


def _walk_items(data: bytes, at: int, end: int, count: int, found: list[tuple[int, str, str, str]], depth: int) -> int:
    if depth >= CLASS_NAMES_MAX_DEPTH:
        raise _Unwalked
    for _ in range(count):
        at = _walk(data, at, end, found, depth + 1)
    return at


def _walk_ext(data: bytes, at: int, size: int, code: int, end: int, found: list[tuple[int, str, str, str]], depth: int) -> int:
    """Where an extension's payload (`size` bytes at `at`) ends, its names and those of the
    extensions within it added to `found` (those within first)."""
    stop = _ends(at + size, end)
    if code > EXT_DELTA_SNAPSHOT or depth >= CLASS_NAMES_MAX_DEPTH:  # (the code is a signed byte: negative ones too)
        raise _Unwalked
    head = data[at] if at < stop else 0xC1
    if code == EXT_NUMPY_ARRAY or code == EXT_DELTA_SNAPSHOT or not (0x90 <= head <= 0x9F or head == 0xDC or head == 0xDD):
        if _walk(data, at, stop, found, depth + 1) != stop:
            raise _Unwalked
        return stop
    if head == 0xDC:
        count, at = _u16(data, at + 1, stop), at + 3
    elif head == 0xDD:
        count, at = _u32(data, at + 1, stop), at + 5
    else:
        count, at = head & 0x0F, at + 1
    named = count >= 4 if code == EXT_METHOD_SINGLE_ARG else count >= 2
    names = ["", "", "", ""]
    for i in range(count):
        if named and (i < 2 or (i == 3 and code == EXT_METHOD_SINGLE_ARG)):
            names[i], at = _text(data, at, stop)
        else:
            at = _walk(data, at, stop, found, depth + 1)
    if at != stop:
        raise _Unwalked
    if named:
        found.append((code, names[0], names[1], names[3]))
    return stop


def _text(data: bytes, at: int, end: int) -> tuple[str, int]:
    """The str at `at`, and where it ends (a value of another type: `_Unwalked`)."""
    if at >= end:
        raise _Unwalked
    head = data[at]
    if 0xA0 <= head <= 0xBF:
        start, size = at + 1, head & 0x1F
    elif head == 0xD9:
        if at + 2 > end:
            raise _Unwalked
        start, size = at + 2, data[at + 1]
    elif head == 0xDA:
        start, size = at + 3, _u16(data, at + 1, end)
    elif head == 0xDB:
        start, size = at + 5, _u32(data, at + 1, end)
    else:
        raise _Unwalked
    stop = _ends(start + size, end)
    return data[start:stop].decode("utf-8"), stop


def type_keys(entries: Iterable[Any], describe: Callable[[Any], str]) -> list[TypeKey]:
    """`allowed_types` entries (classes, or (module, name) tuples) as keys; `describe` makes
    the error for an entry that is neither."""
    keys: list[TypeKey] = []
    for entry in entries:
        if isinstance(entry, type):
            keys.append((entry.__module__, entry.__name__))
        elif isinstance(entry, tuple) and len(entry) >= 2 and all(isinstance(part, str) for part in entry):
            keys.append(tuple(entry))
        else:
            raise TypeError(describe(entry))
    return keys
