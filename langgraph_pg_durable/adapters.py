"""What the shells need of psycopg beyond sending a statement: the array dumpers of the
core's typed arrays, and a cheap look at whether a statement returned rows."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import postgres, pq

from .core.arrays import ByteaArray, Int4Array, Int8Array, TextArray


def _register() -> None:
    for cls, name in ((TextArray, "text"), (ByteaArray, "bytea"), (Int4Array, "int4"), (Int8Array, "int8")):
        info = postgres.types.get(name)
        assert info is not None and info.array_oid
        dumper = psycopg.adapters.get_dumper_by_oid(info.array_oid, pq.Format.BINARY)
        psycopg.adapters.register_dumper(cls, dumper)


_register()


def has_rows(cursor: Any) -> bool:
    """Whether a statement returned rows; unlike `cursor.description`, builds no Column objects
    (those cost ~75 µs of a 0.3 ms get_tuple)."""
    result = cursor.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK
