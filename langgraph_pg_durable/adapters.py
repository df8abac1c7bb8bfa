"""What the shells need of psycopg beyond sending a statement: binary dumpers for the
core's typed arrays, and a cheap look at whether a statement returned rows."""

from __future__ import annotations

import struct
from typing import Any

import psycopg
from psycopg import DataError, postgres, pq
from psycopg.adapt import Dumper

from .core import params
from .core.arrays import ByteaArray, Int4Array, Int8Array, TextArray


class _ArrayDumper(Dumper):
    """A one-dimensional array in PostgreSQL's binary format, built in one pass
    (`core.params.array_bytes`, as the hot path sends it).

    psycopg's generic list dumper looks up a dumper per element and measures the list's
    shape on every call (about 4 µs an array; a put sends two dozen); these arrays are
    flat and of one known type."""

    format = pq.Format.BINARY
    element_type = ""
    _element_oid = 0

    def __init_subclass__(cls) -> None:
        info = postgres.types.get(cls.element_type)
        assert info is not None and info.array_oid == params.ARRAY_OIDS[info.oid]
        cls.oid, cls._element_oid = info.array_oid, info.oid

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        # Only text is encoded (in the connection's encoding): `info.encoding` makes an
        # object, which the other arrays' dumpers need not pay for.
        connection = self.connection
        text = self._element_oid == params.TEXT_OID
        self._encoding = connection.info.encoding if text and connection is not None else "utf-8"

    def dump(self, obj: Any) -> bytes:
        try:
            return params.array_bytes(self._element_oid, obj, self._encoding)
        except struct.error as exc:
            raise DataError(f"an array parameter ({self.element_type}[]) holds a value out of range: {exc}") from None


class _TextArrayDumper(_ArrayDumper):
    element_type = "text"


class _ByteaArrayDumper(_ArrayDumper):
    element_type = "bytea"


class _Int4ArrayDumper(_ArrayDumper):
    element_type = "int4"


class _Int8ArrayDumper(_ArrayDumper):
    element_type = "int8"


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
