"""`distribute()` and `lgpd distribute` on a real PostgreSQL server.

On plain PostgreSQL (no citus extension) they refuse by name and change nothing, sync and
async. Then, against a stand-in for Citus's catalog and functions (a `pg_dist_partition`
table and `create_distributed_table` / `create_reference_table` functions that record their
calls, first on the search path), what the shell does around the statements: the schema
checks, one transaction, the tables it reports, and a second run that skips them all. The
stand-in checks our side only; what Citus does with the statements it cannot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import sql
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from langgraph_pg_durable import AsyncDurablePostgresSaver, DistributionError, DurablePostgresSaver, StatementError
from langgraph_pg_durable.cli import app
from langgraph_pg_durable.sql import distribute as distribute_sql
from langgraph_pg_durable.sql import routed

ALL_TABLES = (*distribute_sql.DISTRIBUTED_TABLES, *distribute_sql.REFERENCE_TABLES)
WRITE_FUNCTIONS = tuple(routed.FUNCTIONS)
EVERYTHING = (*ALL_TABLES, *WRITE_FUNCTIONS)


def _layout(pg_dsn: str, schema: str) -> list[tuple[Any, ...]]:
    """The schema's relations, their kinds and row estimates: what a distribution would change."""
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute(
            "SELECT c.relname, c.relkind::text, c.relpersistence::text FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY c.relname",
            [schema],
        ).fetchall()


def _put_and_get(saver: DurablePostgresSaver, thread_id: str) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": [1, 2]}
    checkpoint["channel_versions"] = {"a": saver.get_next_version(None, None)}
    config = saver.put(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        checkpoint,
        {"source": "input", "step": -1},
        dict(checkpoint["channel_versions"]),
    )
    fetched = saver.get_tuple(config)
    assert fetched is not None and fetched.checkpoint["channel_values"] == {"a": [1, 2]}


@pytest.fixture
def plain_postgres(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'citus'").fetchone()
    assert row == (0,), "these tests need a server without the citus extension"


def _refusal_says_what_to_do(message: str, schema: str) -> None:
    assert f"schema '{schema}' cannot be distributed" in message
    assert "has no citus extension" in message and "CREATE EXTENSION citus" in message
    assert "coordinator" in message and "nothing was changed" in message


def test_distribute_on_plain_postgres_is_refused_and_changes_nothing(pg_dsn: str, schema_name: str, plain_postgres: None) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        _put_and_get(saver, "before")
        before = _layout(pg_dsn, schema_name)
        with pytest.raises(DistributionError) as refused:
            saver.distribute()
        _refusal_says_what_to_do(str(refused.value), schema_name)
        assert _layout(pg_dsn, schema_name) == before
        assert saver.schema_version() is not None
        _put_and_get(saver, "after")  # the tables still work
        assert saver.get_tuple({"configurable": {"thread_id": "before"}}) is not None


async def test_adistribute_on_plain_postgres_is_refused_and_changes_nothing(pg_dsn: str, schema_name: str, plain_postgres: None) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        await saver.setup()
        before = _layout(pg_dsn, schema_name)
        with pytest.raises(DistributionError) as refused:
            await saver.adistribute()
        _refusal_says_what_to_do(str(refused.value), schema_name)
        assert _layout(pg_dsn, schema_name) == before
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"a": "x"}
        checkpoint["channel_versions"] = {"a": saver.get_next_version(None, None)}
        config = await saver.aput(
            {"configurable": {"thread_id": "after", "checkpoint_ns": ""}},
            checkpoint,
            {"source": "input", "step": -1},
            dict(checkpoint["channel_versions"]),
        )
        fetched = await saver.aget_tuple(config)
        assert fetched is not None and fetched.checkpoint["channel_values"] == {"a": "x"}


def test_distribute_without_citus_is_refused_before_looking_at_the_schema(pg_dsn: str, schema_name: str, plain_postgres: None) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:  # no setup()
        with pytest.raises(DistributionError, match="CREATE EXTENSION citus"):
            saver.distribute()
    assert _layout(pg_dsn, schema_name) == []


def _lgpd(dsn: str, schema: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["--dsn", dsn, "--schema", schema, *args])


def test_lgpd_distribute_on_plain_postgres_exits_1_with_the_message(pg_dsn: str, schema_name: str, plain_postgres: None) -> None:
    assert _lgpd(pg_dsn, schema_name, "setup").exit_code == 0
    before = _layout(pg_dsn, schema_name)
    result = _lgpd(pg_dsn, schema_name, "distribute")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: DistributionError:")
    _refusal_says_what_to_do(" ".join(result.stderr.split()), schema_name)
    assert not result.stdout
    assert _layout(pg_dsn, schema_name) == before
    dry = _lgpd(pg_dsn, schema_name, "distribute", "--dry-run")
    assert dry.exit_code == 0 and dry.stdout == distribute_sql.script(schema_name)


# -- against a stand-in for Citus -------------------------------------------------------


