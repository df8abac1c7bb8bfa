"""What the shells need of psycopg beyond sending a statement: binary dumpers for the
core's typed arrays, and a cheap look at whether a statement returned rows."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import DataError, postgres, pq
from psycopg.adapt import Dumper

from .core.arrays import ByteaArray, Int4Array, Int8Array, TextArray

_LENGTH = struct.Struct("!i")
_NULL = _LENGTH.pack(-1)
_HEAD = struct.Struct("!iiiii")  # dimensions, has nulls, element oid, length, lower bound
_EMPTY = struct.Struct("!iii")  # dimensions (0), has nulls, element oid
_INT4 = struct.Struct("!ii")  # length (4), value
_INT8 = struct.Struct("!iq")  # length (8), value


class _ArrayDumper(Dumper):
    """A one-dimensional array in PostgreSQL's binary format, built in one pass.

    psycopg's generic list dumper looks up a dumper per element and measures the list's
    shape on every call (about 4 µs an array; a put sends two dozen); these arrays are
    flat and of one known type."""

    format = pq.Format.BINARY
    element_type = ""
    _element_oid = 0
    _empty = b""
    _one = b""  # the header of an array of one element, not NULL
    _one_null = b""  # an array of one NULL

    def __init_subclass__(cls) -> None:
        info = postgres.types.get(cls.element_type)
        assert info is not None and info.array_oid
        cls.oid, cls._element_oid, cls._empty = info.array_oid, info.oid, _EMPTY.pack(0, 0, info.oid)
        cls._one, cls._one_null = _HEAD.pack(1, 0, info.oid, 1, 1), _HEAD.pack(1, 1, info.oid, 1, 1) + _NULL

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        self._field = self._field_of()

    def _field_of(self) -> Callable[[Any], bytes]:
        """An element's length word and bytes."""
        raise NotImplementedError

    def dump(self, obj: Any) -> bytes:
        if not obj:
            return self._empty
        field = self._field
        if len(obj) == 1:  # most arrays of a step: a write's one channel, a put's one value
            element = obj[0]
            if element is None:
                return self._one_null
            try:
                return self._one + field(element)
            except struct.error as exc:
                raise DataError(f"an array parameter ({self.element_type}[]) holds a value out of range: {exc}") from None
        parts = [b""]
        has_null = 0
        try:
            for element in obj:
                if element is None:
                    parts.append(_NULL)
                    has_null = 1
                else:
                    parts.append(field(element))
        except struct.error as exc:
            raise DataError(f"an array parameter ({self.element_type}[]) holds a value out of range: {exc}") from None
        parts[0] = _HEAD.pack(1, has_null, self._element_oid, len(obj), 1)
        return b"".join(parts)


class _TextArrayDumper(_ArrayDumper):
    element_type = "text"

    def _field_of(self) -> Callable[[Any], bytes]:
        encoding = self.connection.info.encoding if self.connection is not None else "utf-8"
        pack = _LENGTH.pack

        def field(text: str) -> bytes:
            data = text.encode(encoding)
            return pack(len(data)) + data

        return field


class _ByteaArrayDumper(_ArrayDumper):
    element_type = "bytea"

    def _field_of(self) -> Callable[[Any], bytes]:
        pack = _LENGTH.pack

        def field(data: bytes) -> bytes:
            return pack(len(data)) + bytes(data)

        return field


class _Int4ArrayDumper(_ArrayDumper):
    element_type = "int4"

    def _field_of(self) -> Callable[[Any], bytes]:
        return lambda value: _INT4.pack(4, value)


class _Int8ArrayDumper(_ArrayDumper):
    element_type = "int8"

    def _field_of(self) -> Callable[[Any], bytes]:
        return lambda value: _INT8.pack(8, value)


ARRAY_DUMPERS: dict[type, type[_ArrayDumper]] = {
    TextArray: _TextArrayDumper,
    ByteaArray: _ByteaArrayDumper,
    Int4Array: _Int4ArrayDumper,
    Int8Array: _Int8ArrayDumper,
}
for _cls, _dumper in ARRAY_DUMPERS.items():
    psycopg.adapters.register_dumper(_cls, _dumper)


def has_rows(cursor: Any) -> bool:
    """Whether a statement returned rows; unlike `cursor.description`, builds no Column objects
    (those cost ~75 µs of a 0.3 ms get_tuple)."""
    result = cursor.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK
