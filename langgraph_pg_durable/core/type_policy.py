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
    refused: list[tuple[str, str]] = []

    def hook(code: int, payload: bytes) -> Any:
        inner = _UNPACKB(payload, ext_hook=hook, option=_NON_STR_KEYS)
        if code in _CONSTRUCTORS and isinstance(inner, (list, tuple)) and len(inner) >= 2:
            key = (inner[0], inner[1])
            reason = policy.refusal(key)
            if reason is not None:
                refused.append((f"{inner[0]}.{inner[1]}", reason))
        elif code == EXT_METHOD_SINGLE_ARG and isinstance(inner, (list, tuple)) and len(inner) >= 4:
            if (inner[0], inner[1], inner[3]) not in _SAFE_METHODS:
                refused.append((f"{inner[0]}.{inner[1]}.{inner[3]}", "a method call outside LangGraph's allowlist"))
        return None

    _UNPACKB(data, ext_hook=hook, option=_NON_STR_KEYS)
    return refused


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
