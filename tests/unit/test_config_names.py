"""Schema names and object prefixes that are not strings or not key prefixes: refused by
name when the saver is built, before any connection is made."""

from __future__ import annotations

import psycopg
import pytest

from langgraph_pg_durable import ConfigError, DurablePostgresSaver


@pytest.mark.parametrize("name", [123, None, b"bytes"])
def test_a_schema_that_is_not_a_string_is_refused(name: object) -> None:
    with pytest.raises(ConfigError, match="schema"):
        DurablePostgresSaver(psycopg.Connection, schema=name)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["", "/leading", "trailing/", "a//b", "a/../b", ".", "sp ace", "new\nline", 7])
def test_an_object_prefix_that_is_not_a_key_prefix_is_refused(prefix: object) -> None:
    with pytest.raises(ConfigError, match="object_prefix"):
        DurablePostgresSaver(psycopg.Connection, object_store="memory:///", object_prefix=prefix)  # type: ignore[arg-type]
