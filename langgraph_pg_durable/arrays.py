"""Typed array parameters: lists that psycopg dumps as text[], bytea[], int4[] or int8[] directly.

A plain list makes psycopg scan its elements on every call to guess the array type;
for the ten arrays of a super-step's put and put_writes that guess was a sixth of the
saver's client CPU. The dumpers are psycopg's own, registered for these subclasses.
"""

from __future__ import annotations

import psycopg
from psycopg import postgres, pq


class TextArray(list):
    """A list of str sent as text[]."""


class ByteaArray(list):
    """A list of bytes sent as bytea[]."""


class Int4Array(list):
    """A list of int sent as int4[]."""


class Int8Array(list):
    """A list of int (or None) sent as int8[]."""


def _register() -> None:
    for cls, name in ((TextArray, "text"), (ByteaArray, "bytea"), (Int4Array, "int4"), (Int8Array, "int8")):
        info = postgres.types.get(name)
        assert info is not None and info.array_oid
        dumper = psycopg.adapters.get_dumper_by_oid(info.array_oid, pq.Format.BINARY)
        psycopg.adapters.register_dumper(cls, dumper)


_register()
