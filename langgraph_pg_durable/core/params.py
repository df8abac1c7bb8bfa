"""Statement parameters in PostgreSQL's wire format: the bytes, type oids and formats
psycopg's Transformer sends, without its dispatch per parameter.

A step sends some forty parameters (the writer lock, the put, the put_writes), most of them
text; the Transformer looks up a dumper for each. Here one loop covers the types the
statements use: a str as text of unknown type (the server infers it, as psycopg leaves
it), an int as the smallest integer type that holds it, bool, bytes, None, and the core's
typed arrays (`arrays.py`) in binary. Anything else, and an array element out of its
type's range, is left to the Transformer (`dumped` returns None), which sends it or
raises the error psycopg raises. The shells' psycopg dumpers for the arrays
(`adapters.py`) call `array_bytes` too, so both paths send the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

from .arrays import ByteaArray, Int4Array, Int8Array, TextArray

TEXT_FORMAT: Final = 0
BINARY_FORMAT: Final = 1

# PostgreSQL's built-in type oids (fixed by the server's catalog, pg_type.dat).
UNKNOWN_OID: Final = 0
BOOL_OID: Final = 16
BYTEA_OID: Final = 17
INT8_OID: Final = 20
INT2_OID: Final = 21
INT4_OID: Final = 23
TEXT_OID: Final = 25
ARRAY_OIDS: Final = {TEXT_OID: 1009, BYTEA_OID: 1001, INT4_OID: 1007, INT8_OID: 1016}
# The element type of each typed array.
ELEMENT_OIDS: Final[dict[type, int]] = {TextArray: TEXT_OID, ByteaArray: BYTEA_OID, Int4Array: INT4_OID, Int8Array: INT8_OID}

_INT2: Final = struct.Struct("!h")
_INT4: Final = struct.Struct("!i")
_INT8: Final = struct.Struct("!q")
_LENGTH: Final = struct.Struct("!i")
_NULL: Final = _LENGTH.pack(-1)
_HEAD: Final = struct.Struct("!iiiii")  # dimensions, has nulls, element oid, length, lower bound
_EMPTY: Final = struct.Struct("!iii")  # dimensions (0), has nulls, element oid
_INT4_FIELD: Final = struct.Struct("!ii")  # length (4), value
_INT8_FIELD: Final = struct.Struct("!iq")  # length (8), value


def _field(element_oid: int, element: Any, encoding: str) -> bytes:
    """An array element's length word and bytes (struct.error when out of its type's range)."""
    if element_oid == TEXT_OID:
        data: bytes = element.encode(encoding)
        return _LENGTH.pack(len(data)) + data
    if element_oid == BYTEA_OID:
        return _LENGTH.pack(len(element)) + bytes(element)
    if element_oid == INT4_OID:
        return _INT4_FIELD.pack(4, element)
    return _INT8_FIELD.pack(8, element)


def array_bytes(element_oid: int, values: Sequence[Any], encoding: str = "utf-8") -> bytes:
    """A one-dimensional array of `element_oid` elements (None: NULL) in PostgreSQL's binary
    format, built in one pass; struct.error for an element out of its type's range."""
    if not values:
        return _EMPTY.pack(0, 0, element_oid)
    parts = [b""]
    has_null = 0
    for element in values:
        if element is None:
            parts.append(_NULL)
            has_null = 1
        else:
            parts.append(_field(element_oid, element, encoding))
    parts[0] = _HEAD.pack(1, has_null, element_oid, len(values), 1)
    return b"".join(parts)


def dumped(values: Sequence[Any], auto: Sequence[bool]) -> tuple[list[bytes | None], tuple[int, ...], list[int]] | None:
    """The parameters' bytes, type oids and formats as the Transformer would send them (text
    in UTF-8); `auto`: whether each placeholder is `%(name)s` (a str then goes as text of
    unknown type). None when one is of a type not covered here (see the module)."""
    data: list[bytes | None] = []
    oids: list[int] = []
    formats: list[int] = []
    for value, is_auto in zip(values, auto):
        kind = type(value)
        if kind is str and is_auto:
            data.append(value.encode())
            oids.append(UNKNOWN_OID)
            formats.append(TEXT_FORMAT)
        elif value is None:
            data.append(None)
            oids.append(UNKNOWN_OID)
            formats.append(TEXT_FORMAT)
        elif kind is int:
            if -(1 << 15) <= value < 1 << 15:
                data.append(_INT2.pack(value))
                oids.append(INT2_OID)
            elif -(1 << 31) <= value < 1 << 31:
                data.append(_INT4.pack(value))
                oids.append(INT4_OID)
            elif -(1 << 63) <= value < 1 << 63:
                data.append(_INT8.pack(value))
                oids.append(INT8_OID)
            else:
                return None
            formats.append(BINARY_FORMAT)
        elif kind is bool:
            data.append(b"\x01" if value else b"\x00")
            oids.append(BOOL_OID)
            formats.append(BINARY_FORMAT)
        elif kind is bytes:
            data.append(value)
            oids.append(BYTEA_OID)
            formats.append(BINARY_FORMAT)
        else:
            element_oid = ELEMENT_OIDS.get(kind)
            if element_oid is None:
                return None
            try:
                data.append(array_bytes(element_oid, value))
            except struct.error:
                return None  # the Transformer's dumper raises psycopg's DataError for it
            oids.append(ARRAY_OIDS[element_oid])
            formats.append(BINARY_FORMAT)
    return data, tuple(oids), formats
