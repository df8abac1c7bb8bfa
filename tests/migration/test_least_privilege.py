"""A two-role deployment: an owner runs setup(), the app role has USAGE and DML only."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_pg_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, StatementError
from langgraph_pg_durable.sql.schema import migrations

# What the README's two-role deployment grants the app role, for a schema `s` and role `r`.
APP_GRANTS = [
    "GRANT USAGE ON SCHEMA {s} TO {r}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}",
]


@pytest.fixture
def app_role(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """A login role with no privilege of its own; yields (name, DSN that logs in as it)."""
    name, password = f"lgpd_app_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), sql.Literal(password)))
        database = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(sql.SQL("REVOKE CREATE ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))
    params = conninfo_to_dict(pg_dsn)
    params.update(user=name, password=password)
    try:
        yield name, make_conninfo(**params)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _grant(pg_dsn: str, schema: str, role: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for grant in APP_GRANTS:
            conn.execute(sql.SQL(grant).format(s=sql.Identifier(schema), r=sql.Identifier(role)))


def test_the_app_role_runs_setup_and_every_operation_without_create(pg_dsn: str, schema_name: str, app_role: tuple[str, str]) -> None:
    role, app_dsn = app_role
    with DurablePostgresSaver.from_conn_string(app_dsn, schema=schema_name) as app:
        with pytest.raises(StatementError, match="42501"):  # it cannot create the schema itself
            app.setup()
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as owner:
        owner.setup()
    _grant(pg_dsn, schema_name, role)
    with DurablePostgresSaver.from_conn_string(app_dsn, schema=schema_name) as app:
        app.setup()  # current already: reads the ledger, runs no DDL
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"items": [f"item {i}" for i in range(2000)], "n": 1}
        checkpoint["channel_versions"] = {"items": app.get_next_version(None, None), "n": app.get_next_version(None, None)}
        config = app.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            checkpoint,
            {"source": "input", "step": -1},
            dict(checkpoint["channel_versions"]),
        )
        app.put_writes(config, [("items", ["more"]), ("n", 2)], "task")
        assert app.get_tuple(config).checkpoint["channel_values"]["n"] == 1
        assert len(list(app.list(None))) == 1
        app.copy_thread("t", "u")
        app.prune(["u"])
        app.delete_for_runs(["nothing"])
        app.delete_thread("u")
        assert app.get_tuple({"configurable": {"thread_id": "u"}}) is None
    with psycopg.connect(pg_dsn) as conn:
        ledger = conn.execute(sql.SQL("SELECT count(*) FROM {}.schema_migrations").format(sql.Identifier(schema_name)))
        assert ledger.fetchone()[0] == len(migrations())


async def test_the_async_app_role_runs_setup_on_a_current_schema(pg_dsn: str, schema_name: str, app_role: tuple[str, str]) -> None:
    role, app_dsn = app_role
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as owner:
        owner.setup()
    _grant(pg_dsn, schema_name, role)
    async with AsyncDurablePostgresSaver.from_conn_string(app_dsn, schema=schema_name) as app:
        await app.setup()
        assert await app.aget_tuple({"configurable": {"thread_id": "none"}}) is None
