"""The typed array parameters reach the server as the values they hold: text (any
character the encoding has), bytea (any bytes), int4 and int8 at their limits, NULLs and
empty arrays; a value past its type's range is refused before anything is sent."""

from __future__ import annotations

import psycopg
import pytest

import langgraph_pg_durable.adapters  # noqa: F401 - registers the dumpers
from langgraph_pg_durable.core.arrays import ByteaArray, Int4Array, Int8Array, TextArray

CASES = [
    (TextArray(["é", None, "x" * 5000, "", "日本"]), "text[]"),
    (TextArray([]), "text[]"),
    (ByteaArray([b"\x00\xff", None, bytearray(b"z"), memoryview(b"mv"), b""]), "bytea[]"),
    (Int4Array([-(2**31), 2**31 - 1, 0]), "int4[]"),
    (Int8Array([-(2**63), 2**63 - 1, None]), "int8[]"),
    (Int8Array([None]), "int8[]"),
    # One element, the most common array of a step, is built apart:
    (TextArray(["日本"]), "text[]"),
    (TextArray([None]), "text[]"),
    (ByteaArray([b"\x00"]), "bytea[]"),
    (Int4Array([-(2**31)]), "int4[]"),
    (Int8Array([2**63 - 1]), "int8[]"),
]


@pytest.mark.parametrize(("value", "sql_type"), CASES, ids=[f"{t}-{len(v)}" for v, t in CASES])
def test_an_array_parameter_arrives_as_it_was(pg_dsn: str, value: list, sql_type: str) -> None:
    with psycopg.connect(pg_dsn) as conn, conn.cursor(binary=True) as cur:
        # No cast: the parameter's own type is the one its dumper declares.
        cur.execute("SELECT %(v)s, pg_typeof(%(v)s) = %(t)s::regtype, cardinality(%(v)s)", {"v": value, "t": sql_type})
        got, typed, count = cur.fetchone()  # type: ignore[misc]
    assert typed and count == len(value)
    assert got == [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in value]


def test_a_value_out_of_range_is_refused_naming_the_array_type(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn, conn.cursor(binary=True) as cur:
        with pytest.raises(psycopg.DataError, match=r"int4\[\]"):
            cur.execute("SELECT %(v)s", {"v": Int4Array([2**31])})
        with pytest.raises(psycopg.DataError, match=r"int8\[\]"):
            cur.execute("SELECT %(v)s", {"v": Int8Array([2**63, 1])})
