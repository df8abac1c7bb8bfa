"""The addresses of the objects a tuple or a private list holds: identity at memcmp speed.

The list layout asks at every put of a plain list whether the list still begins with the
objects of the version it extends (`chunks.Chunked.same_head`). By identity, not equality:
a str replaced by an equal `StrEnum`, 1 by 1.0 or True, a dict by an equal one in another
order, each compares equal and serializes otherwise. `map(operator.is_, a, b)` answers at
~17 ns an item, a Python-level call each: 1.7-1.9 ms a step for a list of 100,000 items,
the largest part of the saver's own cost at that size.

CPython keeps a tuple's items as an array of object pointers right after its fixed header
(`tuple.__basicsize__`), and a list's behind a pointer in its header; an object's id() is
its address. Two sequences that hold their items alive hold the same objects in the same
order exactly when those arrays are the same bytes. A tuple cannot change; a list can, from
another thread, between reading where its array is and reading the array: only a list no
other thread can reach (a slice just made) is read. Both layouts are checked once, at
import, on a probe; where they do not hold (another Python, another build) FAST is False
and the caller compares with `map(operator.is_, ...)`.

Reading a list this way copies it first, and the copy takes a reference to every item: a
cache miss apiece, ~1.5 ms a put for a list of 100,000 items. Where the build compiled
`_heads.c` (setup.py), `SAME_ITEMS` compares the arrays in C with the GIL held throughout,
so no other thread runs between finding a list's array and reading it, and no item is
touched; `same_head` then copies nothing.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any, Final, Optional


WORD: Final = struct.calcsize("P")  # bytes of an address


def _matches(array: int | None, probe: tuple[Any, ...] | list[Any]) -> bool:
    """Whether the memory at `array` holds the addresses of `probe`'s items."""
    return array is not None and array != 0 and ctypes.string_at(array, len(probe) * WORD) == struct.pack(f"{len(probe)}P", *map(id, probe))


def _tuple_items() -> int | None:
    """Where a tuple's item pointers start, if this interpreter lays tuples out that way."""
    probe = (object(), object(), object())
    try:
        return tuple.__basicsize__ if tuple.__itemsize__ == WORD and _matches(id(probe) + tuple.__basicsize__, probe) else None
    except Exception:  # no ctypes, or ids that are not addresses
        return None


def _list_items_field() -> int | None:
    """Where a list keeps the address of its item array (PyListObject: the variable
    header, then ob_item, then allocated), if this interpreter lays lists out that way."""
    probe = [object(), object(), object()]
    field = list.__basicsize__ - 2 * WORD
    try:
        return field if _matches(ctypes.c_void_p.from_address(id(probe) + field).value, probe) else None
    except Exception:
        return None


def _built_same_items() -> Optional[Callable[[list[Any], int, Any, int], bool]]:
    """`_heads.same_items`, where the build compiled it."""
    try:
        from ._heads import same_items
    except ImportError:  # built without a compiler, or not built (a source checkout)
        return None
    return same_items


_TUPLE_ITEMS = _tuple_items()
_LIST_FIELD = _list_items_field()
FAST = _TUPLE_ITEMS is not None and _LIST_FIELD is not None  # else the functions below are never called
# `same_items(value, start, mine, count)`: whether value[start:start + count] holds the very
# objects of mine[:count] (a list, and a tuple or list); None where `_heads` was not built.
# Rebindable, as FAST is, for the tests that take each path.
SAME_ITEMS: Optional[Callable[[list[Any], int, Any, int], bool]] = _built_same_items()


def pointers(items: tuple[Any, ...]) -> bytes:
    """The addresses of the objects a tuple holds, end to end (only with FAST)."""
    assert _TUPLE_ITEMS is not None
    return ctypes.string_at(id(items) + _TUPLE_ITEMS, len(items) * WORD)


def own_list_pointers(items: list[Any]) -> bytes:
    """The addresses of the objects a list holds, end to end (only with FAST), for a list
    no other thread can reach (a slice just made: see the module)."""
    assert _LIST_FIELD is not None
    array = ctypes.c_void_p.from_address(id(items) + _LIST_FIELD).value
    return ctypes.string_at(array, len(items) * WORD) if array is not None and items else b""
