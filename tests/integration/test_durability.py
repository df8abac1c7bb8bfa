"""Durability settings on a real server: setup() logs them (a WARNING on the test server,
which runs with fsync=off) and keeps the report, diagnose() and `lgpd doctor` show whether
the server is a primary and its standbys, and the `synchronous_commit` option is in force
at the commit of every write, on the saver's own pool and on a caller's pool or connection.

The commit-time proof: a deferred constraint trigger runs inside the commit, before the
commit record (a setting local to the transaction is undone only after it), and notes the
synchronous_commit it sees. The sessions here default to synchronous_commit=off.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from typer.testing import CliRunner

from checkpoints import first_put
from langgraph.checkpoint.base import empty_checkpoint
from langgraph_pg_durable import AsyncDurablePostgresSaver, ConfigError, DurablePostgresSaver
from langgraph_pg_durable.cli import app
from langgraph_pg_durable.sql import durability as durability_sql

LOGGER = "langgraph_pg_durable"
DEFAULT_OFF = "-c synchronous_commit=off"


def off_by_default(pg_dsn: str) -> str:
    """The test server's DSN, its sessions committing with synchronous_commit=off."""
    return make_conninfo(pg_dsn, options=DEFAULT_OFF)


def note_commit_settings(pg_dsn: str, schema: str) -> None:
    """A table `commit_settings` in the schema, where each commit that inserts or deletes
    a checkpoint or inserts a write notes, as it commits, its synchronous_commit."""
    s = sql.Identifier(schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {}.commit_settings (relation text, operation text, setting text)").format(s))
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.note_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO {s}.commit_settings VALUES (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit')); "
                "RETURN NULL; END $$"
            ).format(s=s)
        )
        for table, events in (("checkpoints", "INSERT OR DELETE"), ("checkpoint_writes", "INSERT")):
            conn.execute(
                sql.SQL(
                    "CREATE CONSTRAINT TRIGGER note_commit AFTER {events} ON {s}.{table} DEFERRABLE INITIALLY DEFERRED "
                    "FOR EACH ROW EXECUTE FUNCTION {s}.note_commit_setting()"
                ).format(events=sql.SQL(events), s=s, table=sql.Identifier(table))
            )


def commit_settings(pg_dsn: str, schema: str) -> set[tuple[str, str, str]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT relation, operation, setting FROM {}.commit_settings").format(sql.Identifier(schema))
        ).fetchall()
    return set(rows)


def write_a_thread(saver: Any, value: Any = "v") -> None:
    """A put, a put_writes and a delete_thread: each write the saver commits, once."""
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    config = first_put(saver, thread_id, {"a": value})
    saver.put_writes(config, [("a", "w")], "task-1")
    saver.delete_thread(thread_id)


def all_commits(setting: str) -> set[tuple[str, str, str]]:
    return {("checkpoints", "INSERT", setting), ("checkpoint_writes", "INSERT", setting), ("checkpoints", "DELETE", setting)}


# -- setup() and diagnose() -----------------------------------------------------------------


@pytest.mark.parametrize("option", [None, "remote_apply"])
def test_setup_warns_of_fsync_off_and_keeps_the_report(
    pg_dsn: str, schema_name: str, option: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with psycopg.connect(pg_dsn) as conn:
        fsync = conn.execute("SHOW fsync").fetchone()[0]  # type: ignore[index]
    assert fsync == "off", "the test server runs with fsync=off (tests/support/pg_server.py)"
    caplog.set_level(logging.INFO, logger=LOGGER)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, synchronous_commit=option) as saver:
        assert saver.durability is None
        saver.setup()
        report = saver.durability
    assert report is not None
    assert (report.fsync, report.full_page_writes, report.synchronous_commit) == ("off", "on", "on")
    assert (report.in_recovery, report.standbys, report.saver_synchronous_commit) == (False, (), option)
    assert report.problems == ("fsync is off: the server acknowledges commits a crash can lose",)
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(f"schema {schema_name}: fsync is off: the server acknowledges commits a crash can lose; ")
    assert "replication is asynchronous" in record.getMessage()
    assert ("(the saver's commits: remote_apply)" in record.getMessage()) == (option is not None)


