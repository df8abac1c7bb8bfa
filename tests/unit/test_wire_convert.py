"""`wire.convert`: the hot path's query texts in PostgreSQL's numbered form, without a server."""

from __future__ import annotations

import pytest
from psycopg.adapt import PyFormat

from langgraph_pg_durable.wire import convert


def test_names_are_numbered_in_order_of_first_use_and_reused() -> None:
    done = convert("SELECT %(b)s, %(a)b, %(b)s WHERE x = %(a)b")
    assert done.text == b"SELECT $1, $2, $1 WHERE x = $2"
    assert done.names == ("b", "a")
    assert done.formats == (PyFormat.AUTO, PyFormat.BINARY)


def test_a_doubled_percent_is_a_percent_sign() -> None:
    assert convert("SELECT format('%%I', %(s)s)").text == b"SELECT format('%I', $1)"


@pytest.mark.parametrize(
    ("query", "message"),
    [("SELECT %s", "only %\\(name\\)s"), ("SELECT %(v)s, %(v)b", "both as"), ("SELECT 5 % 2", "only %\\(name\\)s")],
)
def test_placeholders_it_cannot_number_are_refused(query: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert(query)


def test_the_conversion_is_cached_by_text() -> None:
    assert convert("SELECT %(z)s") is convert("SELECT %(z)s")