@pytest.fixture
def citus_stand_in(pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A connection string whose sessions find a stand-in pg_dist_partition and Citus's two
    functions first on their search path; the extension check answers Citus 13.2."""
    stand_in = f"{schema_name}_citus"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                """
CREATE SCHEMA {s};
CREATE TABLE {s}.pg_dist_partition (logicalrelid regclass PRIMARY KEY, method text NOT NULL, colocate_with text);
CREATE FUNCTION {s}.create_distributed_table(table_name regclass, distribution_column text, colocate_with text DEFAULT 'default')
RETURNS void LANGUAGE sql AS $$
    INSERT INTO {s}.pg_dist_partition VALUES (table_name, 'hash ' || distribution_column, colocate_with)
$$;
CREATE FUNCTION {s}.create_reference_table(table_name regclass) RETURNS void LANGUAGE sql AS $$
    INSERT INTO {s}.pg_dist_partition VALUES (table_name, 'reference', NULL)
$$;
CREATE TABLE {s}.pg_dist_object (classid oid, objid oid, distribution_argument_index int, colocate_with text, force_delegation bool);
CREATE FUNCTION {s}.create_distributed_function(
    function_name regprocedure, distribution_arg_name text, colocate_with text, force_delegation bool
) RETURNS void LANGUAGE sql AS $$
    INSERT INTO {s}.pg_dist_object
    SELECT 'pg_proc'::regclass, function_name, array_position(p.proargnames, distribution_arg_name) - 1,
           colocate_with, force_delegation
    FROM pg_proc p WHERE p.oid = function_name
$$;"""
            ).format(s=sql.Identifier(stand_in))
        )
    monkeypatch.setattr(distribute_sql, "CITUS_EXTENSION", "SELECT current_database(), '13.2-1'")
    try:
        yield make_conninfo(pg_dsn, options=f"-c search_path={stand_in},public")
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(stand_in)))


def _functions(dsn: str) -> list[tuple[str, int, str, bool]]:
    """The distributed functions the stand-in recorded: name, distribution argument, co-location, delegation."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.pronamespace::regnamespace::text || '.' || p.proname, o.distribution_argument_index, o.colocate_with, "
            "o.force_delegation FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid ORDER BY 1"
        ).fetchall()
    return [(str(r[0]), int(r[1]), str(r[2]), bool(r[3])) for r in rows]


def _recorded(dsn: str) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT logicalrelid::text, method, colocate_with FROM pg_dist_partition ORDER BY method, 1").fetchall()
    return [(str(r[0]), str(r[1]), r[2]) for r in rows]


def test_distribute_runs_every_statement_once_then_skips_them_all(schema_name: str, citus_stand_in: str) -> None:
    with DurablePostgresSaver.from_conn_string(citus_stand_in, schema=schema_name) as saver:
        saver.setup()
        _put_and_get(saver, "t")
        assert saver.distribute() == EVERYTHING
        anchor = f'"{schema_name}".checkpoints'
        assert sorted(_recorded(citus_stand_in)) == sorted(
            [
                (f"{schema_name}.checkpoints", "hash thread_id", "none"),
                *[(f"{schema_name}.{t}", "hash thread_id", anchor) for t in distribute_sql.DISTRIBUTED_TABLES[1:]],
                (f"{schema_name}.schema_migrations", "reference", None),
            ]
        )
        # Each write function routed by its thread argument, in the tables' co-location group.
        assert _functions(citus_stand_in) == sorted(
            (f"{schema_name}.{name}", 2 if name == "lgpd_put_writes" else 0, anchor, True) for name in WRITE_FUNCTIONS
        )
        assert saver.distribute() == ()  # Citus has them all: nothing runs again
        assert len(_recorded(citus_stand_in)) == len(ALL_TABLES)
        assert len(_functions(citus_stand_in)) == len(WRITE_FUNCTIONS)


async def test_adistribute_skips_the_tables_already_distributed(schema_name: str, citus_stand_in: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(citus_stand_in, schema=schema_name) as saver:
        await saver.setup()
        with psycopg.connect(citus_stand_in, autocommit=True) as conn:  # one distributed by hand
            conn.execute(sql.SQL("SELECT create_reference_table({})").format(sql.Literal(f"{schema_name}.schema_migrations")))
        assert await saver.adistribute() == (*distribute_sql.DISTRIBUTED_TABLES, *WRITE_FUNCTIONS)


def test_distribute_refuses_a_schema_without_the_saver_tables(schema_name: str, citus_stand_in: str) -> None:
    with DurablePostgresSaver.from_conn_string(citus_stand_in, schema=schema_name) as saver:
        with pytest.raises(DistributionError, match=r"holds no langgraph-pg-durable tables: run setup\(\)"):
            saver.distribute()
    assert _recorded(citus_stand_in) == []


def test_distribute_is_one_transaction(schema_name: str, citus_stand_in: str) -> None:
    stand_in = f"{schema_name}_citus"
    with psycopg.connect(citus_stand_in, autocommit=True) as conn:  # the last statement fails
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}.create_reference_table(table_name regclass) RETURNS void "
                "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no worker node'; END $$"
            ).format(sql.Identifier(stand_in))
        )
    with DurablePostgresSaver.from_conn_string(citus_stand_in, schema=schema_name) as saver:
        saver.setup()
        with pytest.raises(StatementError, match="no worker node"):
            saver.distribute()
        assert _recorded(citus_stand_in) == []  # the tables distributed before it were rolled back
        assert _functions(citus_stand_in) == []
        _put_and_get(saver, "t")


def test_lgpd_distribute_lists_what_it_did(schema_name: str, citus_stand_in: str) -> None:
    assert _lgpd(citus_stand_in, schema_name, "setup").exit_code == 0
    first = _lgpd(citus_stand_in, schema_name, "distribute")
    assert first.exit_code == 0, first.output
    lines = first.stdout.splitlines()
    assert lines[0] == "checkpoints: distributed by thread_id"
    assert "schema_migrations: reference table" in lines
    assert "lgpd_put: write function, run by the worker of its p_thread_id" in lines
    assert lines[-1] == f"schema {schema_name!r}: 9 of 9 tables and 2 of 2 write functions distributed now"
    again = _lgpd(citus_stand_in, schema_name, "distribute")
    assert again.exit_code == 0 and "checkpoints: distributed by thread_id (already)" in again.stdout
    assert again.stdout.splitlines()[-1] == f"schema {schema_name!r}: 0 of 9 tables and 0 of 2 write functions distributed now"
