"""Schema names and object prefixes: plain identifiers only, refused by name before any I/O.

A name once went into single-quoted EXECUTE strings of the migrations and through the
hot statements' whitespace compaction: `'||pg_sleep(1)||'` made setup() sleep, `it's`
could not be set up, and `"a  b"` wrote into `"a b"`.
"""

from __future__ import annotations

import psycopg
import pytest

from checkpoints import first_put
from langgraph_pg_durable import AsyncDurablePostgresSaver, ConfigError, DurablePostgresSaver

HOSTILE = [
    "x'||pg_sleep(1)||'",
    "x' || (SELECT string_agg(rolname, ',') FROM pg_roles) || '",
    "it's",
    "a  b",
    "a--b",
    'quo"te',
    "semi;colon",
    "new\nline",
    "",
    "1starts_with_a_digit",
    "x" * 64,
    "pg_catalog_like",
    "ünïcode",
]


def _schemas(pg_dsn: str) -> set[str]:
    with psycopg.connect(pg_dsn) as conn:
        return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_or_unusable_schema_name_is_refused_by_name_before_any_io(pg_dsn: str, schema_name: str, name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        config = first_put(saver, "before", {"v": "kept"})
    before = _schemas(pg_dsn)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(ConfigError, match="schema .*not a plain PostgreSQL identifier|reserves") as refused:
            DurablePostgresSaver(conn, schema=name)
        with pytest.raises(ConfigError):
            AsyncDurablePostgresSaver(conn, schema=name)  # type: ignore[arg-type]
    assert repr(name)[:40] in str(refused.value)
    assert _schemas(pg_dsn) == before  # nothing created, nothing run
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        assert fresh.get_tuple(config).checkpoint["channel_values"] == {"v": "kept"}


def test_a_mixed_case_name_with_digits_is_used_exactly(pg_dsn: str) -> None:
    name = "Lgpd_Mixed_Case_42"
    try:
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
            saver.setup()
            config = first_put(saver, "t", {"v": "kept"})
        assert name in _schemas(pg_dsn) and name.lower() not in _schemas(pg_dsn)
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as fresh:
            assert fresh.get_tuple(config).checkpoint["channel_values"] == {"v": "kept"}
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