async def test_the_async_setup_reports_the_session_setting(pg_dsn: str, schema_name: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with AsyncDurablePostgresSaver.from_conn_string(off_by_default(pg_dsn), schema=schema_name) as saver:
        await saver.setup()
    assert saver.durability is not None and saver.durability.synchronous_commit == "off"
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(messages) == 1 and "synchronous_commit is off: the server acknowledges commits a crash can lose" in messages[0]


def test_setup_on_a_callers_connection_leaves_no_transaction_open(pg_dsn: str, schema_name: str) -> None:
    with psycopg.connect(pg_dsn) as conn:  # not autocommit
        saver = DurablePostgresSaver(conn, schema=schema_name)
        saver.setup()
        assert saver.durability is not None and saver.durability.fsync == "off"
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_setup_goes_on_when_the_settings_cannot_be_read(
    pg_dsn: str, schema_name: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(durability_sql, "READ", "SELECT * FROM lgpd_no_such_view")
    caplog.set_level(logging.INFO, logger=LOGGER)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
        assert saver.durability is None and saver.schema_version() is not None
        first_put(saver, "after-setup", {"a": 1})  # the connection is still good
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.INFO and "durability settings of the server not read (UndefinedTable" in record.getMessage()


def test_a_role_without_superuser_reads_the_settings(pg_dsn: str, schema_name: str) -> None:
    role = f"lgpd_plain_{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema_name), sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(sql.Identifier(schema_name), sql.Identifier(role)))
    try:
        with DurablePostgresSaver.from_conn_string(make_conninfo(pg_dsn, user=role), schema=schema_name) as saver:
            saver.setup()  # the schema is current: no DDL
            found = saver.diagnose()
        assert saver.durability is not None and saver.durability.fsync == "off" and saver.durability.in_recovery is False
        assert found["durability"].problems == saver.durability.problems
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_diagnose_says_primary_and_lists_no_standby(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        found = await saver.adiagnose()
    report = found["durability"]
    assert report.in_recovery is False and report.standbys == ()
    assert (report.fsync, report.synchronous_standby_names) == (found["settings"]["fsync"], found["settings"]["synchronous_standby_names"])
    assert report.notes == (
        "replication is asynchronous (synchronous_standby_names is empty): "
        "a failover to a standby can lose commits the primary acknowledged",
    )


def test_doctor_shows_the_servers_role_its_standbys_and_the_notes(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as saver:
        saver.setup()
    run = CliRunner().invoke
    table = run(app, ["--dsn", pg_dsn, "--schema", schema_name, "doctor"])
    assert table.exit_code == 1  # fsync=off
    lines = table.stdout.splitlines()
    assert "server: a primary, standbys connected: 0" in lines
    assert any(line.startswith("note: replication is asynchronous (synchronous_standby_names is empty)") for line in lines)
    assert "! fsync is off: the server acknowledges commits a crash can lose" in lines
    found = json.loads(run(app, ["--dsn", pg_dsn, "--schema", schema_name, "doctor", "-f", "json"]).stdout)
    durability = found["durability"]
    assert (durability["in_recovery"], durability["standbys"], durability["fsync"]) == (False, [], "off")
    assert found["problems"] == ["fsync is off: the server acknowledges commits a crash can lose"] == durability["problems"]
    assert found["notes"] == durability["notes"] and found["notes"][0].startswith("replication is asynchronous")


# -- the synchronous_commit option ----------------------------------------------------------


@pytest.mark.parametrize("value", ["off", "ON", "2", True])
def test_the_option_is_refused_with_a_bad_value(pg_dsn: str, schema_name: str, value: Any) -> None:
    message = f"synchronous_commit must be None \\(the server's\\) or one of 'local', 'remote_write', 'on', 'remote_apply', got {value!r}"
    with pytest.raises(ConfigError, match=message):
        with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, synchronous_commit=value):
            pass
    with psycopg.connect(pg_dsn) as conn, pytest.raises(ConfigError, match=message):
        DurablePostgresSaver(conn, schema=schema_name, synchronous_commit=value)


@contextmanager
def _own_pool(dsn: str, schema: str, option: str | None, **kwargs: Any) -> Iterator[DurablePostgresSaver]:
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema, synchronous_commit=option, **kwargs) as saver:
        yield saver


@contextmanager
def _callers_connection(dsn: str, schema: str, option: str | None) -> Iterator[DurablePostgresSaver]:
    with psycopg.connect(dsn) as conn:  # not autocommit: the saver's own transactions
        yield DurablePostgresSaver(conn, schema=schema, synchronous_commit=option)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)  # local to each write: gone


@contextmanager
def _callers_pool(dsn: str, schema: str, option: str | None) -> Iterator[DurablePostgresSaver]:
    # The pool the official saver's documentation prescribes.
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(dsn, min_size=1, max_size=2, kwargs=kwargs, open=True) as pool:
        yield DurablePostgresSaver(pool, schema=schema, synchronous_commit=option)
        with pool.connection() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == {"synchronous_commit": "off"}


@pytest.mark.parametrize("shell", [_own_pool, _callers_connection, _callers_pool])
@pytest.mark.parametrize("option", [None, "on", "remote_apply"])
def test_every_write_commits_with_the_option(pg_dsn: str, schema_name: str, shell: Any, option: str | None) -> None:
    dsn = off_by_default(pg_dsn)
    with DurablePostgresSaver.from_conn_string(dsn, schema=schema_name) as saver:
        saver.setup()
    note_commit_settings(pg_dsn, schema_name)
    with shell(dsn, schema_name, option) as saver:
        write_a_thread(saver)
    assert commit_settings(pg_dsn, schema_name) == all_commits(option or "off")


def test_a_write_that_stores_objects_commits_with_the_option(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    dsn = off_by_default(pg_dsn)
    store = {"object_store": (tmp_path / "objects").as_uri(), "offload_threshold": 1024}
    with _own_pool(dsn, schema_name, "remote_write", **store) as saver:
        saver.setup()
        note_commit_settings(pg_dsn, schema_name)
        write_a_thread(saver, "x" * 100_000)  # the put goes with its upload, in a transaction of its own
    assert any(path.is_file() for path in (tmp_path / "objects").rglob("*"))
    assert commit_settings(pg_dsn, schema_name) == all_commits("remote_write")


async def write_a_thread_async(saver: AsyncDurablePostgresSaver) -> None:
    """write_a_thread, awaited."""
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None)
    checkpoint["channel_values"], checkpoint["channel_versions"] = {"a": "v"}, {"a": version}
    root: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    config = await saver.aput(root, checkpoint, {"source": "input", "step": -1}, {"a": version})
    await saver.aput_writes(config, [("a", "w")], "task-1")
    await saver.adelete_thread(thread_id)


async def test_the_async_saver_commits_with_the_option(pg_dsn: str, schema_name: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(off_by_default(pg_dsn), schema=schema_name, synchronous_commit="local") as saver:
        await saver.setup()
        note_commit_settings(pg_dsn, schema_name)
        await write_a_thread_async(saver)
    assert commit_settings(pg_dsn, schema_name) == all_commits("local")


@pytest.mark.parametrize("autocommit", [True, False])
async def test_the_async_saver_on_a_callers_connection_commits_with_the_option(pg_dsn: str, schema_name: str, autocommit: bool) -> None:
    dsn = off_by_default(pg_dsn)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=autocommit) as conn:
        saver = AsyncDurablePostgresSaver(conn, schema=schema_name, synchronous_commit="remote_apply")
        await saver.setup()
        note_commit_settings(pg_dsn, schema_name)
        await write_a_thread_async(saver)
        assert await (await conn.execute("SHOW synchronous_commit")).fetchone() == ("off",)
    assert commit_settings(pg_dsn, schema_name) == all_commits("remote_apply")
